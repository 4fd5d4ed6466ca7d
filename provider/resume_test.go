package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/stretchr/testify/require"
)

// Resume (docs/behavior.md#resume, docs/behavior.md#missing-container, docs/behavior.md#warm-window, docs/behavior.md#refused-resume).

// reusable acquires a reusable lease and stops its sandbox server-side, as
// a release between turns would.
func reusable(t *testing.T, cfg map[string]any) (*testEnv, lease, string) {
	t.Helper()
	return leased(t, with(map[string]any{"reuseLease": true}, flat(cfg)...))
}

func flat(m map[string]any) []any {
	var kv []any
	for k, v := range m {
		kv = append(kv, k, v)
	}
	return kv
}

// noLifecycleMutation asserts resume neither started, recovered, deleted
// nor created anything.
func (e *testEnv) noLifecycleMutation() {
	e.t.Helper()
	for _, r := range [][2]string{{"POST", rStart}, {"POST", rRecover}, {"DELETE", rSandbox}, {"POST", rCreate}, {"POST", rStop}} {
		require.Zero(e.t, e.srv.CountRequests(r[0], r[1]), "%s %s", r[0], r[1])
	}
}

func TestResumeExpiresAConfirmedMissingContainerWithoutReplacingIt(t *testing.T) {
	e, l, id := reusable(t, nil)
	require.NoError(t, e.srv.LoseContainer(id))
	require.NoError(t, e.srv.SetError(id, daytonatest.MissingContainerReason(id), false))
	e.srv.ResetRequests()
	for range 2 { // the host may ask twice; the answer stays the same
		raw, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
		require.NoError(t, err)
		require.JSONEq(t, expiredJSON, string(raw))
	}
	require.Equal(t, 4, e.srv.CountRequests("GET", rSandbox), "one read and one fresh confirmation per resume")
	e.noLifecycleMutation()
	require.Equal(t, "error", e.state(id), "the provider record is left alone")
	require.Zero(t, e.d.idle.report().Allocations, "an expired lease is no allocation")
	require.Nil(t, e.d.handles.m[e.scopeOf(id)], "evicted")
}

func TestResumeMatchesTheOpaqueIDLiterally(t *testing.T) {
	for _, id := range []string{"sandbox-opaque", "sandbox.with+[literal](characters)"} {
		t.Run(id, func(t *testing.T) {
			e := newTestEnv(t, map[string]any{"reuseLease": true})
			l := e.acquire(nil)
			real := *l.ProviderLeaseID
			body := func(reasonID string) string {
				return e.dto(real, func(sb *daytona.Sandbox) {
					sb.ID, sb.State, sb.Recoverable = id, daytona.StateError, false
					sb.ErrorReason = daytonatest.MissingContainerReason(reasonID)
				})
			}
			l.ProviderLeaseID = &id
			l.Metadata["sandboxId"] = id
			// The exact report for this id, twice: expired.
			exact, lookalikeBody := body(id), ""
			lookalike := "sandboxXwith+[literal](characters)"
			if id == "sandbox-opaque" {
				lookalike = "sandbox-opaqu"
			}
			lookalikeBody = body(lookalike)
			e.srv.ResetRequests()
			f := e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Status: 200, Body: exact})
			raw, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
			require.NoError(t, err)
			require.JSONEq(t, expiredJSON, string(raw))
			require.Equal(t, 2, f.Hits())
			f.Remove()
			// The same text for an id that only matches as a pattern
			// ("." and "+" as regex metacharacters): unexplained, preserved.
			e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Status: 200, Body: lookalikeBody})
			_, err = e.call("environmentResumeLease", e.resumeParams(l, nil))
			require.ErrorContains(t, err, "is in an unrecoverable error state")
			e.noLifecycleMutation()
			e.expectLive(real)
		})
	}
}

