package cleanup

import (
	"context"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// ownedSandbox starts a sandbox exactly as an acquire names and labels it.
func ownedSandbox(t *testing.T, env *testenv.Env, company, environment, run string) *daytona.Sandbox {
	t.Helper()
	attempt := NewAttemptID()
	labels, err := OwnershipLabels(company, environment, run, attempt, false)
	require.NoError(t, err)
	return env.StartSandbox(t, &daytona.CreateSandboxRequest{Name: CreationName(attempt), Labels: labels}).Sandbox
}

func ids(sbs []daytona.Sandbox) []string {
	var out []string
	for _, sb := range sbs {
		out = append(out, sb.ID)
	}
	return out
}

func alive(t *testing.T, env *testenv.Env, id string) bool {
	t.Helper()
	info, ok := env.Server.Sandbox(id)
	return ok && info.State != string(daytona.StateDestroyed)
}

// TestSweepTouchesOnlyTheFullOwnershipLabelSet: the listing ignores its
// label filter (as a real index can), so only the sweep's own re-check of
// every sandbox keeps the unlabelled, the partly labelled, the misnamed
// and the other environment's sandbox alive.
func TestSweepTouchesOnlyTheFullOwnershipLabelSet(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	mine := ownedSandbox(t, env, "company-1", "env-1", "run-1")
	other := ownedSandbox(t, env, "company-1", "env-2", "run-1")
	unlabelled := env.StartSandbox(t, nil).Sandbox
	partial := env.StartSandbox(t, &daytona.CreateSandboxRequest{Labels: map[string]string{
		LabelProvider: ProviderValue, LabelCompanyID: "company-1", LabelEnvironmentID: "env-1"}}).Sandbox
	full, err := OwnershipLabels("company-1", "env-1", "run-1", uuid.NewString(), false)
	require.NoError(t, err)
	misnamed := env.StartSandbox(t, &daytona.CreateSandboxRequest{Name: "someone-elses", Labels: full}).Sandbox
	env.Server.Inject(daytonatest.Fault{Method: "GET", Route: "/sandbox", ListIgnoresLabels: true})

	_, err = FindOrphans(ctx, env.Client.Sandboxes, SweepFilter{})
	require.ErrorIs(t, err, ErrNoScope, "no filter and no All: refused")

	all, err := FindOrphans(ctx, env.Client.Sandboxes, SweepFilter{All: true})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{mine.ID, other.ID}, ids(all), "All is every owned sandbox and nothing else")

	found, err := FindOrphans(ctx, env.Client.Sandboxes, SweepFilter{EnvironmentID: "env-1"})
	require.NoError(t, err)
	require.Equal(t, []string{mine.ID}, ids(found))
	res := DeleteOrphans(ctx, env.Client.Sandboxes, found, SweepFilter{EnvironmentID: "env-1"}, 2, nil)
	require.Len(t, res, 1)
	require.NoError(t, res[0].Err)
	assert.False(t, alive(t, env, mine.ID), "deleted and waited for")
	for _, id := range []string{other.ID, unlabelled.ID, partial.ID, misnamed.ID} {
		assert.True(t, alive(t, env, id), "sandbox %s survives", id)
	}
}

// TestSweepFilters: run, state and age each narrow the selection; age is
// measured on the injected clock.
func TestSweepFilters(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	a := ownedSandbox(t, env, "company-1", "env-1", "run-a")
	b := ownedSandbox(t, env, "company-1", "env-1", "run-b")
	_, _, err := env.Client.Sandboxes.Stop(ctx, b.ID, false)
	require.NoError(t, err)
	_, err = env.Client.Sandboxes.WaitUntilStopped(ctx, b.ID)
	require.NoError(t, err)
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	for name, tc := range map[string]struct {
		f    SweepFilter
		want []string
	}{
		"run":                {SweepFilter{RunID: "run-a"}, []string{a.ID}},
		"company":            {SweepFilter{CompanyID: "company-1"}, []string{a.ID, b.ID}},
		"other company":      {SweepFilter{CompanyID: "company-2"}, nil},
		"stopped":            {SweepFilter{States: []daytona.SandboxState{daytona.StateStopped}}, []string{b.ID}},
		"too young":          {SweepFilter{OlderThan: time.Hour}, nil},
		"old enough later":   {SweepFilter{OlderThan: time.Hour, Now: later}, []string{a.ID, b.ID}},
		"old, started, of a": {SweepFilter{OlderThan: time.Hour, Now: later, RunID: "run-a", States: []daytona.SandboxState{daytona.StateStarted}}, []string{a.ID}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := FindOrphans(ctx, env.Client.Sandboxes, tc.f)
			require.NoError(t, err)
			require.ElementsMatch(t, tc.want, ids(got))
		})
	}
}

