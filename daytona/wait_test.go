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
