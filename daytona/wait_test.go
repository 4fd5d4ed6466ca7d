package daytona

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// Only a wait for the sandbox to be gone takes "destroyed" as its end: a
// wait for started that sees it keeps polling (the state Daytona reports
// for a name being reused can lag), and returns the sandbox once it runs.
// (Planted: the gone-only condition dropped, so WaitUntilStarted returned
// (nil, nil) for a destroyed sandbox.)
func TestOnlyAGoneWaitEndsOnDestroyed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var n atomic.Int32
	f.handle("GET /api/sandbox/{id}", func(w http.ResponseWriter, r *http.Request) {
		state := StateDestroyed
		if n.Add(1) > 2 {
			state = StateStarted
		}
		writeJSON(w, 200, sandboxJSON(r.PathValue("id"), "x", state))
	})
	sb, err := f.c.Sandboxes.WaitUntilStarted(t.Context(), "s")
	require.NoError(t, err)
	require.NotNil(t, sb)
	require.Equal(t, StateStarted, sb.State)
	require.EqualValues(t, 3, n.Load())

	n.Store(0)
	require.NoError(t, f.c.Sandboxes.WaitUntilGone(t.Context(), "s"), "gone: destroyed ends the wait")
	require.EqualValues(t, 1, n.Load())
}

// A sandbox in error that Daytona is deleting (desiredState destroyed)
// does not end a wait for it to be gone: the wait goes on until the 404.
// Any other wait, or an errored sandbox not being deleted, ends with the
// state error. (Sample-5 bug 30: the desired-state condition dropped.)
func TestAnErroredSandboxBeingDeletedIsWaitedOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var n atomic.Int32
	desired := StateDestroyed
	f.handle("GET /api/sandbox/{id}", func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > 2 {
			apiError(w, 404, "Sandbox not found")
			return
		}
		sb := sandboxJSON(r.PathValue("id"), "x", StateError)
		sb["desiredState"] = desired
		writeJSON(w, 200, sb)
	})
	require.NoError(t, f.c.Sandboxes.WaitUntilGone(t.Context(), "s"))
	require.EqualValues(t, 3, n.Load(), "polled until the 404")

	n.Store(0)
	_, err := f.c.Sandboxes.WaitUntilStarted(t.Context(), "s")
	var se *SandboxStateError
	require.ErrorAs(t, err, &se, "a wait for started ends on error, whatever is desired")
	require.Equal(t, StateError, se.State)

	n.Store(0)
	desired = StateStarted
	require.ErrorAs(t, f.c.Sandboxes.WaitUntilGone(t.Context(), "s"), &se, "an errored sandbox nobody deletes ends the wait")
	require.EqualValues(t, 1, n.Load())
}
