package provider

// What each lease step leaves behind, beside what it returns: allocation
// and idle evidence, labels, cleanup records, and the requests it made,
// counted from the emulator's request log (docs/testing.md). Several of
// these tests were written against a bug planted by hand that the suite
// did not catch; each names it.

import (
	"errors"
	"log/slog"
	"os"
	"path"
	"testing"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/stretchr/testify/require"
)

// asleep is the idle report of a worker that holds nothing.
var asleep = rpc.IdleReport{SleepAllowed: true}

// A failed setup whose inline delete was confirmed leaves nothing behind:
// no allocation evidence, so the worker may sleep. (Planted: the idle
// allocation not released after the inline delete.)
func TestFailedSetupLeavesNoAllocationBehind(t *testing.T) {
	e := newTestEnv(t, nil)
	e.srv.Inject(daytonatest.Fault{Route: rExecute, Status: 500, Body: `{"message":"toolbox broke"}`, Times: 1})
	err := e.acquireErr(nil)
	require.ErrorContains(t, err, "toolbox broke")
	require.Equal(t, asleep, e.d.idle.report(), "deleted and gone: no allocation, nothing uncertain")
	e.expectLive()
	require.Equal(t, 1, e.srv.CountRequests("POST", rCreate))
	require.Equal(t, 1, e.srv.CountRequests("DELETE", rSandbox), "one inline delete")
}

// A successful acquire leaves exactly one allocation (sleep refused) and
// the sandbox carries the full ownership label set; the release that
// deletes it clears the evidence.
func TestAcquireAndReleaseBookkeeping(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	id := *l.ProviderLeaseID
	r := e.d.idle.report()
	require.Equal(t, 1, r.Allocations)
	require.False(t, r.SleepAllowed)
	require.Zero(t, r.UncertainCleanups)

	info := e.info(id)
	attempt := info.Labels[cleanup.LabelCreateAttempt]
	require.Equal(t, cleanup.CreationName(attempt), info.Name)
	want, err := cleanup.OwnershipLabels("company-1", "env-1", "run-1", attempt, false)
	require.NoError(t, err)
	for k, v := range want {
		require.Equal(t, v, info.Labels[k], "label %s", k)
	}
	require.Equal(t, 1, e.srv.CountRequests("POST", rCreate), "one create")
	require.Zero(t, e.srv.CountRequests("DELETE", rSandbox), "nothing deleted")

	raw, err := e.call("environmentReleaseLease", e.leaseParams(l, nil))
	e.requireReceipt(raw, err, id, "destroyed")
	require.Equal(t, asleep, e.d.idle.report())
	require.Equal(t, 1, e.srv.CountRequests("DELETE", rSandbox))
	e.expectLive()
}

// Fractional resources are rounded up to Daytona's whole units, never
// down; the lease metadata keeps the saved values. (Planted: math.Ceil
// replaced with math.Floor.)
func TestFractionalResourcesRoundUp(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(map[string]any{"image": "node:20", "cpu": 1.5, "memory": 1.25, "disk": 2.01})
	info := e.info(*l.ProviderLeaseID)
	require.Equal(t, 2, info.CPU)
	require.Equal(t, 2, info.Memory)
	require.Equal(t, 3, info.Disk)
	require.EqualValues(t, 1.5, l.Metadata["cpu"])

	for _, c := range []struct {
		in   float64
		want int
	}{{0.001, 1}, {0.5, 1}, {1, 1}, {1.0000001, 2}, {2.999, 3}, {3, 3}} {
		require.Equal(t, c.want, wholeUnits(&c.in), "%v", c.in)
	}
	require.Zero(t, wholeUnits(nil), "unset: Daytona's default")
}

// Realize with both paths and no remoteCwd in the lease: the remote path
// wins over the local one, and the folder is made at that path.
// (Planted: remote and local swapped.)
func TestRealizePrefersRemotePathOverLocalPath(t *testing.T) {
	e, l, id := leased(t, nil)
	delete(l.Metadata, "remoteCwd")
	remote := path.Join(e.info(id).WorkDir, "remote-side")
	params := with(e.base(nil), "lease", l, "workspace", map[string]any{"remotePath": remote, "localPath": "/host/local-side"})
	e.srv.ResetRequests()
	raw, err := e.call("environmentRealizeWorkspace", params)
	require.NoError(t, err)
	res := decode[map[string]any](t, raw)
	require.Equal(t, remote, res["cwd"])
	require.Equal(t, map[string]any{"provider": DriverKey, "remoteCwd": remote}, res["metadata"])
	require.Equal(t, 1, e.srv.CountRequests("POST", rNewFolder), "one folder made")
	fi, err := os.Stat(e.hostPath(l, remote))
	require.NoError(t, err)
	require.True(t, fi.IsDir())
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "the folder's mode")

	// The lease's own remoteCwd wins over both; only the local path is
	// used when nothing else is given; no lease id: no provider call.
	for _, c := range []struct {
		name         string
		remoteCwd    any
		ws           map[string]any
		want         string
		providerCall bool
	}{
		{"lease remoteCwd first", "/lease/cwd", map[string]any{"remotePath": "/r", "localPath": "/l"}, "/lease/cwd", false},
		{"blank remoteCwd skipped", "  ", map[string]any{"remotePath": "/r", "localPath": "/l"}, "/r", false},
		{"local as the last resort", nil, map[string]any{"localPath": "/l"}, "/l", false},
		{"default", nil, map[string]any{}, "/" + workspaceDirName, false},
	} {
		md := map[string]any{}
		if c.remoteCwd != nil {
			md["remoteCwd"] = c.remoteCwd
		}
		e.srv.ResetRequests()
		raw, err := e.call("environmentRealizeWorkspace", with(e.base(nil), "lease", map[string]any{"metadata": md}, "workspace", c.ws))
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, decode[map[string]any](t, raw)["cwd"], c.name)
		require.Empty(t, e.srv.Requests(), "%s: a lease without an id makes no provider call", c.name)
	}
}

