package provider

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/stretchr/testify/require"
)

// Release, destroy and stop (docs/behavior.md#stop, docs/behavior.md#release, docs/behavior.md#destroy, docs/behavior.md#recover-then-stop).

func TestCancelActiveWorkStopsWithoutWaitingForInFlightWork(t *testing.T) {
	eachReuse(t, func(t *testing.T, reuse bool) {
		e, l, id, w := leasedRecording(t, map[string]any{"reuseLease": reuse})
		gate := make(chan struct{})
		defer close(gate)
		realize := e.realizeHeld(l, gate)

		raw, err := e.call("environmentReleaseLease", e.leaseParams(l, nil, "cancelActiveWork", true))
		e.requireReceipt(raw, err, id, "stopped")
		select {
		case <-realize:
			t.Fatal("the in-flight realize was waited for")
		default:
		}
		require.Equal(t, 1, w.count("cancel"), "running commands are cancelled")
		require.Zero(t, w.count("close"), "no drain")
		require.Equal(t, "stopped", e.state(id))
		require.Zero(t, e.srv.CountRequests("DELETE", rSandbox), "the Stop button never deletes")
		require.Zero(t, e.srv.CountRequests("POST", rStart))

		// Later work is refused.
		_, err = e.call("environmentRealizeWorkspace", e.realizeParams(l))
		require.ErrorContains(t, err, "Daytona sandbox lease "+id+" is no longer active.")
	})
}

func TestCancelActiveWorkWithoutAReceiptWhenStopIsRejected(t *testing.T) {
	e, l, id := leased(t, nil)
	e.srv.Inject(daytonatest.Fault{Route: rStop, Status: 500})
	_, err := e.call("environmentReleaseLease", e.leaseParams(l, nil, "cancelActiveWork", true))
	require.Error(t, err, "no termination receipt")
	require.Zero(t, e.srv.CountRequests("DELETE", rSandbox))
	e.expectLive(id)
}

// heldReceipt runs a teardown whose provider transition is held, proves no
// receipt arrives while Daytona has not confirmed, then lets it finish.
func heldReceipt(t *testing.T, e *testEnv, id, method string, params any, providerCall [2]string) result {
	t.Helper()
	release := e.srv.HoldTransitions(id)
	e.srv.ResetRequests()
	done := e.async(method, params)
	e.awaitRequests(providerCall[0], providerCall[1], 1)
	// Daytona accepted the call; the worker keeps polling the held sandbox
	// (two reads after the call prove it is waiting, not answering).
	e.awaitRequests("GET", rSandbox, e.srv.CountRequests("GET", rSandbox)+2)
	select {
	case r := <-done:
		t.Fatalf("receipt before the provider confirmed: %s %v", r.raw, r.err)
	default:
	}
	release()
	return wait(t, done)
}

func TestReceiptsOnlyAfterTheProviderConfirmed(t *testing.T) {
	cases := []struct {
		name, teardown string
		reuse          bool
		providerCall   [2]string
		receipt, after string // after: the sandbox's state then ("" unchecked)
	}{
		{"release stop", "environmentReleaseLease", true, [2]string{"POST", rStop}, "stopped", "stopped"},
		{"release delete", "environmentReleaseLease", false, [2]string{"DELETE", rSandbox}, "destroyed", "gone"},
		{"destroy", "environmentDestroyLease", false, [2]string{"DELETE", rSandbox}, "destroyed", "gone"},
		{"stop", "environmentStopLease", false, [2]string{"POST", rStop}, "stopped", ""},
		{"cancelActiveWork", "cancelActiveWork", false, [2]string{"POST", rStop}, "stopped", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, l, id := leased(t, map[string]any{"reuseLease": tc.reuse})
			method, params := e.teardownCall(l, tc.teardown)
			r := heldReceipt(t, e, id, method, params, tc.providerCall)
			e.requireReceipt(r.raw, r.err, id, tc.receipt)
			if tc.after != "" {
				require.Equal(t, tc.after, e.state(id))
			}
		})
	}
}

