package provider

import (
	"context"
	"fmt"
	"github.com/daytonaworker/daytona-worker/rpc"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
	"github.com/stretchr/testify/require"
)

// The in-process concurrency model (docs/behavior.md#concurrency, docs/behavior.md#stale-handle) and idle
// evidence (docs/behavior.md#idle-sleep).

func TestHandleCacheSingleFlightsConcurrentMisses(t *testing.T) {
	e, l, id := leased(t, nil)
	e.use(e.newDriver()) // nothing cached
	gate := make(chan struct{})
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Gate: gate})
	e.srv.ResetRequests()
	a := e.async("environmentRealizeWorkspace", e.realizeParams(l))
	b := e.async("environmentRealizeWorkspace", e.realizeParams(l))
	e.awaitRequests("GET", rSandbox, 1)
	awaitScope(t, e.d, e.scopeOf(id), func(st *scopeState) bool { return st.activities == 2 })
	close(gate)
	require.NoError(t, wait(t, a).err)
	require.NoError(t, wait(t, b).err)
	require.Equal(t, 1, e.srv.CountRequests("GET", rSandbox), "one client.get for both")
	// Warm: no read at all.
	_, err := e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.NoError(t, err)
	require.Equal(t, 1, e.srv.CountRequests("GET", rSandbox))
}

func TestHandleCacheIsNotSharedAcrossScopes(t *testing.T) {
	e, l, id := leased(t, nil)
	e.srv.ResetRequests()
	_, err := e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.NoError(t, err)
	require.Zero(t, e.srv.CountRequests("GET", rSandbox), "acquire-seeded")
	for i, kv := range [][]any{{"companyId", "company-2"}, {"environmentId", "env-2"}} {
		p := with(e.realizeParams(l), kv...)
		_, err := e.call("environmentRealizeWorkspace", p)
		require.NoError(t, err)
		require.Equal(t, i+1, e.srv.CountRequests("GET", rSandbox), "%v: its own lookup", kv)
	}
	// Another account (same key, another Daytona endpoint) naming the same
	// sandbox id gets nothing from this account's cache.
	other := testenv.Server(t, daytonatest.WithAPIKey(e.srv.APIKey()))
	p := e.realizeParams(l)
	p["config"] = with(p["config"].(map[string]any), "apiUrl", other.URL())
	_, err = e.call("environmentRealizeWorkspace", p)
	require.ErrorIs(t, err, daytona.ErrNotFound)
	require.Equal(t, 1, other.CountRequests("GET", rSandbox), "looked up on its own endpoint")
	for k := range e.d.handles.m {
		require.NotContains(t, string(k), e.srv.APIKey(), "no credentials in cache keys")
	}
	e.expectLive(id)
}

func TestHandleCacheDoesNotCacheAFailedPopulate(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	e.use(e.newDriver())
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Status: 404, Times: 1})
	e.srv.ResetRequests()
	_, err := e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.ErrorIs(t, err, daytona.ErrNotFound)
	_, err = e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.NoError(t, err)
	require.Equal(t, 2, e.srv.CountRequests("GET", rSandbox), "the next lookup re-fetches")
}

func TestHandleCacheRejectsAHandleOfAnotherSandbox(t *testing.T) {
	e, l, id := leased(t, nil)
	e.use(e.newDriver())
	other := e.dto(id, func(sb *daytona.Sandbox) { sb.ID = "sandbox-other" })
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Status: 200, Body: other, Times: 1})
	_, err := e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.ErrorContains(t, err, "handle mismatch")
	require.Nil(t, e.d.handles.m[e.scopeOf(id)])
}

// clocked is an env whose driver runs on a fake clock; the lease is acquired
// through it so the handle is seeded at the clock's time.
func clocked(t *testing.T, cfg map[string]any) (*testEnv, *fakeClock, lease) {
	e := newTestEnv(t, cfg)
	clock := newFakeClock()
	e.use(e.driverWith(func(o *Options) { o.Now = clock.Now }))
	l := e.acquire(nil)
	e.srv.ResetRequests()
	return e, clock, l
}

