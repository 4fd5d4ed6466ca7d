package main

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
	"github.com/daytonaworker/daytona-worker/provider"
)

// trialEnv is a driver on an emulator, as doctor --create uses it.
type trialEnv struct {
	t   *testing.T
	srv *daytonatest.Server
	d   *provider.Driver
	cfg map[string]any
}

func newTestEnv(t *testing.T, cfg map[string]any) *trialEnv {
	env := testenv.New(t)
	retry := daytona.RetryPolicy{MaxRetries: 2, BackOff: testenv.FastBackOff,
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }}
	e := &trialEnv{t: t, srv: env.Server, cfg: map[string]any{"apiKey": env.Server.APIKey(), "apiUrl": env.Server.URL(), "timeoutMs": 20000}}
	maps.Copy(e.cfg, cfg)
	e.d = provider.New(provider.Options{Env: func(string) (string, bool) { return "", false },
		HTTPClient: &http.Client{}, PollBackOff: testenv.FastBackOff, RetryPolicy: &retry})
	return e
}

func (e *trialEnv) trial(ctx context.Context) (trialReport, []string) {
	e.t.Helper()
	raw, err := json.Marshal(e.cfg)
	require.NoError(e.t, err)
	var seen []string
	rep := runTrial(ctx, e.d, raw, func(s trialStep) { seen = append(seen, s.Name) })
	return rep, seen
}

// TestTrialRunsALeaseAndLeavesNothing: the doctor's --create runs the
// methods a run uses, in order, and the sandbox is gone at the end.
func TestTrialRunsALeaseAndLeavesNothing(t *testing.T) {
	e := newTestEnv(t, nil)
	rep, seen := e.trial(context.Background())
	require.True(t, trialOK(rep), "%+v", rep.Steps)
	assert.Equal(t, []string{"acquire", "execute echo ok", "sync in", "sync out", "destroy"}, seen)
	assert.Empty(t, rep.Leftover)
	assert.Empty(t, e.srv.Sandboxes(), "nothing left on Daytona")
	assert.Equal(t, 1, e.srv.CountRequests("POST", "/sandbox"))
}

// TestTrialInterruptedLeavesNothing: Ctrl-C at any point of the trial
// (here during the sync, and during a create whose reply never comes,
// once Daytona made the sandbox) still leaves no sandbox behind. The
// Ctrl-C waits for the sandbox, not for the fault's hit: the emulator
// counts the hit before it performs the create, and a trial interrupted
// before the sandbox exists cannot find it (a stress run did that; see
// TestTrialNamesACreateItNeverSaw).
func TestTrialInterruptedLeavesNothing(t *testing.T) {
	for name, f := range map[string]daytonatest.Fault{
		"during the sync":        {Method: "POST", Route: "/files/bulk-upload", Hang: true},
		"create without a reply": {Method: "POST", Route: "/sandbox", Perform: true, Hang: true},
	} {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t, nil)
			h := e.srv.Inject(f)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				_ = e.srv.Await(ctx, func() bool { return h.Hits() > 0 && len(e.srv.Sandboxes()) > 0 })
				cancel() // the operator's Ctrl-C
			}()
			rep, seen := e.trial(ctx)
			assert.False(t, trialOK(rep))
			assert.Equal(t, "cleanup", seen[len(seen)-1])
			assert.NoError(t, rep.Steps[len(rep.Steps)-1].Err)
			assert.Empty(t, rep.Leftover)
			assert.Empty(t, e.srv.Sandboxes(), "the interrupted trial left nothing")
		})
	}
}

// TestTrialNamesACreateItNeverSaw: Ctrl-C during a create Daytona has
// not answered and no sandbox of that name is visible: the trial cannot
// prove nothing was made (Daytona may still make it), so it names the
// creation name instead of reporting nothing left behind.
func TestTrialNamesACreateItNeverSaw(t *testing.T) {
	e := newTestEnv(t, nil)
	h := e.srv.Inject(daytonatest.Fault{Method: "POST", Route: "/sandbox", Hang: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = e.srv.Await(ctx, func() bool { return h.Hits() > 0 })
		cancel() // the operator's Ctrl-C
	}()
	rep, seen := e.trial(ctx)
	require.False(t, trialOK(rep))
	require.Equal(t, "cleanup", seen[len(seen)-1])
	last := rep.Steps[len(rep.Steps)-1]
	require.ErrorIs(t, last.Err, cleanup.ErrNotObserved)
	require.True(t, strings.HasPrefix(rep.Leftover, cleanup.CreationNamePrefix), rep.Leftover)
	require.Contains(t, last.Err.Error(), rep.Leftover)
}

// TestTrialNamesWhatItCouldNotRemove: when Daytona refuses every delete,
// the report names the sandbox, so the operator can sweep it.
func TestTrialNamesWhatItCouldNotRemove(t *testing.T) {
	e := newTestEnv(t, map[string]any{"timeoutMs": 2000})
	e.srv.Inject(daytonatest.Fault{Method: "POST", Route: "/files/bulk-upload", Status: 400})
	e.srv.Inject(daytonatest.Fault{Method: "DELETE", Route: "/sandbox/{sandboxIdOrName}", Status: 500})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, _ := e.trial(ctx)
	require.False(t, trialOK(rep))
	sbs := e.srv.Sandboxes()
	require.Len(t, sbs, 1)
	assert.Equal(t, sbs[0].Name, rep.Leftover)
}

// trialOK: every step succeeded and nothing is left.
func trialOK(r trialReport) bool {
	for _, s := range r.Steps {
		if s.Err != nil {
			return false
		}
	}
	return r.Leftover == "" && len(r.Steps) > 0
}