func TestResumePreservesAnUnexplainedUnrecoverableError(t *testing.T) {
	reasons := map[string]func(id string) string{
		"another sandbox's container": func(string) string { return daytonatest.MissingContainerReason("sandbox-other") },
		"no such volume": func(id string) string {
			return fmt.Sprintf("not found: failed to inspect sandbox container %s: Error response from daemon: No such volume: %s", id, id)
		},
		"trailing text":  func(id string) string { return daytonatest.MissingContainerReason(id) + " (retrying)" },
		"runner offline": func(string) string { return "runner is unreachable" },
	}
	for name, reason := range reasons {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, l, id := reusable(t, nil)
			require.NoError(t, e.srv.SetError(id, reason(id), false))
			e.srv.ResetRequests()
			_, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
			require.ErrorContains(t, err, "Daytona sandbox "+id+" is in an unrecoverable error state: "+reason(id))
			e.noLifecycleMutation()
			require.Equal(t, "error", e.state(id), "preserved, never deleted or replaced")
			require.Equal(t, 1, e.srv.CountRequests("GET", rSandbox), "no confirmation read for an unexplained error")
		})
	}
}

func TestResumeRecoversARecoverableError(t *testing.T) {
	e, l, id := reusable(t, nil)
	require.NoError(t, e.srv.SetError(id, "disk quota exceeded", true))
	raw, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.NoError(t, err)
	r := decode[lease](t, raw)
	require.Equal(t, id, *r.ProviderLeaseID)
	require.Equal(t, "error", r.Metadata["resumedFromState"])
	require.Equal(t, "matched", r.Metadata["workspaceSentinel"].(map[string]any)["result"])
	require.Equal(t, 1, e.srv.CountRequests("POST", rRecover))
	require.Equal(t, "started", e.state(id))
}

// A recoverable sandbox with the missing-container text is not "gone"
// (docs/behavior.md#missing-container requires recoverable false): it is recovered, not expired.
func TestResumeRecoversAMissingContainerReportMarkedRecoverable(t *testing.T) {
	e, l, id := reusable(t, nil)
	require.NoError(t, e.srv.SetError(id, daytonatest.MissingContainerReason(id), true))
	raw, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.NoError(t, err)
	require.Equal(t, id, *decode[lease](t, raw).ProviderLeaseID)
	require.Equal(t, 1, e.srv.CountRequests("POST", rRecover))
}

func TestResumeReusesASandboxWhoseFreshStateDisprovesTheLoss(t *testing.T) {
	e, l, id := reusable(t, nil)
	missing := e.dto(id, func(sb *daytona.Sandbox) {
		sb.State, sb.Recoverable, sb.ErrorReason = daytona.StateError, false, daytonatest.MissingContainerReason(id)
	})
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Status: 200, Body: missing, Times: 1})
	e.srv.ResetRequests()
	raw, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.NoError(t, err)
	r := decode[lease](t, raw)
	require.Equal(t, id, *r.ProviderLeaseID)
	require.Equal(t, "started", r.Metadata["resumedFromState"], "the fresh state, not the cached loss")
	e.noLifecycleMutation()
}

// missingThenFault: the first read reports the exact missing container, the
// confirmation read meets the fault.
func missingThenFault(t *testing.T, cfg map[string]any, f daytonatest.Fault) (*testEnv, lease, string) {
	e, l, id := reusable(t, cfg)
	require.NoError(t, e.srv.SetError(id, daytonatest.MissingContainerReason(id), false))
	f.Method, f.Route, f.Skip = "GET", rSandbox, 1
	e.srv.Inject(f)
	e.srv.ResetRequests()
	return e, l, id
}

func TestResumePreservesTheLeaseWhenConfirmationFails(t *testing.T) {
	// The stalled case's liveness bound is far above a healthy read on a
	// loaded machine (its first read is healthy and bounded too): it only
	// ends the hang.
	cases := map[string]struct {
		cfg   map[string]any
		fault daytonatest.Fault
		want  string
	}{
		"provider 503":   {nil, daytonatest.Fault{Status: 503}, "service unavailable"},
		"rate limited":   {nil, daytonatest.Fault{Status: 429, Header: map[string][]string{"Retry-After": {"120"}}}, "rate limit"},
		"timeout error":  {nil, daytonatest.Fault{Status: 504}, "timed out"},
		"stalled (hang)": {map[string]any{"livenessTimeoutMs": 5000}, daytonatest.Fault{Hang: true}, `liveness call "sandbox.refreshData" did not respond within 5000 ms`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, l, id := missingThenFault(t, tc.cfg, tc.fault)
			_, err := e.call("environmentResumeLease", e.resumeParams(l, tc.cfg))
			require.ErrorContains(t, err, tc.want)
			require.Regexp(t, hostTransient, err.Error(), "the host retries a transient confirmation failure")
			e.noLifecycleMutation()
			require.Equal(t, "error", e.state(id), "lease preserved")
			require.Nil(t, e.d.handles.m[e.scopeOf(id)], "evicted")
		})
	}
}