// A stop that Daytona refuses with 409 every time is tried exactly
// 1 + maxStopRetries times, then fails, and the sandbox is kept.
// (Planted: one stop retry more than the reference allows.)
func TestStopRefusedEveryTimeIsTriedExactlyThreeTimes(t *testing.T) {
	require.Equal(t, 2, maxStopRetries, "the reference's retry count")
	eachName(t, []string{"environmentStopLease", "cancelActiveWork"}, func(t *testing.T, method string) {
		e, l, id := leased(t, map[string]any{"reuseLease": true})
		e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rStop, Status: 409,
			Body: `{"statusCode":409,"message":"state change in progress"}`})
		e.srv.ResetRequests()
		m, p := e.teardownCall(l, method)
		_, err := e.call(m, p)
		require.Error(t, err)
		require.Equal(t, 1+maxStopRetries, e.srv.CountRequests("POST", rStop))
		require.Zero(t, e.srv.CountRequests("DELETE", rSandbox), "a retained sandbox is never deleted for a busy stop")
		require.Equal(t, "started", e.state(id))
		require.Equal(t, 1, e.d.idle.report().Allocations, "no receipt: the allocation stays")
	})
}

// A failed-create cleanup envelope is honoured only for the company,
// environment and lease id it was issued for: any other is refused with
// ErrScope before any provider call, and the sandbox stays. (Planted: the
// environment id not compared.)
func TestFailedCreateCleanupOfAnotherScopeIsRefused(t *testing.T) {
	e := newTestEnv(t, nil)
	e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rCreate, Perform: true, Hang: true, Times: 1})
	env := envelopeOf(t, e.acquireExpiringWhen(e.allocated(1))).Envelope
	e.srv.ResetRequests()
	for name, change := range map[string]func(p map[string]any){
		"other company":     func(p map[string]any) { p["companyId"] = "company-2" },
		"other environment": func(p map[string]any) { p["environmentId"] = "env-2" },
		"other lease id": func(p map[string]any) {
			p["providerLeaseId"] = cleanup.CreationName("00000000-0000-4000-8000-000000000000")
		},
	} {
		p := map[string]any{"driverKey": "daytona", "companyId": "company-1", "environmentId": "env-1", "config": e.cfg,
			"providerLeaseId": env.ProviderLeaseID, "leaseMetadata": map[string]any{"failedCreateCleanup": env}}
		change(p)
		_, err := e.call("environmentDestroyLease", p)
		require.ErrorIs(t, err, cleanup.ErrScope, name)
	}
	require.Empty(t, e.srv.Requests(), "refused before any provider call")
	require.Len(t, e.live(), 1, "the sandbox stays")

	// The envelope's own scope is honoured: observed first, then deleted,
	// and the uncertain cleanup is cleared.
	p := map[string]any{"driverKey": "daytona", "companyId": "company-1", "environmentId": "env-1", "config": e.cfg,
		"providerLeaseId": env.ProviderLeaseID, "leaseMetadata": map[string]any{"failedCreateCleanup": env}}
	_, err := e.call("environmentDestroyLease", p)
	var ce *cleanup.Error
	require.True(t, errors.As(err, &ce), "first sight: persist the observed id, got %v", err)
	require.Zero(t, e.srv.CountRequests("DELETE", rSandbox), "nothing deleted before the host persisted the id")
	p["leaseMetadata"] = map[string]any{"failedCreateCleanup": ce.Envelope}
	raw, err := e.call("environmentDestroyLease", p)
	e.requireReceipt(raw, err, env.ProviderLeaseID, "destroyed")
	require.Equal(t, 1, e.srv.CountRequests("DELETE", rSandbox))
	e.expectLive()
	require.Equal(t, asleep, e.d.idle.report(), "the uncertain cleanup and the allocation are cleared")
}