func TestStaleHandleIsRefreshedAfterHalfTheAutoStopInterval(t *testing.T) {
	e, clock, l := clocked(t, nil) // auto-stop 15 min: threshold 7.5 min
	clock.Advance(7*time.Minute + 29*time.Second)
	_, err := e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.NoError(t, err)
	require.Zero(t, e.srv.CountRequests("GET", rSandbox), "within the window")
	// The realize refreshed freshness: another 7.5 min from now.
	clock.Advance(7*time.Minute + 29*time.Second)
	_, err = e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.NoError(t, err)
	require.Zero(t, e.srv.CountRequests("GET", rSandbox))
	clock.Advance(7*time.Minute + 30*time.Second)
	_, err = e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.NoError(t, err)
	require.Equal(t, 1, e.srv.CountRequests("GET", rSandbox), "refreshed at the threshold")
}

func TestStaleRefreshRestartsAProviderStoppedSandbox(t *testing.T) {
	e, clock, l := clocked(t, nil)
	id := *l.ProviderLeaseID
	require.NoError(t, e.srv.StopSandbox(id)) // Daytona's auto-stop
	e.await(id, "stopped")
	clock.Advance(8 * time.Minute)
	_, err := e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.NoError(t, err)
	require.Equal(t, 1, e.srv.CountRequests("POST", rStart))
	require.Equal(t, "started", e.state(id))
}

func TestNoStaleRefreshWhenAutoStopIsDisabled(t *testing.T) {
	e, clock, l := clocked(t, map[string]any{"autoStopInterval": 0})
	clock.Advance(24 * time.Hour)
	_, err := e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.NoError(t, err)
	require.Zero(t, e.srv.CountRequests("GET", rSandbox))
}

func TestWarmFloorDoesNotExtendTheStaleThreshold(t *testing.T) {
	// Effective auto-stop 20 min, configured 15: refresh after 7.5 min.
	e, clock, l := clocked(t, map[string]any{"reuseLease": true, "warmRunnerIdleTimeoutMs": 900000})
	require.Equal(t, 20, e.info(*l.ProviderLeaseID).AutoStopInterval)
	clock.Advance(7*time.Minute + 30*time.Second)
	_, err := e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.NoError(t, err)
	require.Equal(t, 1, e.srv.CountRequests("GET", rSandbox))
}

func TestFailedStaleRefreshEvictsAndFailsClosed(t *testing.T) {
	e, clock, l := clocked(t, nil)
	k := e.scopeOf(*l.ProviderLeaseID)
	clock.Advance(8 * time.Minute)
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Status: 503, Times: 3})
	_, err := e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.ErrorContains(t, err, "503")
	require.Nil(t, e.d.handles.m[k], "evicted")
	require.Zero(t, e.srv.CountRequests("POST", rNewFolder), "no work on an unverified handle")
	_, err = e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.NoError(t, err)
	require.Equal(t, 4, e.srv.CountRequests("GET", rSandbox), "the next lookup re-fetches")
}

func TestStalledStaleRefreshIsBounded(t *testing.T) {
	e, clock, l := clocked(t, map[string]any{"livenessTimeoutMs": 50})
	clock.Advance(8 * time.Minute)
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Hang: true, Times: 1})
	_, err := e.call("environmentRealizeWorkspace", with(e.realizeParams(l), "config", with(e.cfg, "livenessTimeoutMs", 50)))
	require.ErrorContains(t, err, `Daytona sandbox liveness call "sandbox.refreshData" did not respond within 50 ms`)
}

func TestOverlappingTeardownsKeepTheGateClosedUntilBothEnd(t *testing.T) {
	var s scopes
	k := makeScopeKey("daytona", "c", "e", "sb", "fp")
	end1, end2 := s.beginTeardown(k), s.beginTeardown(k)
	ran := make(chan struct{})
	go func() {
		_ = s.withActivity(context.Background(), k, "sb", true, func(context.Context) error { close(ran); return nil })
	}()
	end1()
	end1() // idempotent: one end per teardown
	s.mu.Lock()
	require.Equal(t, 1, s.state(k).teardowns)
	s.mu.Unlock()
	select {
	case <-ran:
		t.Fatal("activity ran while a teardown was still open")
	default:
	}
	end2()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("activity never ran")
	}
	// Closed admission refuses work that does not allow it.
	err := s.withActivity(context.Background(), k, "sb", false, func(context.Context) error { return nil })
	require.EqualError(t, err, "Daytona sandbox lease sb is no longer active.")
	// A scope never seen is not closed (a fresh worker serves old leases).
	require.NoError(t, s.withActivity(context.Background(), makeScopeKey("daytona", "c", "e", "sb2", "fp"), "sb2", false,
		func(context.Context) error { return nil }))
}