func TestResumePreservesAnUnknownErrorOfTheFreshRead(t *testing.T) {
	e, l, id := missingThenFault(t, nil, daytonatest.Fault{Status: 403, Body: `{"statusCode":403,"message":"organization suspended"}`})
	_, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.ErrorContains(t, err, "organization suspended")
	e.noLifecycleMutation()
	require.Equal(t, "error", e.state(id))
}

func TestResumeRejectsARefreshedHandleOfAnotherSandbox(t *testing.T) {
	e, l, id := reusable(t, nil)
	require.NoError(t, e.srv.SetError(id, daytonatest.MissingContainerReason(id), false))
	other := e.dto(id, func(sb *daytona.Sandbox) { sb.ID = "sandbox-other" })
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Skip: 1, Status: 200, Body: other})
	e.srv.ResetRequests()
	_, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.ErrorContains(t, err, "Daytona sandbox handle mismatch: handle sandbox-other does not belong to lease "+id+".")
	var hm *HandleMismatchError
	require.ErrorAs(t, err, &hm)
	e.noLifecycleMutation()
}

func TestResumeAcceptsNotFoundWhileConfirming(t *testing.T) {
	e, l, id := missingThenFault(t, nil, daytonatest.Fault{Status: 404})
	raw, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.NoError(t, err)
	require.JSONEq(t, expiredJSON, string(raw))
	e.noLifecycleMutation()
	_ = id
}

func TestResumePreservesTheSandboxWhenSetupFailsAfterStart(t *testing.T) {
	e, l, id := reusable(t, nil)
	require.NoError(t, e.srv.StopSandbox(id))
	e.await(id, "stopped")
	e.srv.Inject(daytonatest.Fault{Route: rExecute, Status: 500, Times: 1})
	_, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.Error(t, err)
	require.Regexp(t, hostTransient, err.Error())
	require.Equal(t, 1, e.srv.CountRequests("POST", rStart), "started")
	require.Zero(t, e.srv.CountRequests("DELETE", rSandbox), "never deleted")
	require.Equal(t, "started", e.state(id))
	require.Nil(t, e.d.handles.m[e.scopeOf(id)], "evicted")
	// The next resume succeeds on the same sandbox.
	raw, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.NoError(t, err)
	require.Equal(t, id, *decode[lease](t, raw).ProviderLeaseID)
}

func TestResumeRetriesAStartRefusedWhileStopping(t *testing.T) {
	e, l, id := reusable(t, nil)
	// Daytona auto-stops the sandbox just as the resume starts it: the read
	// still says stopped-and-startable, the start begins the stop and is
	// refused, and the stop is held so the retry has to wait it out.
	stale := e.dto(id, func(sb *daytona.Sandbox) { sb.State = daytona.StateStopped })
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Status: 200, Body: stale, Times: 1})
	e.srv.Inject(daytonatest.Fault{Route: rStart, RefuseStartWhileStopping: true, Times: 1})
	release := e.srv.HoldTransitions(id)
	e.srv.ResetRequests()
	done := e.async("environmentResumeLease", e.resumeParams(l, nil))
	e.awaitRequests("POST", rStart, 1)
	e.awaitRequests("GET", rSandbox, 3) // settling: polling a held "stopping"
	require.Equal(t, "stopping", e.state(id))
	release()
	r := wait(t, done)
	require.NoError(t, r.err)
	require.Equal(t, id, *decode[lease](t, r.raw).ProviderLeaseID)
	require.Equal(t, 2, e.srv.CountRequests("POST", rStart), "one bounded retry")
	require.Zero(t, e.srv.CountRequests("DELETE", rSandbox))
	require.Equal(t, "started", e.state(id))
}

func TestResumeGivesUpOnRepeatedRefusalsWithATransientError(t *testing.T) {
	e, l, id := reusable(t, nil)
	require.NoError(t, e.srv.StopSandbox(id))
	e.await(id, "stopped")
	e.srv.Inject(daytonatest.Fault{Route: rStart, Status: 409, Body: `{"statusCode":409,"message":"Sandbox state change in progress"}`})
	e.srv.ResetRequests()
	_, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.ErrorContains(t, err, "the lease was preserved")
	require.Regexp(t, hostTransient, err.Error(), "the host's resume retry applies")
	require.Equal(t, 3, e.srv.CountRequests("POST", rStart), "bounded: the start and two retries")
	require.Zero(t, e.srv.CountRequests("DELETE", rSandbox))
	require.Zero(t, e.srv.CountRequests("POST", rCreate))
	require.Equal(t, "stopped", e.state(id))
}