// TestDeleteOrphansRechecksBeforeDeleting: a sandbox relabelled between
// the listing and the delete is left alone.
func TestDeleteOrphansRechecksBeforeDeleting(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	sb := ownedSandbox(t, env, "company-1", "env-1", "run-1")
	f := SweepFilter{RunID: "run-1"}
	found, err := FindOrphans(ctx, env.Client.Sandboxes, f)
	require.NoError(t, err)
	require.Len(t, found, 1)
	_, _, err = env.Client.Sandboxes.ReplaceLabels(ctx, sb.ID, map[string]string{"owner": "someone"})
	require.NoError(t, err)
	res := DeleteOrphans(ctx, env.Client.Sandboxes, found, f, 1, nil)
	require.ErrorIs(t, res[0].Err, ErrOwnership)
	assert.True(t, alive(t, env, sb.ID))
}

// inflight wraps the client and records the most sandboxes being worked
// on at once, from the re-read before a delete to the confirmed removal.
type inflight struct {
	SandboxAPI
	now, peak atomic.Int32
}

func (c *inflight) Get(ctx context.Context, id string) (*daytona.Sandbox, *daytona.Response, error) {
	n := c.now.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	return c.SandboxAPI.Get(ctx, id)
}

func (c *inflight) WaitUntilGone(ctx context.Context, id string) error {
	defer c.now.Add(-1)
	return c.SandboxAPI.WaitUntilGone(ctx, id)
}

// heldOrphans makes n orphans of run-1 and finds them by the filter it
// returns; the emulator then holds every DELETE until gate is closed, and
// held counts the deletes it has received.
func heldOrphans(ctx context.Context, t *testing.T, env *testenv.Env, n int) (found []daytona.Sandbox, f SweepFilter, gate chan struct{}, held *daytonatest.FaultHandle) {
	t.Helper()
	for range n {
		ownedSandbox(t, env, "company-1", "env-1", "run-1")
	}
	f = SweepFilter{RunID: "run-1"}
	found, err := FindOrphans(ctx, env.Client.Sandboxes, f)
	require.NoError(t, err)
	require.Len(t, found, n)
	gate = make(chan struct{})
	held = env.Server.Inject(daytonatest.Fault{Method: "DELETE", Route: "/sandbox/{sandboxIdOrName}", Gate: gate})
	return found, f, gate, held
}

// TestDeleteOrphansIsBoundedAndWaits: with every delete held, exactly the
// concurrency limit is in flight; once released, every sandbox is gone
// before DeleteOrphans returns, and done saw each one.
func TestDeleteOrphansIsBoundedAndWaits(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	found, f, gate, held := heldOrphans(ctx, t, env, 5)
	api := &inflight{SandboxAPI: env.Client.Sandboxes}
	var mu sync.Mutex
	var seen []string
	doneCh := make(chan []SweepResult, 1)
	go func() {
		doneCh <- DeleteOrphans(ctx, api, found, f, 2, func(r SweepResult) {
			mu.Lock()
			seen = append(seen, r.Sandbox.ID)
			mu.Unlock()
		})
	}()
	require.NoError(t, env.Server.Await(ctx, func() bool { return held.Hits() == 2 }))
	assert.EqualValues(t, 2, api.peak.Load(), "two deletions in flight while both are held")
	close(gate)
	res := <-doneCh
	assert.LessOrEqual(t, api.peak.Load(), int32(2), "never more than the limit at once")
	for _, r := range res {
		require.NoError(t, r.Err)
		assert.False(t, alive(t, env, r.Sandbox.ID), "confirmed gone: %s", r.Sandbox.ID)
	}
	assert.ElementsMatch(t, ids(found), seen)
}

// detached serves every call under its own context instead of the
// caller's, so cancelling a sweep reaches only DeleteOrphans' own wait for
// a slot: a sandbox already being worked on goes on to its delete.
type detached struct {
	SandboxAPI
	ctx     context.Context
	deletes chan<- string // told of each delete before it is sent
}

func (d detached) Get(_ context.Context, id string) (*daytona.Sandbox, *daytona.Response, error) {
	return d.SandboxAPI.Get(d.ctx, id)
}

func (d detached) Delete(_ context.Context, id string) (*daytona.Sandbox, *daytona.Response, error) {
	d.deletes <- id
	return d.SandboxAPI.Delete(d.ctx, id)
}

func (d detached) WaitUntilGone(_ context.Context, id string) error {
	return d.SandboxAPI.WaitUntilGone(d.ctx, id)
}

func (d detached) ListAll(_ context.Context, opts *daytona.ListOptions) ([]daytona.Sandbox, error) {
	return d.SandboxAPI.ListAll(d.ctx, opts)
}