func TestHealthReportsIdleEvidence(t *testing.T) {
	e := newTestEnv(t, nil)
	idle := func() rpc.IdleReport { return e.d.Health().Details["idle"].(rpc.IdleReport) }
	require.Equal(t, rpc.IdleReport{SleepAllowed: true}, idle())

	a, b := e.acquire(nil), e.acquire(nil)
	require.Equal(t, 2, idle().Allocations)
	require.False(t, idle().SleepAllowed)

	// In-flight hook and provider request.
	gate := make(chan struct{})
	realize := e.realizeHeld(a, gate)
	r := idle()
	require.Equal(t, 1, r.PendingHooks)
	require.Equal(t, 1, r.ProviderRequests)
	close(gate)
	require.NoError(t, wait(t, realize).err)
	r = idle()
	require.Zero(t, r.PendingHooks)
	require.Zero(t, r.ProviderRequests)

	// A confirmed destroy clears only its own scope's evidence.
	_, err := e.call("environmentDestroyLease", e.leaseParams(a, nil))
	require.NoError(t, err)
	require.Equal(t, 1, idle().Allocations)
	_, err = e.call("environmentReleaseLease", e.leaseParams(b, nil))
	require.NoError(t, err)
	require.Equal(t, rpc.IdleReport{SleepAllowed: true}, idle())

	// An uncertain creation keeps the worker awake until it is resolved.
	e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rCreate, Status: 503, Times: 1})
	e.acquireErr(nil)
	require.Equal(t, 1, idle().UncertainCleanups)
	require.False(t, idle().SleepAllowed)
}

func TestHealthProviderRequestDuringAHang(t *testing.T) {
	e, l, id := leased(t, map[string]any{"reuseLease": true, "livenessTimeoutMs": 60000})
	require.NoError(t, e.srv.SetError(id, daytonatest.MissingContainerReason(id), false))
	f := e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Skip: 1, Hang: true, Times: 1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.callCtx(ctx, "environmentResumeLease", e.resumeParams(l, nil))
		done <- err
	}()
	require.NoError(t, e.srv.Await(context.Background(), func() bool { return f.Hits() == 1 }))
	r := e.d.Health().Details["idle"].(rpc.IdleReport)
	require.GreaterOrEqual(t, r.ProviderRequests, 1, "the hanging read is evidence")
	require.False(t, r.SleepAllowed)
	cancel() // the host gives up
	require.Error(t, <-done)
	require.Zero(t, e.d.Health().Details["idle"].(rpc.IdleReport).ProviderRequests)
}

func TestOverlappingWorkKeepsAllocationEvidenceUntilAQuietReceipt(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	gate := make(chan struct{})
	realize := e.realizeHeld(l, gate)
	_, err := e.call("environmentReleaseLease", e.leaseParams(l, nil, "cancelActiveWork", true))
	require.NoError(t, err)
	require.Equal(t, 1, e.d.idle.report().Allocations, "work overlapped the stop: not proof")
	close(gate)
	wait(t, realize)
	_, err = e.call("environmentDestroyLease", e.leaseParams(l, nil))
	require.NoError(t, err)
	require.Zero(t, e.d.idle.report().Allocations, "a later quiet delete receipt clears it")
}

func TestExecutesReuseTheCachedHandle(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	e.use(e.newDriver())
	e.srv.ResetRequests()
	first, err := e.execute(l, "true", nil)
	require.NoError(t, err)
	require.Equal(t, false, first.Metadata["cacheHit"])
	second, err := e.execute(l, "true", nil)
	require.NoError(t, err)
	require.Equal(t, true, second.Metadata["cacheHit"])
	require.Contains(t, second.Metadata, "getDurationMs", "present (≈0) on a hit")
	require.Equal(t, 1, e.srv.CountRequests("GET", rSandbox), "a single client.get across execs")
}