func TestResumeForgetsTheSessionOnlyWhenTheSandboxRestarts(t *testing.T) {
	e, l, id := reusable(t, nil)
	w := e.recordWork()
	// Still running: the session survives.
	_, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.NoError(t, err)
	require.Zero(t, w.count("forget"))
	// Stopped (auto-stop): a restart destroys the session, so it is forgotten.
	require.NoError(t, e.srv.StopSandbox(id))
	e.await(id, "stopped")
	_, err = e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.NoError(t, err)
	require.Equal(t, 1, w.count("forget"))
	require.Equal(t, string(e.scopeOf(id)), w.keys[0], "keyed by the lease scope")
}

func TestResumeRefusesWhileCancelledWorkIsSettling(t *testing.T) {
	e, l, id := reusable(t, nil)
	gate := make(chan struct{})
	realize := e.realizeHeld(l, gate)
	// The Stop button: closes admission while the realize still runs.
	raw, err := e.call("environmentReleaseLease", e.leaseParams(l, nil, "cancelActiveWork", true))
	require.NoError(t, err)
	require.JSONEq(t, `{"providerLeaseId":"`+id+`","state":"stopped"}`, string(raw))
	_, err = e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.EqualError(t, err, "The stopped Daytona sandbox is still settling cancelled work. Retry shortly.")
	require.Zero(t, e.srv.CountRequests("POST", rStart), "no start while settling")
	close(gate)
	wait(t, realize)
	awaitScope(t, e.d, e.scopeOf(id), func(st *scopeState) bool { return st.activities == 0 })
	raw, err = e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.NoError(t, err, "settled: resume reopens the lease")
	require.Equal(t, id, *decode[lease](t, raw).ProviderLeaseID)
	_, err = e.call("environmentRealizeWorkspace", e.realizeParams(l))
	require.NoError(t, err, "admission reopened by resume")
}

// --- warm-window auto-stop floor (docs/behavior.md#warm-window) ---

func TestWarmFloorAtCreation(t *testing.T) {
	const margin = 5 * time.Minute
	for _, warm := range []time.Duration{125 * time.Second, 300 * time.Second, 900 * time.Second, 1800 * time.Second} {
		t.Run(warm.String(), func(t *testing.T) {
			t.Parallel()
			for _, configured := range []int{1, 15} {
				e := newTestEnv(t, map[string]any{"reuseLease": true, "autoStopInterval": configured, "warmRunnerIdleTimeoutMs": warm.Milliseconds()})
				l := e.acquire(nil)
				got := time.Duration(e.info(*l.ProviderLeaseID).AutoStopInterval) * time.Minute
				require.GreaterOrEqual(t, got, warm+margin, "auto-stop never overlaps the warm window")
				require.GreaterOrEqual(t, got, time.Duration(configured)*time.Minute, "never lowered")
				if configured == 1 { // the floor alone: rounded up to the next minute only
					require.Less(t, got, warm+margin+time.Minute)
				}
				require.NotContains(t, l.Metadata, "warmRunnerIdleTimeoutMs", "never in lease metadata")
			}
		})
	}
	cases := []struct {
		name string
		cfg  map[string]any
		want int
	}{
		{"environment warm mode, default window", map[string]any{"reuseLease": true, "runnerLifecycleMode": "warm", "autoStopInterval": 1}, 10},
		{"environment warm mode, own window", map[string]any{"reuseLease": true, "runnerLifecycleMode": "warm", "runnerIdleTimeoutMs": 1800000}, 35},
		{"default 15 above the default warm floor", map[string]any{"reuseLease": true, "runnerLifecycleMode": "warm"}, 15},
		{"explicit 15 raised for a 900 s window", map[string]any{"reuseLease": true, "autoStopInterval": 15, "warmRunnerIdleTimeoutMs": 900000}, 20},
		{"explicit 0 kept", map[string]any{"reuseLease": true, "autoStopInterval": 0, "warmRunnerIdleTimeoutMs": 900000}, 0},
		{"longer configured value kept", map[string]any{"reuseLease": true, "autoStopInterval": 45, "warmRunnerIdleTimeoutMs": 900000}, 45},
		{"non-reusable kept", map[string]any{"reuseLease": false, "warmRunnerIdleTimeoutMs": 900000}, 15},
		{"inherit without a forwarded window kept", map[string]any{"reuseLease": true, "runnerLifecycleMode": "inherit", "autoStopInterval": 2}, 2},
		{"per_turn kept", map[string]any{"reuseLease": true, "runnerLifecycleMode": "per_turn", "runnerIdleTimeoutMs": 900000}, 15},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t, tc.cfg)
			l := e.acquire(nil)
			require.Equal(t, tc.want, e.info(*l.ProviderLeaseID).AutoStopInterval)
		})
	}
}