func TestReleaseRefreshesACachedStoppedHandle(t *testing.T) {
	e, l, id := leased(t, map[string]any{"reuseLease": true})
	// The cache believes the sandbox is stopped; Daytona says started.
	k := e.scopeOf(id)
	e.d.handles.seed(k, &daytona.Sandbox{ID: id, State: daytona.StateStopped})
	e.srv.ResetRequests()
	raw, err := e.call("environmentReleaseLease", e.leaseParams(l, nil))
	e.requireReceipt(raw, err, id, "stopped")
	require.Equal(t, 1, e.srv.CountRequests("POST", rStop), "the cached state is not a receipt")
	require.Equal(t, "stopped", e.state(id))
}

func TestReleaseFallsBackToDeleteWhenStoppingAnErroredReusableLeaseFails(t *testing.T) {
	e, l, id := leased(t, map[string]any{"reuseLease": true})
	require.NoError(t, e.srv.SetError(id, "runner failure", false))
	raw, err := e.call("environmentReleaseLease", e.leaseParams(l, nil))
	e.requireReceipt(raw, err, id, "destroyed")
	e.expectLive() // an errored sandbox is hidden (GET 404) once its delete is accepted
}

func TestReleaseFallsBackToDeleteWhenAStopFailsMidCall(t *testing.T) {
	e, l, id := leased(t, map[string]any{"reuseLease": true})
	// Daytona began stopping, then the reply was lost.
	e.srv.Inject(daytonatest.Fault{Route: rStop, Perform: true, Drop: true, Times: 1})
	raw, err := e.call("environmentReleaseLease", e.leaseParams(l, nil))
	e.requireReceipt(raw, err, id, "destroyed")
	e.expectLive()
}

func TestTeardownWaitsForAnInFlightActivityBeforeCleanup(t *testing.T) {
	eachName(t, []string{"environmentReleaseLease", "environmentDestroyLease"}, func(t *testing.T, method string) {
		e, l, id, w := leasedRecording(t, nil)
		k := e.scopeOf(id)
		gate := make(chan struct{})
		realize := e.realizeHeld(l, gate)
		done := e.async(method, e.leaseParams(l, nil))
		awaitScope(t, e.d, k, func(st *scopeState) bool { return st.teardowns == 1 })
		require.Zero(t, e.srv.CountRequests("DELETE", rSandbox), "cleanup waits for the activity")
		require.Zero(t, w.count("close"), "the session is closed after the activity ended")
		close(gate)
		require.NoError(t, wait(t, realize).err, "the in-flight realize finished on a live sandbox")
		r := wait(t, done)
		e.requireReceipt(r.raw, r.err, id, "destroyed")
		require.Equal(t, 1, w.count("close"), "bridge drain closes the session")
		e.expectLive()
	})
}

func TestTeardownTerminatesWhenBridgeActivityNeverSettles(t *testing.T) {
	eachName(t, []string{"environmentReleaseLease", "environmentDestroyLease"}, func(t *testing.T, method string) {
		// The liveness bound ends the hung drain; it also bounds the
		// healthy fresh read, so it is far above one on a loaded machine.
		e, l, id := leased(t, map[string]any{"livenessTimeoutMs": 5000})
		gate := make(chan struct{})
		defer close(gate)
		e.realizeHeld(l, gate)
		raw, err := e.call(method, e.leaseParams(l, nil))
		require.NoError(t, err, "a hung drain never blocks termination")
		require.JSONEq(t, receiptJSON(id, "destroyed"), string(raw))
		require.Equal(t, "gone", e.state(id))
	})
}

func TestLateWorkAfterTeardownIsRefused(t *testing.T) {
	eachName(t, []string{"environmentReleaseLease", "environmentDestroyLease", "environmentStopLease"}, func(t *testing.T, method string) {
		e := newTestEnv(t, map[string]any{"reuseLease": true})
		l := e.acquire(nil)
		_, err := e.call(method, e.leaseParams(l, nil))
		require.NoError(t, err)
		_, err = e.call("environmentRealizeWorkspace", e.realizeParams(l))
		var inactive *LeaseInactiveError
		require.ErrorAs(t, err, &inactive)
		require.EqualError(t, err, "Daytona sandbox lease "+*l.ProviderLeaseID+" is no longer active.")
	})
}