func TestHandleCacheKeepsConcurrentLeasesApart(t *testing.T) {
	e := newTestEnv(t, nil)
	a, b := e.acquire(nil), e.acquire(nil)
	e.use(e.newDriver())
	gate := make(chan struct{})
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Gate: gate, Times: 2})
	e.srv.ResetRequests()
	ra := e.async("environmentRealizeWorkspace", e.realizeParams(a))
	rb := e.async("environmentRealizeWorkspace", e.realizeParams(b))
	e.awaitRequests("GET", rSandbox, 2)
	close(gate)
	require.NoError(t, wait(t, ra).err)
	require.NoError(t, wait(t, rb).err)
	require.Equal(t, 2, e.srv.CountRequests("GET", rSandbox), "one lookup per lease")
	for _, l := range []lease{a, b} {
		k := e.scopeOf(*l.ProviderLeaseID)
		require.Equal(t, *l.ProviderLeaseID, e.d.handles.m[k].sb.ID, "no promise crossing")
	}
}

func TestExecuteAfterReleaseIsRefused(t *testing.T) {
	e, l, id := leased(t, nil)
	// Queued behind the teardown gate: refused once the tombstone is set.
	end := e.d.scopes.beginTeardown(e.scopeOf(id))
	_, err := e.execute(l, "true", nil)
	require.ErrorContains(t, err, "Daytona sandbox lease "+id+" is no longer active.")
	end()
	_, err = e.call("environmentReleaseLease", e.leaseParams(l, nil))
	require.NoError(t, err)
	_, err = e.execute(l, "true", nil)
	var inactive *LeaseInactiveError
	require.ErrorAs(t, err, &inactive, "late execute after the release tombstone")
	require.Zero(t, e.srv.CountDispatches("true"), "nothing dispatched")
}

func TestFailedWorkDoesNotAdvanceFreshness(t *testing.T) {
	e, clock, l := clocked(t, nil)
	clock.Advance(7 * time.Minute)
	e.srv.Inject(daytonatest.Fault{Route: rNewFolder, Status: 500, Times: 1})
	_, err := e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.Error(t, err)
	clock.Advance(30 * time.Second) // 7.5 min since the last success
	_, err = e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.NoError(t, err)
	require.Equal(t, 1, e.srv.CountRequests("GET", rSandbox), "the failure did not count as proof of life")
}

// Titles 149 and 150: an execute that fails, or that times out, before
// any success does not count as proof of life: 7.5 minutes after the last
// success the next call refreshes the handle.
func TestFailedOrTimedOutExecuteDoesNotAdvanceFreshness(t *testing.T) {
	for name, run := range map[string]func(e *testEnv, l lease){
		"failed": func(e *testEnv, l lease) {
			e.srv.Inject(daytonatest.Fault{Method: "POST", Route: "/process/session/{sessionId}/exec", Status: 500, Times: 1})
			_, err := e.execute(l, "true", nil)
			require.Error(t, err)
		},
		"timed out": func(e *testEnv, l lease) {
			r, err := e.execute(l, "sleep", []string{"30"}, "timeoutMs", 300)
			require.NoError(t, err)
			require.True(t, r.TimedOut)
		},
	} {
		t.Run(name, func(t *testing.T) {
			e, clock, l := clocked(t, nil) // auto-stop 15 min: threshold 7.5 min
			clock.Advance(7 * time.Minute)
			run(e, l)
			require.Zero(t, e.srv.CountRequests("GET", rSandbox), "the execute itself was inside the window")
			clock.Advance(30 * time.Second) // 7.5 min since the last success
			_, err := e.call("environmentRealizeWorkspace", e.realizeParams(l))
			require.NoError(t, err)
			require.Equal(t, 1, e.srv.CountRequests("GET", rSandbox), "the execute did not count as proof of life")
		})
	}
}

