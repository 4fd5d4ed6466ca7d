package daytona

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSSHAccessAndSnapshotWire pins the requests of the SSH access and
// snapshot calls (path, query, body) and that the SSH token and command
// are redacted from every later error of the client.
func TestSSHAccessAndSnapshotWire(t *testing.T) {
	t.Parallel()
	f := newFixture(t, WithRetryPolicy(RetryPolicy{MaxRetries: -1}))
	const token = "sshTOKENsecret0123456789"
	f.handle("POST /api/sandbox/{id}/ssh-access", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "sb-1", r.PathValue("id"))
		assert.Equal(t, "15", r.URL.Query().Get("expiresInMinutes"))
		writeJSON(w, 200, map[string]string{"id": "a", "sandboxId": "sb-1", "token": token, "expiresAt": "2026-01-01T00:15:00Z",
			"createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z", "sshCommand": "ssh " + token + "@ssh.example"})
	})
	f.handle("DELETE /api/sandbox/{id}/ssh-access", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, token, r.URL.Query().Get("token"))
		writeJSON(w, 200, sandboxJSON("sb-1", "n", StateStarted))
	})
	f.handle("POST /api/sandbox/{id}/snapshot", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		b, _ := io.ReadAll(r.Body)
		require.NoError(t, json.Unmarshal(b, &body))
		assert.Equal(t, map[string]any{"name": "paperclip-env-1"}, body)
		writeJSON(w, 200, sandboxJSON("sb-1", "n", StateSnapshotting))
	})
	f.handle("GET /api/snapshots/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "paperclip-env-1" {
			apiError(w, 404, fmt.Sprintf("Snapshot %s not found (token %s)", r.PathValue("id"), token))
			return
		}
		writeJSON(w, 200, map[string]any{"id": "snap-1", "name": "paperclip-env-1", "state": "active", "general": false, "errorReason": nil})
	})
	f.handle("DELETE /api/snapshots/{id}", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "snap-1", r.PathValue("id"))
		w.WriteHeader(200)
	})

	ctx := t.Context()
	acc, _, err := f.c.Sandboxes.CreateSSHAccess(ctx, "sb-1", 15)
	require.NoError(t, err)
	assert.Equal(t, token, acc.Token)
	_, err = f.c.Sandboxes.RevokeSSHAccess(ctx, "sb-1", token)
	require.NoError(t, err)
	sb, _, err := f.c.Sandboxes.CreateSnapshot(ctx, "sb-1", "paperclip-env-1")
	require.NoError(t, err)
	assert.Equal(t, StateSnapshotting, sb.State)
	sn, _, err := f.c.Snapshots.Get(ctx, "paperclip-env-1")
	require.NoError(t, err)
	assert.Equal(t, SnapshotActive, sn.State)
	_, err = f.c.Snapshots.Delete(ctx, sn.ID)
	require.NoError(t, err)

	_, _, err = f.c.Snapshots.Get(ctx, "other")
	require.ErrorIs(t, err, ErrNotFound)
	assert.NotContains(t, err.Error(), token, "a learned SSH token is redacted from later errors")

	// Bad arguments fail before any request.
	_, _, err = f.c.Sandboxes.CreateSSHAccess(ctx, "sb-1", -1)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, _, err = f.c.Sandboxes.CreateSnapshot(ctx, "sb-1", " ")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, _, err = f.c.Snapshots.Get(ctx, "")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = f.c.Snapshots.Delete(ctx, "")
	assert.ErrorIs(t, err, ErrInvalidArgument)
}