func TestQueuedWorkIsRefusedOnceTheTeardownBegins(t *testing.T) {
	// A realize that arrives while a teardown holds the gate waits, then
	// finds the tombstone (docs/behavior.md#gates).
	e, l, id := leased(t, nil)
	k := e.scopeOf(id)
	end := e.d.scopes.beginTeardown(k)
	_, err := e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.ErrorContains(t, err, "is no longer active")
	end()
	_, err = e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.ErrorContains(t, err, "is no longer active", "the tombstone outlives the gate")
}

// --- stop lease (docs/behavior.md#stop, docs/behavior.md#recover-then-stop) ---

func (e *testEnv) stop(l lease, extra ...any) (json.RawMessage, error) {
	e.t.Helper()
	return e.call("environmentStopLease", e.leaseParams(l, nil, extra...))
}

// requestIndex is the position of the first matching request in the log.
func (e *testEnv) requestIndex(method, route string) int {
	for i, r := range e.srv.Requests() {
		if r.Method == method && r.Route == route {
			return i
		}
	}
	return -1
}

func TestStopDisablesAutoDeleteAndConfirmsItBeforeStopping(t *testing.T) {
	eachReuse(t, func(t *testing.T, reuse bool) {
		e, l, id, w := leasedRecording(t, map[string]any{"reuseLease": reuse})
		e.srv.ResetRequests()
		raw, err := e.stop(l)
		e.requireReceipt(raw, err, id, "stopped")
		info := e.info(id)
		require.Equal(t, "stopped", info.State)
		require.Equal(t, -1, info.AutoDeleteInterval, "the stopped work is retained")
		setter, stop := e.requestIndex("POST", rAutodel), e.requestIndex("POST", rStop)
		require.True(t, setter >= 0 && stop > setter)
		confirmed := false
		for _, r := range e.srv.Requests()[setter+1 : stop] {
			confirmed = confirmed || (r.Method == "GET" && r.Route == rSandbox)
		}
		require.True(t, confirmed, "a fresh read between setter and stop: %v", e.srv.Requests())
		require.Zero(t, e.srv.CountRequests("DELETE", rSandbox))
		require.Zero(t, e.srv.CountRequests("POST", rArchive))
		require.Equal(t, 1, w.count("cancel"))
		require.Equal(t, 1, w.count("forget"))
		// An already stopped sandbox: confirmed again, not stopped twice.
		raw, err = e.stop(l)
		e.requireReceipt(raw, err, id, "stopped")
		require.Equal(t, 1, e.srv.CountRequests("POST", rStop))
	})
}

func TestStopRetentionPolicyFailuresNeverStop(t *testing.T) {
	cases := map[string]struct {
		fault daytonatest.Fault
		want  string
	}{
		"setter failed":  {daytonatest.Fault{Route: rAutodel, Status: 500}, "Internal Server Error"},
		"refresh failed": {daytonatest.Fault{Method: "GET", Route: rSandbox, Skip: 1, Status: 503}, "Service Unavailable"},
		"not confirmed":  {daytonatest.Fault{Route: rAutodel, Unsettled: true}, "Daytona retention policy was not confirmed"},
		"setter hangs":   {daytonatest.Fault{Route: rAutodel, Hang: true}, `"sandbox.setAutoDeleteInterval" did not respond within 5000 ms`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Healthy bounded reads run in every case: the bound is far
			// above one on a loaded machine and only ends the hang.
			e, l, id := leased(t, map[string]any{"livenessTimeoutMs": 5000})
			e.srv.Inject(tc.fault)
			e.srv.ResetRequests()
			_, err := e.stop(l)
			require.ErrorContains(t, err, tc.want)
			require.Zero(t, e.srv.CountRequests("POST", rStop), "nothing stopped")
			require.Zero(t, e.srv.CountRequests("DELETE", rSandbox), "nothing deleted")
			require.Zero(t, e.srv.CountRequests("POST", rArchive))
			require.Equal(t, "started", e.state(id))
			e.expectLive(id)
		})
	}
}

