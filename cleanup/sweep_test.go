package cleanup

import (
	"context"
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

// TestDeleteOrphansIsBoundedAndWaits: with every delete held, exactly the
// concurrency limit is in flight; once released, every sandbox is gone
// before DeleteOrphans returns, and done saw each one.
func TestDeleteOrphansIsBoundedAndWaits(t *testing.T) {
	env := testenv.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 5 {
		ownedSandbox(t, env, "company-1", "env-1", "run-1")
	}
	f := SweepFilter{RunID: "run-1"}
	found, err := FindOrphans(ctx, env.Client.Sandboxes, f)
	require.NoError(t, err)
	require.Len(t, found, 5)
	gate := make(chan struct{})
	held := env.Server.Inject(daytonatest.Fault{Method: "DELETE", Route: "/sandbox/{sandboxIdOrName}", Gate: gate})
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
