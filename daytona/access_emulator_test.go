package daytona_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// TestEmulatorSSHAccessPreviewAndSnapshots drives the emulator's SSH
// access, preview URL and snapshot routes with the client.
func TestEmulatorSSHAccessPreviewAndSnapshots(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	srv, c := env.Server, env.Client
	ctx := t.Context()
	sb := env.StartSandbox(t, nil)

	// SSH access: minted with the requested lifetime, listed, revoked.
	acc, _, err := c.Sandboxes.CreateSSHAccess(ctx, sb.ID, 5)
	require.NoError(t, err)
	assert.Equal(t, sb.ID, acc.SandboxID)
	assert.Equal(t, "ssh "+acc.Token+"@"+daytonatest.SSHHost, acc.SSHCommand)
	require.Len(t, srv.SSHAccess(sb.ID), 1)
	_, err = c.Sandboxes.RevokeSSHAccess(ctx, sb.ID, acc.Token)
	require.NoError(t, err)
	assert.Empty(t, srv.SSHAccess(sb.ID))
	_, _, err = c.Sandboxes.CreateSSHAccess(ctx, "no-such-sandbox", 0)
	assert.ErrorIs(t, err, daytona.ErrNotFound)

	// Preview URL: Daytona's https shape; a rotated token changes nothing else.
	pv, _, err := c.Sandboxes.PreviewURL(ctx, sb.ID, 43127)
	require.NoError(t, err)
	assert.Equal(t, "https://43127-"+strings.ToLower(sb.ID)+"."+daytonatest.PreviewDomain, pv.URL)
	before, _ := srv.Sandbox(sb.ID)
	rotated, err := srv.RotatePreviewToken(sb.ID)
	require.NoError(t, err)
	pv2, _, err := c.Sandboxes.PreviewURL(ctx, sb.ID, 43127)
	require.NoError(t, err)
	assert.Equal(t, rotated, pv2.Token)
	assert.NotEqual(t, pv.Token, pv2.Token)
	after, _ := srv.Sandbox(sb.ID)
	assert.Equal(t, before.State, after.State)

	// Snapshot: snapshotting, back to started, active; unique name; deleted.
	got, _, err := c.Sandboxes.CreateSnapshot(ctx, sb.ID, "tmpl-1")
	require.NoError(t, err)
	assert.Equal(t, daytona.StateSnapshotting, got.State)
	_, err = c.Sandboxes.WaitUntilStarted(ctx, sb.ID)
	require.NoError(t, err)
	sn, _, err := c.Snapshots.Get(ctx, "tmpl-1")
	require.NoError(t, err)
	assert.Equal(t, daytona.SnapshotActive, sn.State)
	byID, _, err := c.Snapshots.Get(ctx, sn.ID)
	require.NoError(t, err)
	assert.Equal(t, "tmpl-1", byID.Name)
	_, _, err = c.Sandboxes.CreateSnapshot(ctx, sb.ID, "tmpl-1")
	assert.ErrorIs(t, err, daytona.ErrConflict)
	require.Equal(t, []daytonatest.SnapshotInfo{{ID: sn.ID, Name: "tmpl-1", State: "active", SourceSandboxID: sb.ID}}, srv.Snapshots())
	_, err = c.Snapshots.Delete(ctx, "tmpl-1")
	assert.ErrorIs(t, err, daytona.ErrNotFound, "delete takes the id, not the name")
	_, err = c.Snapshots.Delete(ctx, sn.ID)
	require.NoError(t, err)
	_, _, err = c.Snapshots.Get(ctx, "tmpl-1")
	assert.ErrorIs(t, err, daytona.ErrNotFound)
	assert.Empty(t, srv.Snapshots())
}

// TestEmulatorRefusesBadSSHAndSnapshotRequests: what the client never
// sends, the emulator still answers with Daytona's 400, 404 and 409.
func TestEmulatorRefusesBadSSHAndSnapshotRequests(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	srv := env.Server
	sb := env.StartSandbox(t, nil)
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/sandbox/" + sb.ID + "/ssh-access?expiresInMinutes=abc", "", 400},
		{"POST", "/sandbox/" + sb.ID + "/ssh-access?expiresInMinutes=0", "", 400},
		{"POST", "/sandbox/" + sb.ID + "/ssh-access?expiresInMinutes=1.5", "", 400},
		{"POST", "/sandbox/no-such/ssh-access", "", 404},
		{"POST", "/sandbox/" + sb.ID + "/snapshot", `{}`, 400},
		{"POST", "/sandbox/" + sb.ID + "/snapshot", `{"name":"  "}`, 400},
		{"POST", "/sandbox/" + sb.ID + "/snapshot", `not json`, 400},
		{"POST", "/sandbox/" + sb.ID + "/snapshot", `{"name":"m","includeMemory":true}`, 400},
		{"DELETE", "/snapshots/no-such-id", "", 404},
	} {
		req, err := http.NewRequestWithContext(t.Context(), c.method, srv.URL()+c.path, strings.NewReader(c.body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+srv.APIKey())
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, c.status, resp.StatusCode, "%s %s %s", c.method, c.path, c.body)
	}
	assert.Empty(t, srv.Snapshots())
	assert.Empty(t, srv.SSHAccess(sb.ID))
}