// Each teardown step, from a fresh lease: what it answers, and what it
// leaves behind — the sandbox's state, the allocation evidence (a
// confirmed receipt clears it), the runner's sessions (cancelled, closed
// by the drain, forgotten), and the requests it made to Daytona.
func TestTeardownStepsLeaveExactlyThis(t *testing.T) {
	type counts struct{ cancel, close, forget, stops, deletes, autodeletes int }
	cases := []struct {
		name, method string
		cfg          map[string]any
		receipt      string
		state        string
		want         counts
	}{
		{"release ephemeral", "environmentReleaseLease", nil, "destroyed", "gone", counts{close: 1, deletes: 1}},
		{"release reusable", "environmentReleaseLease", map[string]any{"reuseLease": true}, "stopped", "stopped", counts{close: 1, stops: 1}},
		{"stop", "environmentStopLease", nil, "stopped", "stopped", counts{cancel: 1, forget: 1, stops: 1, autodeletes: 1}},
		{"Stop button", "cancelActiveWork", nil, "stopped", "stopped", counts{cancel: 1, forget: 1, stops: 1}},
		{"destroy", "environmentDestroyLease", nil, "destroyed", "gone", counts{close: 1, forget: 1, deletes: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e, l, id, w := leasedRecording(t, c.cfg)
			require.Equal(t, 1, e.d.idle.report().Allocations)
			e.srv.ResetRequests()
			m, p := e.teardownCall(l, c.method)
			raw, err := e.call(m, p)
			e.requireReceipt(raw, err, id, c.receipt)
			require.Equal(t, c.state, e.state(id))
			require.Equal(t, asleep, e.d.idle.report(), "a confirmed receipt clears the allocation evidence")
			got := counts{
				cancel: w.count("cancel"), close: w.count("close"), forget: w.count("forget"),
				stops: e.srv.CountRequests("POST", rStop), deletes: e.srv.CountRequests("DELETE", rSandbox),
				autodeletes: e.srv.CountRequests("POST", rAutodel),
			}
			require.Equal(t, c.want, got)
			require.Zero(t, e.srv.CountRequests("POST", rCreate), "a teardown creates nothing")
			if c.want.autodeletes > 0 {
				require.Equal(t, -1, e.info(id).AutoDeleteInterval, "stop-only disables auto-delete")
			}
		})
	}
}

// Resume, from a released (stopped) reusable lease: the sandbox is
// started once, the session its restart destroyed is forgotten, and the
// allocation evidence is back. A sandbox deleted meanwhile — gone, or
// still being destroyed — is not resumable and leaves no evidence.
func TestResumeLeavesExactlyThis(t *testing.T) {
	t.Run("stopped", func(t *testing.T) {
		t.Parallel()
		e, l, id, w := leasedRecording(t, map[string]any{"reuseLease": true})
		raw, err := e.call("environmentReleaseLease", e.leaseParams(l, nil))
		e.requireReceipt(raw, err, id, "stopped")
		require.Equal(t, asleep, e.d.idle.report())
		e.srv.ResetRequests()
		raw, err = e.call("environmentResumeLease", e.resumeParams(l, nil))
		require.NoError(t, err)
		require.Equal(t, id, *decode[lease](t, raw).ProviderLeaseID)
		require.Equal(t, "started", e.state(id))
		require.Equal(t, 1, e.srv.CountRequests("POST", rStart))
		require.Zero(t, e.srv.CountRequests("POST", rCreate))
		require.Equal(t, 1, w.count("forget"), "the restart destroyed the session")
		require.Equal(t, 1, e.d.idle.report().Allocations)
	})
	for _, c := range []struct {
		name string
		hold bool
	}{{"deleted", false}, {"being destroyed", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e, l, id := leased(t, map[string]any{"reuseLease": true})
			require.Equal(t, 1, e.d.idle.report().Allocations)
			if c.hold {
				release := e.srv.HoldTransitions(id)
				t.Cleanup(release)
			}
			_, _, err := e.client.Sandboxes.Delete(t.Context(), id)
			require.NoError(t, err)
			if !c.hold {
				e.await(id, "gone") // Daytona answers 404
			}
			e.srv.ResetRequests()
			raw, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
			require.NoError(t, err)
			require.JSONEq(t, expiredJSON, string(raw))
			require.Equal(t, asleep, e.d.idle.report(), "no allocation left behind")
			require.Zero(t, e.srv.CountRequests("POST", rStart), "nothing started")
			require.Zero(t, e.srv.CountRequests("POST", rCreate))
		})
	}
}

// A teardown's bridge drain waits at most the shorter of its own step
// bound and livenessTimeoutMs: a hung activity ends after the liveness
// bound, and the warning names it. (Planted: the comparison flipped, so
// the drain waited its full 10 s step bound.)
func TestDrainStepTakesTheShorterLivenessBound(t *testing.T) {
	var logs testenv.LogBuffer
	e := newTestEnv(t, map[string]any{"livenessTimeoutMs": 5000})
	e.use(e.driverWith(func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }))
	l := e.acquire(nil)
	gate := make(chan struct{})
	defer close(gate)
	e.realizeHeld(l, gate)
	raw, err := e.call("environmentReleaseLease", e.leaseParams(l, nil))
	e.requireReceipt(raw, err, *l.ProviderLeaseID, "destroyed")
	require.Contains(t, logs.String(), `\"sandbox.activityDrain\" did not respond within 5000 ms`)
}