func TestStopFailureRetainsTheSandbox(t *testing.T) {
	eachReuse(t, func(t *testing.T, reuse bool) {
		e, l, id := leased(t, map[string]any{"reuseLease": reuse})
		e.srv.Inject(daytonatest.Fault{Route: rStop, Status: 500})
		_, err := e.stop(l)
		require.Error(t, err)
		// Release with stop_and_retain is the same hook.
		_, err = e.call("environmentReleaseLease", e.leaseParams(l, nil, "resourceDisposition", "stop_and_retain"))
		require.Error(t, err)
		require.Zero(t, e.srv.CountRequests("DELETE", rSandbox), "stop never deletes")
		e.expectLive(id)
	})
}

func TestReleaseStopAndRetainBehavesLikeStop(t *testing.T) {
	e := newTestEnv(t, nil) // ephemeral: a plain release would delete
	l := e.acquire(nil)
	id := *l.ProviderLeaseID
	raw, err := e.call("environmentReleaseLease", e.leaseParams(l, nil, "resourceDisposition", "stop_and_retain"))
	e.requireReceipt(raw, err, id, "stopped")
	info := e.info(id)
	require.Equal(t, "stopped", info.State)
	require.Equal(t, -1, info.AutoDeleteInterval)
	require.Zero(t, e.srv.CountRequests("DELETE", rSandbox))
}

func TestStopRequiresAnExactIdentityAndAnExistingSandbox(t *testing.T) {
	e := newTestEnv(t, nil)
	_, err := e.call("environmentStopLease", with(e.base(nil), "providerLeaseId", nil))
	require.EqualError(t, err, "Daytona stop requires an exact sandbox identity")
	_, err = e.call("environmentStopLease", with(e.base(nil), "providerLeaseId", "sandbox-unknown"))
	require.EqualError(t, err, "Daytona retained sandbox is unavailable")
}

func TestStopRecoversARecoverableErrorOnceThenStops(t *testing.T) {
	e, l, id := leased(t, nil)
	require.NoError(t, e.srv.SetError(id, "no space left on device", true))
	raw, err := e.stop(l)
	e.requireReceipt(raw, err, id, "stopped")
	require.Equal(t, 1, e.srv.CountRequests("POST", rRecover))
	require.Equal(t, "stopped", e.state(id))
	require.Zero(t, e.srv.CountRequests("DELETE", rSandbox))
}

func stopErrorOf(t *testing.T, err error, id, reason string) *StopError {
	t.Helper()
	var se *StopError
	require.ErrorAs(t, err, &se)
	require.Equal(t, reason, se.Reason)
	require.Equal(t, id, se.ProviderLeaseID)
	require.Equal(t, rpc.CodeWorkerError, se.RPCCode())
	data := mustJSON(t, se.RPCData())
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	require.Equal(t, "paperclip/environment-stop-error/v1", m["schema"])
	require.Equal(t, "PluginEnvironmentStopError", m["name"])
	require.Equal(t, id, m["providerLeaseId"])
	require.Equal(t, reason, m["reason"])
	require.Contains(t, m, "sandboxState")
	require.Len(t, m, 5)
	require.NotContains(t, string(data), "test-api-key")
	return se
}