func (d detached) WaitForState(_ context.Context, id string, targets ...daytona.SandboxState) (*daytona.Sandbox, error) {
	return d.SandboxAPI.WaitForState(d.ctx, id, targets...)
}

// DeleteOrphans with concurrency 0 works on 4 sandboxes at once. Of 8
// orphans whose deletes are all held, exactly 4 are re-read and their
// DELETEs reach Daytona, unanswered; the sweep is then cancelled, which
// only the 4 still waiting for a slot see (the calls of the 4 in flight
// run under a context of their own): they end with the cancellation and
// no request, so every orphan is accounted for without waiting for
// anything that might not come. Released, the 4 in flight are deleted and
// gone; the other 4 are untouched. (Pins a default:
// DefaultSweepConcurrency, 4.)
func TestDeleteOrphansDefaultsToFourAtOnce(t *testing.T) {
	env := testenv.New(t)
	// Bounds a hang only (a limit below 4 never sends the 4th delete).
	bound, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	found, f, gate, _ := heldOrphans(bound, t, env, 8)
	env.Server.ResetRequests()

	deletes := make(chan string, 8)
	reports := make(chan SweepResult, 8)
	sweep, stop := context.WithCancel(bound)
	defer stop()
	doneCh := make(chan []SweepResult, 1)
	go func() {
		doneCh <- DeleteOrphans(sweep, detached{SandboxAPI: env.Client.Sandboxes, ctx: bound, deletes: deletes}, found, f, 0,
			func(r SweepResult) { reports <- r })
	}()
	require.NoError(t, env.Server.AwaitRequests(bound, "DELETE", "/sandbox/{sandboxIdOrName}", 4), "4 deletes in flight")
	stop()
	// Each orphan either reaches its delete or reports the cancellation.
	var started []string
	var cancelled []SweepResult
	for len(started)+len(cancelled) < 8 {
		select {
		case id := <-deletes:
			started = append(started, id)
		case r := <-reports:
			cancelled = append(cancelled, r)
		case <-bound.Done():
			t.Fatalf("orphans unaccounted for: %d deletes, %d reports", len(started), len(cancelled))
		}
	}
	require.Len(t, started, 4, "deletes sent: exactly the default limit")
	require.Len(t, cancelled, 4, "the rest waited for a slot")
	for _, r := range cancelled {
		require.ErrorIs(t, r.Err, context.Canceled)
		require.NotContains(t, started, r.Sandbox.ID)
	}
	assert.Equal(t, 4, env.Server.CountRequests("GET", "/sandbox/{sandboxIdOrName}"), "one re-read per sandbox worked on")
	var inFlight []string
	for _, r := range env.Server.Requests() {
		if r.Method == "DELETE" {
			assert.False(t, r.Done, "held, not answered: %s", r.Path)
			assert.Zero(t, r.Status, "held, not answered: %s", r.Path)
			// The id the request names. (Not r.Sandbox: the emulator
			// resolves it a moment after it logs the request, so under
			// load a request just counted can still lack it.)
			inFlight = append(inFlight, path.Base(r.Path))
		}
	}
	assert.ElementsMatch(t, started, inFlight, "the 4 deletes the emulator holds")

	close(gate)
	res := <-doneCh
	require.Len(t, res, 8)
	for _, r := range res {
		if slices.Contains(started, r.Sandbox.ID) {
			require.NoError(t, r.Err)
			assert.False(t, alive(t, env, r.Sandbox.ID), "deleted and gone: %s", r.Sandbox.ID)
			continue
		}
		require.ErrorIs(t, r.Err, context.Canceled)
		assert.True(t, alive(t, env, r.Sandbox.ID), "never deleted: %s", r.Sandbox.ID)
	}
	assert.Equal(t, 4, env.Server.CountRequests("DELETE", "/sandbox/{sandboxIdOrName}"))
}

// TestDeleteOrphansWaitsOutATransition: a delete Daytona refuses with 409
// while the sandbox changes state is sent again once it settles.
func TestDeleteOrphansWaitsOutATransition(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	sb := ownedSandbox(t, env, "company-1", "env-1", "run-1")
	f := SweepFilter{RunID: "run-1"}
	found, err := FindOrphans(ctx, env.Client.Sandboxes, f)
	require.NoError(t, err)
	env.Server.Inject(daytonatest.Fault{Method: "DELETE", Route: "/sandbox/{sandboxIdOrName}", Status: 409, Times: 1,
		Body: `{"statusCode":409,"message":"Sandbox state change in progress"}`})
	res := DeleteOrphans(ctx, env.Client.Sandboxes, found, f, 1, nil)
	require.NoError(t, res[0].Err)
	assert.False(t, alive(t, env, sb.ID))
	assert.Equal(t, 2, env.Server.CountRequests("DELETE", "/sandbox/{sandboxIdOrName}"))
}