func TestCachedResumeReverifiesTheSentinelAndEvictsOnMismatch(t *testing.T) {
	e := newTestEnv(t, map[string]any{"reuseLease": true})
	l := e.acquire(nil)
	k := e.scopeOf(*l.ProviderLeaseID)
	require.NotNil(t, e.d.handles.m[k], "acquire-seeded")
	path := e.hostPath(l, l.Metadata["workspaceSentinel"].(map[string]any)["path"].(string))
	require.NoError(t, writeFile(path, `{"token":"copied-from-elsewhere"}`))
	e.srv.ResetRequests()
	raw, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.NoError(t, err)
	require.Equal(t, "mismatch", decode[lease](t, raw).Metadata["workspaceSentinel"].(map[string]any)["result"])
	require.Equal(t, 1, e.srv.CountRequests("POST", rExecute), "verified even with a cached handle")
	require.Nil(t, e.d.handles.m[k], "evicted")
}

func TestRealizeAfterResumeWithAProviderFilledTarget(t *testing.T) {
	for _, projectless := range []bool{false, true} {
		t.Run(map[bool]string{false: "workspace", true: "projectless task"}[projectless], func(t *testing.T) {
			e := newTestEnv(t, map[string]any{"reuseLease": true})
			extra := []any{}
			if projectless {
				extra = []any{"executionWorkspaceId", nil, "issueId", "issue-1"}
			}
			l := e.acquire(nil, extra...)
			id := *l.ProviderLeaseID
			// The host merges lease metadata into later configs, so the
			// target Daytona filled in now appears in the config; the
			// account fingerprint ignores it and the scope stays the same.
			l.Metadata["target"] = "eu"
			withTarget := func(p map[string]any) map[string]any {
				return with(p, "config", with(p["config"].(map[string]any), "target", "eu"))
			}
			_, err := e.call("environmentReleaseLease", e.leaseParams(l, map[string]any{"target": "eu"}))
			require.NoError(t, err)
			_, err = e.call("environmentRealizeWorkspace", withTarget(e.realizeParams(l)))
			require.ErrorContains(t, err, "is no longer active", "closed after release")
			raw, err := e.call("environmentResumeLease", withTarget(e.resumeParams(l, nil)))
			require.NoError(t, err)
			r := decode[lease](t, raw)
			require.Equal(t, id, *r.ProviderLeaseID)
			require.Equal(t, "matched", r.Metadata["workspaceSentinel"].(map[string]any)["result"])
			e.srv.ResetRequests()
			_, err = e.call("environmentRealizeWorkspace", withTarget(e.realizeParams(r)))
			require.NoError(t, err, "reopened by resume")
			require.Zero(t, e.srv.CountRequests("GET", rSandbox), "realize without a client.get")
		})
	}
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }

func TestRealizeRestartingASandboxForgetsTheSessionAndRecachesIt(t *testing.T) {
	e := newTestEnv(t, nil)
	clock, w := newFakeClock(), newRecordingWork()
	e.use(e.driverWith(func(o *Options) { o.Now, o.runner = clock.Now, w }))
	l := e.acquire(nil)
	id := *l.ProviderLeaseID
	require.NoError(t, e.srv.StopSandbox(id))
	e.await(id, "stopped")
	clock.Advance(8 * time.Minute)
	_, err := e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.NoError(t, err)
	require.Equal(t, 1, w.count("forget"), "the restart destroyed the session")
	require.Equal(t, "started", string(e.d.handles.m[e.scopeOf(id)].sb.State), "the cache holds the started record")
	e.srv.ResetRequests()
	_, err = e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.NoError(t, err)
	require.Zero(t, e.srv.CountRequests("POST", rStart), "no second start")
	require.Zero(t, e.srv.CountRequests("GET", rSandbox))
}

func TestAWaiterIsNotFailedByThePopulatingCallersCancellation(t *testing.T) {
	e, l, id := leased(t, nil)
	e.use(e.newDriver())
	gate := make(chan struct{})
	defer close(gate)
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Gate: gate, Times: 1})
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := e.callCtx(ctx, "environmentRealizeWorkspace", e.realizeParams(l))
		first <- err
	}()
	e.awaitRequests("GET", rSandbox, 1) // the first caller populates (held)
	second := e.async("environmentRealizeWorkspace", e.realizeParams(l))
	awaitScope(t, e.d, e.scopeOf(id), func(st *scopeState) bool { return st.activities == 2 })
	cancel() // the host gives up on the first call only
	require.ErrorIs(t, <-first, context.Canceled)
	require.NoError(t, wait(t, second).err, "the waiting caller populates again")
	require.Equal(t, 2, e.srv.CountRequests("GET", rSandbox))
}