func TestStopTypedErrors(t *testing.T) {
	// Each case puts the sandbox in error, makes the stop-only hook meet one
	// failure and checks the typed error; no case stops or deletes.
	cases := []struct {
		name        string
		reason      string // the SetError reason
		recoverable bool
		want        string // StopError.Reason
		recovers    int    // POST recover expected; -1 unchecked
		// stop makes the call (after any faults); check asserts the rest.
		stop  func(e *testEnv, l lease, id string) error
		check func(t *testing.T, e *testEnv, id string, se *StopError)
	}{
		{
			name: "unrecoverable", reason: "runner lost the sandbox", want: StopUnrecoverable, recovers: 0,
			check: func(t *testing.T, e *testEnv, id string, se *StopError) {
				require.Equal(t, "error", se.SandboxState)
				require.Equal(t, -1, e.info(id).AutoDeleteInterval, "retention confirmed first")
			},
		},
		{
			name: "error after recover", reason: "no space left on device", recoverable: true, want: StopErrorAfterRecover, recovers: 1,
			stop: func(e *testEnv, l lease, id string) error {
				// Daytona accepts the recovery but the sandbox stays in error.
				body := e.dto(id, func(sb *daytona.Sandbox) { sb.State = daytona.StateStarting })
				e.srv.Inject(daytonatest.Fault{Route: rRecover, Status: 200, Body: body})
				_, err := e.stop(l)
				return err
			},
			check: func(t *testing.T, e *testEnv, id string, se *StopError) {
				require.Equal(t, "error", se.SandboxState, "recover once only")
			},
		},
		{
			name: "recover rejected", reason: "no space left on device", recoverable: true, want: StopRecoverUnfinished, recovers: 1,
			stop: func(e *testEnv, l lease, id string) error {
				e.srv.Inject(daytonatest.Fault{Route: rRecover, Status: 500})
				_, err := e.stop(l)
				return err
			},
			check: func(t *testing.T, e *testEnv, id string, se *StopError) { e.expectLive(id) },
		},
		{
			name: "recover hangs", reason: "no space left on device", recoverable: true, want: StopRecoverUnfinished, recovers: 1,
			stop: func(e *testEnv, l lease, id string) error {
				hang := e.srv.Inject(daytonatest.Fault{Route: rRecover, Hang: true})
				// The worker cuts recovery at 20 s; the host's own deadline here
				// passes once the recover hangs, which must end the same way.
				_, err := e.callExpiringWhen("environmentStopLease", e.leaseParams(l, nil), func() bool { return hang.Hits() > 0 })
				return err
			},
			check: func(t *testing.T, e *testEnv, id string, se *StopError) { require.Equal(t, "error", se.SandboxState) },
		},
		{
			name: "recover does not finish in time", reason: "no space left on device", recoverable: true, want: StopRecoverUnfinished, recovers: -1,
			stop: func(e *testEnv, l lease, id string) error {
				release := e.srv.HoldTransitions(id) // recovery accepted, never reaches started
				e.t.Cleanup(release)
				// The host's deadline passes once the recover was accepted.
				_, err := e.callExpiringWhen("environmentStopLease", e.leaseParams(l, nil), func() bool {
					for _, r := range e.srv.Requests() {
						if r.Method == "POST" && r.Route == rRecover && r.Done {
							return true
						}
					}
					return false
				})
				return err
			},
			check: func(t *testing.T, e *testEnv, id string, se *StopError) {
				require.NotEqual(t, "started", se.SandboxState)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, l, id := leased(t, nil)
			require.NoError(t, e.srv.SetError(id, tc.reason, tc.recoverable))
			var err error
			if tc.stop != nil {
				err = tc.stop(e, l, id)
			} else {
				_, err = e.stop(l)
			}
			se := stopErrorOf(t, err, id, tc.want)
			tc.check(t, e, id, se)
			if tc.recovers >= 0 {
				require.Equal(t, tc.recovers, e.srv.CountRequests("POST", rRecover))
			}
			require.Zero(t, e.srv.CountRequests("POST", rStop))
			require.Zero(t, e.srv.CountRequests("DELETE", rSandbox))
		})
	}
}

// --- destroy (docs/behavior.md#destroy) ---

func TestDestroyWorksFromParamsAloneOnAFreshWorker(t *testing.T) {
	e, l, id := leased(t, nil)
	e.use(e.newDriver()) // restarted worker: no cache, no admission state
	p := e.leaseParams(l, nil)
	p["environmentId"] = "" // the environment was deleted
	raw, err := e.call("environmentDestroyLease", p)
	e.requireReceipt(raw, err, id, "destroyed")
	require.Equal(t, "gone", e.state(id))
}

func TestDestroyOfAnUnknownSandboxIsAReceipt(t *testing.T) {
	e := newTestEnv(t, nil)
	raw, err := e.call("environmentDestroyLease", with(e.base(nil), "providerLeaseId", "sandbox-never-existed"))
	e.requireReceipt(raw, err, "sandbox-never-existed", "destroyed")
	raw, err = e.call("environmentDestroyLease", with(e.base(nil), "providerLeaseId", nil))
	require.NoError(t, err)
	require.JSONEq(t, `null`, string(raw))
	raw, err = e.call("environmentReleaseLease", with(e.base(nil), "providerLeaseId", nil))
	require.NoError(t, err)
	require.JSONEq(t, `null`, string(raw))
}