func TestWarmFloorRaisedOnResume(t *testing.T) {
	e, l, id := reusable(t, nil)
	require.Equal(t, 15, e.info(id).AutoStopInterval)
	warm := map[string]any{"warmRunnerIdleTimeoutMs": 900000}
	raw, err := e.call("environmentResumeLease", e.resumeParams(l, warm))
	require.NoError(t, err)
	require.Equal(t, id, *decode[lease](t, raw).ProviderLeaseID)
	require.Equal(t, 20, e.info(id).AutoStopInterval)
	require.Equal(t, 1, e.srv.CountRequests("POST", rAutostop))
	// Already long enough: no second call.
	_, err = e.call("environmentResumeLease", e.resumeParams(l, warm))
	require.NoError(t, err)
	require.Equal(t, 1, e.srv.CountRequests("POST", rAutostop))
	// Not warm: nothing raised.
	_, err = e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.NoError(t, err)
	require.Equal(t, 1, e.srv.CountRequests("POST", rAutostop))
}

func TestWarmFloorRaiseIsBestEffort(t *testing.T) {
	cases := map[string]daytonatest.Fault{
		"failing setter":        {Status: 500},
		"never-settling setter": {Unsettled: true},
		"hanging setter":        {Hang: true}, // cut at the 5 s bound
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, l, id := reusable(t, nil)
			f.Route = rAutostop
			e.srv.Inject(f)
			raw, err := e.call("environmentResumeLease", e.resumeParams(l, map[string]any{"warmRunnerIdleTimeoutMs": 900000}))
			require.NoError(t, err, "the resume completes")
			require.Equal(t, id, *decode[lease](t, raw).ProviderLeaseID)
			require.Equal(t, 15, e.info(id).AutoStopInterval, "the old interval stays")
		})
	}
}

func TestResumeTransientPhrasing(t *testing.T) {
	cases := map[string]error{
		"5xx":                     fmt.Errorf("x: %w", daytona.ErrServer),
		"deadline":                context.DeadlineExceeded,
		"rate limit":              &daytona.RateLimitError{ErrorResponse: &daytona.ErrorResponse{StatusCode: 429}},
		"connection closed (EOF)": &daytona.TransportError{Method: "POST", Route: "/sandbox/{sandboxIdOrName}/start", Err: io.EOF},
	}
	for name, err := range cases {
		t.Run(name, func(t *testing.T) {
			out := transientForHost(err)
			require.Regexp(t, hostTransient, out.Error())
			require.True(t, errors.Is(out, err) || errors.Is(out, context.DeadlineExceeded))
		})
	}
	plain := errors.New("Daytona sandbox x is in an unrecoverable error state: boom")
	require.Equal(t, plain, transientForHost(plain), "a proven failure is not dressed up as transient")
}

func TestResumeOfASandboxBeingDestroyedExpires(t *testing.T) {
	e, l, id := reusable(t, nil)
	release := e.srv.HoldTransitions(id)
	defer release()
	_, _, err := e.client.Sandboxes.Delete(t.Context(), id) // someone deleted it; destruction in progress
	require.NoError(t, err)
	e.srv.ResetRequests()
	raw, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.NoError(t, err)
	require.JSONEq(t, expiredJSON, string(raw))
	e.noLifecycleMutation()
}