// A confirmed destroy clears allocation evidence of its own company,
// environment and account only. A sweep after the environment was deleted
// (environmentId "") clears its company's evidence of that sandbox, whatever
// environment named it, so the acquire's evidence does not keep the worker
// awake forever; never another company's or another account's.
func TestDestroyClearsEvidenceOnlyForItsOwnCompanyAndEnvironment(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	other := e.acquire(nil)
	id := *l.ProviderLeaseID
	c, err := e.d.resolveAccount(mustJSON(t, e.cfg))
	require.NoError(t, err)
	otherEnv := makeScopeKey(DriverKey, "company-1", "env-2", id, c.fingerprint)
	otherCompany := makeScopeKey(DriverKey, "company-2", "env-1", id, c.fingerprint)
	otherAccount := makeScopeKey(DriverKey, "company-1", "env-1", id, "another-account")
	for _, k := range []scopeKey{otherEnv, otherCompany, otherAccount} {
		e.d.idle.allocate(k)
	}
	require.Equal(t, 5, e.d.idle.report().Allocations)

	_, err = e.call("environmentDestroyLease", e.leaseParams(l, nil))
	require.NoError(t, err)
	require.Equal(t, 4, e.d.idle.report().Allocations, "only env-1's evidence of company-1 is cleared")

	p := e.leaseParams(l, nil)
	p["environmentId"] = "" // the environment was deleted: the host's sweep
	_, err = e.call("environmentDestroyLease", p)
	require.NoError(t, err)
	e.d.idle.mu.Lock()
	left := slices.Collect(maps.Keys(e.d.idle.allocations))
	e.d.idle.mu.Unlock()
	require.ElementsMatch(t, []scopeKey{e.scopeOf(*other.ProviderLeaseID), otherCompany, otherAccount}, left,
		"the sweep clears company-1's evidence under any environment, and nothing else")
}

func TestScopeTableStaysBounded(t *testing.T) {
	var s scopes
	for i := range maxScopes + 10 {
		k := scopeKey(fmt.Sprint("open-", i))
		s.open(k)
	}
	s.mu.Lock()
	n := len(s.m)
	s.mu.Unlock()
	require.LessOrEqual(t, n, maxScopes, "idle entries are pruned")

	// A fresh tombstone survives pruning: late work stays refused.
	end := s.beginTeardown("closed")
	end()
	for i := range maxScopes + 10 {
		s.open(scopeKey(fmt.Sprint("more-", i)))
	}
	err := s.withActivity(t.Context(), "closed", "lease-x", false, func(context.Context) error { return nil })
	var inactive *LeaseInactiveError
	require.ErrorAs(t, err, &inactive)
}

// writableDirs reads a scope's advisory writable-dir store.
func writableDirs(d *Driver, k scopeKey) []string {
	d.scopes.mu.Lock()
	defer d.scopes.mu.Unlock()
	return slices.Sorted(maps.Keys(d.scopes.state(k).writable))
}

// Titles 157-159: a successful syncIn records the writablePath of a
// read-write staging-tarball mapping (not the staging directory), the
// parent of a read-write mapping's target otherwise, and nothing for
// read-only or access-less mappings. Another lease's store stays empty.
func TestSyncInRecordsTheAdvisoryWritableDirs(t *testing.T) {
	e := newTestEnv(t, nil)
	l, other := e.acquire(nil), e.acquire(nil)
	remote := l.Metadata["remoteCwd"].(string)
	src := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(src, []byte("x"), 0o600))
	file := func(target string, kv ...any) map[string]any {
		return with(map[string]any{"sourcePath": src, "targetPath": target, "kind": "file"}, kv...)
	}
	op := map[string]any{"operationId": "in", "files": []any{
		file(remote+"/.staging/ws.tar", "access", "rw", "writablePath", remote+"/ws"),
		file(remote+"/cache/blob", "access", "rw"),
		file(remote+"/ro/blob", "access", "ro"),
		file(remote + "/plain/blob"),
	}}
	_, err := e.call("environmentSyncIn", with(e.base(nil), "lease", l, "operations", []any{op}))
	require.NoError(t, err)
	require.Equal(t, []string{remote + "/cache", remote + "/ws"}, writableDirs(e.d, e.scopeOf(*l.ProviderLeaseID)))
	require.Empty(t, writableDirs(e.d, e.scopeOf(*other.ProviderLeaseID)))
}