func TestDestroyRetriesALostDeleteReply(t *testing.T) {
	e, l, id := leased(t, nil)
	f := e.srv.Inject(daytonatest.Fault{Method: "DELETE", Route: rSandbox, Perform: true, Drop: true, Times: 1})
	raw, err := e.call("environmentDestroyLease", e.leaseParams(l, nil))
	e.requireReceipt(raw, err, id, "destroyed")
	require.Equal(t, 1, f.Hits())
	require.GreaterOrEqual(t, e.srv.CountRequests("DELETE", rSandbox), 2, "the idempotent delete was sent again")
	e.expectLive()
	// And again (the host's sweep after a lost receipt).
	raw, err = e.call("environmentDestroyLease", e.leaseParams(l, nil))
	e.requireReceipt(raw, err, id, "destroyed")
}

func TestDestroyClosesTheSessionEvenWhenTheDeleteFails(t *testing.T) {
	e, l, _, w := leasedRecording(t, nil)
	e.srv.Inject(daytonatest.Fault{Method: "DELETE", Route: rSandbox, Status: 500})
	_, err := e.call("environmentDestroyLease", e.leaseParams(l, nil))
	require.Error(t, err, "no receipt without a confirmed delete")
	require.Equal(t, 1, w.count("close"))
	e.expectLive(*l.ProviderLeaseID)
	require.Equal(t, 1, e.d.idle.report().Allocations, "still allocated")
}

func TestStopErrorMessagesAreSecretFree(t *testing.T) {
	for _, reason := range []string{StopUnrecoverable, StopErrorAfterRecover, StopRecoverUnfinished} {
		err := error(&StopError{ProviderLeaseID: "sb-1", Reason: reason, cause: errors.New("provider said: key=test-api-key")})
		require.Contains(t, err.Error(), "sb-1")
		require.NotContains(t, err.Error(), "test-api-key")
		require.Contains(t, err.Error(), "preserved")
	}
}

// destroyDuringAStop destroys a reusable lease while Daytona is stopping
// its sandbox (held until release is called), and returns once the first
// delete was refused with 409.
func destroyDuringAStop(t *testing.T) (e *testEnv, id string, release func(), done <-chan result) {
	e, l, id := leased(t, map[string]any{"reuseLease": true})
	release = e.srv.HoldTransitions(id)
	require.NoError(t, e.srv.StopSandbox(id))
	e.srv.ResetRequests()
	done = e.async("environmentDestroyLease", e.leaseParams(l, nil))
	e.awaitRequests("DELETE", rSandbox, 1)
	return e, id, release, done
}

func TestDestroyWaitsOutATransitionInProgress(t *testing.T) {
	// Daytona auto-stops the sandbox as the host destroys the lease: the
	// delete is refused with 409 until the stop settles.
	e, id, release, done := destroyDuringAStop(t)
	e.awaitRequests("GET", rSandbox, 2) // waiting for the stop to settle
	require.Equal(t, "stopping", e.state(id))
	release()
	r := wait(t, done)
	e.requireReceipt(r.raw, r.err, id, "destroyed")
	require.Equal(t, 2, e.srv.CountRequests("DELETE", rSandbox))
	e.expectLive()
}

// A sandbox that answers 404 while the destroy waits out a transition
// (Daytona's own deletion raced it, or a read saw it gone) is no failure:
// the delete is tried again, and its answer decides. (Sample-5 bug 3: the
// wait's 404 failed the destroy.)
func TestDestroyWaitingOutATransitionTakesANotFoundAsGone(t *testing.T) {
	e, id, release, done := destroyDuringAStop(t)
	gone := e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Status: 404, Times: 1})
	require.NoError(t, e.srv.Await(t.Context(), func() bool { return gone.Hits() > 0 }))
	release()
	r := wait(t, done)
	e.requireReceipt(r.raw, r.err, id, "destroyed")
	require.GreaterOrEqual(t, e.srv.CountRequests("DELETE", rSandbox), 2, "the delete was tried again")
	e.expectLive()
}