func TestResumeExpiresWhenTheStartRunsIntoALostContainer(t *testing.T) {
	e, l, id := reusable(t, nil)
	require.NoError(t, e.srv.StopSandbox(id))
	e.await(id, "stopped")
	require.NoError(t, e.srv.LoseContainer(id)) // the start will end in error with the exact report
	e.srv.ResetRequests()
	raw, err := e.call("environmentResumeLease", e.resumeParams(l, nil))
	require.NoError(t, err)
	require.JSONEq(t, expiredJSON, string(raw))
	require.Equal(t, 1, e.srv.CountRequests("POST", rStart))
	require.Zero(t, e.srv.CountRequests("DELETE", rSandbox))
	require.Zero(t, e.srv.CountRequests("POST", rRecover))
	require.Equal(t, "error", e.state(id), "left for the host's destroy")
}

// Title 52: an ephemeral run-bound workspace is verified before export
// recovery. Every run gets its own token; the sandbox's sentinel decides
// matched, mismatch or missing, and a foreign run, a foreign allocation or
// a legacy lease without proof is refused before any provider call. No
// resume creates a folder, uploads, stops or deletes anything.
func TestEphemeralRunBoundWorkspaceIsVerifiedBeforeExportRecovery(t *testing.T) {
	e := newTestEnv(t, nil)
	token := func(l lease) string { return l.Metadata["workspaceSentinel"].(map[string]any)["token"].(string) }
	first, second := e.acquire(nil, "runId", "run-1"), e.acquire(nil, "runId", "run-2")
	require.NotEmpty(t, token(first))
	require.NotEqual(t, token(first), token(second), "a distinct token per run")

	clone := func(md map[string]any) map[string]any {
		var out map[string]any
		require.NoError(t, json.Unmarshal(mustJSON(t, md), &out))
		return out
	}
	for _, tc := range []struct {
		name     string
		prepare  func(l lease) map[string]any // returns the resume's lease metadata
		result   string
		resumed  bool
		noRemote bool // refused before any provider call
	}{
		{name: "matched", prepare: func(l lease) map[string]any { return l.Metadata }, result: "matched", resumed: true},
		{name: "mismatch", result: "mismatch", prepare: func(l lease) map[string]any {
			p := e.hostPath(l, l.Metadata["workspaceSentinel"].(map[string]any)["path"].(string))
			require.NoError(t, os.WriteFile(p, []byte(`{"token":"`+token(second)+`"}`), 0o644))
			return l.Metadata
		}},
		{name: "missing", result: "missing", prepare: func(l lease) map[string]any {
			require.NoError(t, os.Remove(e.hostPath(l, l.Metadata["workspaceSentinel"].(map[string]any)["path"].(string))))
			return l.Metadata
		}},
		{name: "foreign_run", result: "mismatch", noRemote: true, prepare: func(l lease) map[string]any {
			md := clone(l.Metadata)
			md["nativeWorkspaceExportResume"] = map[string]any{"runId": "run-2"}
			return md
		}},
		{name: "foreign_allocation", result: "mismatch", noRemote: true, prepare: func(l lease) map[string]any {
			md := clone(l.Metadata)
			md["workspaceSentinel"].(map[string]any)["providerLeaseId"] = *second.ProviderLeaseID
			return md
		}},
		{name: "legacy", result: "mismatch", noRemote: true, prepare: func(l lease) map[string]any {
			md := clone(l.Metadata)
			delete(md, "workspaceSentinel")
			return md
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := e.acquire(nil, "runId", "run-1")
			md := tc.prepare(l)
			e.srv.ResetRequests()
			raw, err := e.call("environmentResumeLease", with(e.base(nil), "providerLeaseId", *l.ProviderLeaseID, "leaseMetadata", md))
			require.NoError(t, err)
			r := decode[lease](t, raw)
			require.Equal(t, tc.result, r.Metadata["workspaceSentinel"].(map[string]any)["result"])
			if tc.resumed {
				require.Equal(t, l.ProviderLeaseID, r.ProviderLeaseID)
			} else {
				require.Nil(t, r.ProviderLeaseID)
				require.Equal(t, true, r.Metadata["expired"])
			}
			if tc.noRemote {
				require.Empty(t, e.srv.Requests(), "refused before any provider call")
			}
			for _, req := range e.srv.Requests() {
				require.False(t, req.Method == "DELETE" || req.Route == rStop || strings.HasPrefix(req.Route, "/files/"),
					"resume never creates, uploads, stops or deletes: %s %s", req.Method, req.Route)
			}
			require.Equal(t, "started", e.state(*l.ProviderLeaseID), "never stopped or deleted")
		})
	}
}