// Open terminals are idle evidence while they are connected, through the
// driver's own transport, and only then.
func TestHealthCountsOpenTerminals(t *testing.T) {
	e, _, id := leased(t, nil)
	c, err := e.d.resolveAccount(mustJSON(t, e.cfg))
	require.NoError(t, err)
	sb, _, err := c.client.Sandboxes.Get(t.Context(), id)
	require.NoError(t, err)
	ref := sb.Ref()
	sid, _, err := c.client.PTY.Create(t.Context(), ref, &daytona.PTYCreateRequest{ID: "evidence", LazyStart: true})
	require.NoError(t, err)
	conn, err := c.client.PTY.Connect(t.Context(), ref, sid)
	require.NoError(t, err)
	r := e.d.idle.report()
	require.Equal(t, 1, r.OpenTerminals)
	require.Zero(t, r.ProviderRequests, "a connected terminal is counted once, as a terminal")
	require.False(t, r.SleepAllowed)
	require.NoError(t, conn.Close())
	require.Zero(t, e.d.idle.report().OpenTerminals)
}

// TestHandleOfAnotherSandboxIsRefusedNamingBoth: a fetch for a lease that
// answers another sandbox's record is refused, the error naming the
// sandbox Daytona answered as the handle and the lease asked for, and
// nothing is cached.
func TestHandleOfAnotherSandboxIsRefusedNamingBoth(t *testing.T) {
	h := &handles{now: time.Now}
	fetch := func(context.Context) (*daytona.Sandbox, error) { return &daytona.Sandbox{ID: "sb-other"}, nil }
	_, _, err := h.get(t.Context(), "k", "sb-lease", fetch)
	var hm *HandleMismatchError
	require.ErrorAs(t, err, &hm)
	require.Equal(t, HandleMismatchError{Got: "sb-other", Want: "sb-lease"}, *hm)
	require.Contains(t, err.Error(), "handle sb-other does not belong to lease sb-lease")
	require.Empty(t, h.m, "a refused record is not cached")
}

// TestEachPieceOfIdleEvidenceAloneForbidsSleep: sleep is allowed only when
// nothing at all holds the worker; any one piece of evidence on its own
// forbids it (an open terminal on a lease this worker never acquired
// holds no allocation, say) and is reported.
func TestEachPieceOfIdleEvidenceAloneForbidsSleep(t *testing.T) {
	require.True(t, (&idle{}).report().SleepAllowed, "nothing held")
	for name, c := range map[string]struct {
		set  func(*idle)
		seen func(rpc.IdleReport) int
	}{
		"a pending hook":       {func(i *idle) { i.hooks.Add(1) }, func(r rpc.IdleReport) int { return r.PendingHooks }},
		"a provider request":   {func(i *idle) { i.requests.Add(1) }, func(r rpc.IdleReport) int { return r.ProviderRequests }},
		"an open terminal":     {func(i *idle) { i.terminals.Add(1) }, func(r rpc.IdleReport) int { return r.OpenTerminals }},
		"an allocation":        {func(i *idle) { i.allocated.Add(1) }, func(r rpc.IdleReport) int { return r.Allocations }},
		"an uncertain cleanup": {func(i *idle) { i.uncertainN.Add(1) }, func(r rpc.IdleReport) int { return r.UncertainCleanups }},
	} {
		i := &idle{}
		c.set(i)
		r := i.report()
		require.False(t, r.SleepAllowed, name)
		require.Equal(t, 1, c.seen(r), name)
	}
}