// --- teardowns racing Daytona's own transitions ---

func TestReusableReleaseDuringAnAutoStopKeepsTheSandbox(t *testing.T) {
	eachName(t, []string{"environmentReleaseLease", "environmentStopLease", "cancelActiveWork"}, func(t *testing.T, method string) {
		// The warm window and auto-stop coincide (docs/behavior.md#warm-window): Daytona is
		// stopping the sandbox as the host releases the lease.
		e, l, id := leased(t, map[string]any{"reuseLease": true})
		release := e.srv.HoldTransitions(id)
		require.NoError(t, e.srv.StopSandbox(id))
		e.srv.ResetRequests()
		method, params := e.teardownCall(l, method)
		done := e.async(method, params)
		e.awaitRequests("POST", rStop, 1) // refused: a transition is in progress
		e.awaitRequests("GET", rSandbox, 3)
		release()
		r := wait(t, done)
		e.requireReceipt(r.raw, r.err, id, "stopped")
		require.Zero(t, e.srv.CountRequests("DELETE", rSandbox), "a retained sandbox is never deleted for a busy stop")
		require.Equal(t, "stopped", e.state(id))
	})
}

func TestTeardownOfAnArchivedRetainedSandbox(t *testing.T) {
	eachName(t, []string{"environmentReleaseLease", "environmentStopLease", "cancelActiveWork"}, func(t *testing.T, method string) {
		// Daytona auto-archived the stopped sandbox: its compute is not
		// running and its files are kept, which is what a stop asks for.
		e, l, id := leased(t, map[string]any{"reuseLease": true})
		require.NoError(t, e.srv.StopSandbox(id))
		e.await(id, "stopped")
		_, _, err := e.client.Sandboxes.Archive(t.Context(), id)
		require.NoError(t, err)
		e.await(id, "archived")
		e.srv.ResetRequests()
		method, params := e.teardownCall(l, method)
		raw, err := e.call(method, params)
		e.requireReceipt(raw, err, id, "stopped")
		require.Zero(t, e.srv.CountRequests("DELETE", rSandbox), "an archived reusable sandbox is kept")
		require.Zero(t, e.srv.CountRequests("POST", rStop))
		require.Equal(t, "archived", e.state(id))
	})
}

// TestTeardownByNameWaitsForTheRealDeletion: Daytona renames a sandbox as
// it starts deleting it, so its creation name answers 404 at once. A
// release or destroy given the name must wait on the sandbox's id, and
// answer only after Daytona finished destroying it.
func TestTeardownByNameWaitsForTheRealDeletion(t *testing.T) {
	eachName(t, []string{"environmentDestroyLease", "environmentReleaseLease"}, func(t *testing.T, method string) {
		e, l, id := leased(t, nil, daytonatest.WithTransitionDelay(300*time.Millisecond))
		info, ok := e.srv.Sandbox(id)
		require.True(t, ok)
		name := info.Name
		require.NotEqual(t, id, name)
		p := e.leaseParams(l, nil, "providerLeaseId", name)
		raw, err := e.call(method, p)
		e.requireReceipt(raw, err, name, "destroyed")
		require.Equal(t, "gone", e.state(id), "a receipt before Daytona completed the deletion")
		require.GreaterOrEqual(t, e.srv.CountRequests("GET", rSandbox), 1)
	})
}

func TestDestroyByNameRetriedAfterALostDeleteReplyWaitsForTheDeletion(t *testing.T) {
	e, l, id := leased(t, nil, daytonatest.WithTransitionDelay(300*time.Millisecond))
	info, ok := e.srv.Sandbox(id)
	require.True(t, ok)
	// The first delete renames the sandbox, but its answer is lost: the
	// retry by name answers 404 while the sandbox is still being destroyed.
	e.srv.Inject(daytonatest.Fault{Method: "DELETE", Route: rSandbox, Perform: true, Drop: true, Times: 1})
	raw, err := e.call("environmentDestroyLease", e.leaseParams(l, nil, "providerLeaseId", info.Name))
	e.requireReceipt(raw, err, info.Name, "destroyed")
	require.Equal(t, "gone", e.state(id), "a receipt before Daytona completed the deletion")
}
