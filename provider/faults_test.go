package provider

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/bound"
	"github.com/stretchr/testify/require"
)

// Every fault kind the emulator injects, on every provider step of
// acquire, resume, release, destroy and stop, against the outcome rules:
//
//   - a lease or a receipt only when Daytona confirmed the step;
//   - otherwise an error (resume: phrased so the host retries it), or the
//     creation-cleanup envelope when an allocation may exist and its
//     deletion is not confirmed;
//   - never a leaked sandbox: after each case the emulator holds exactly the
//     sandboxes the outcome accounts for (the lease's, or the envelope's);
//   - never a deletion on resume or stop, and never of a sandbox that is not
//     proven ours.
//
// Each fault applies once (Times 1), as a transient provider problem would,
// except where a step's retries would hide it (noted per step).

// faultKinds are the emulator's reply faults.
var faultKinds = map[string]daytonatest.Fault{
	"500":   {Status: 500},
	"429":   {Status: 429, Header: http.Header{"Retry-After": {"10"}}}, // longer than the liveness bound, shorter than the others
	"hang":  {Hang: true},
	"drop":  {Drop: true},
	"delay": {Delay: 50 * time.Millisecond},
}

// Outcomes.
const (
	wantLease     = "lease"
	wantError     = "error"
	wantEnvelope  = "envelope"
	wantStopped   = "stopped"
	wantDestroyed = "destroyed"
	wantExpired   = "expired"
)

// Live sets after the case.
const (
	liveNone     = "none"     // nothing left
	liveLease    = "lease"    // the lease's sandbox, preserved
	liveObserved = "observed" // the envelope's observed sandbox, handed to the host
	liveNamed    = "named"    // an allocation the envelope names but never observed
)

type outcome struct{ want, live string }

type faultStep struct {
	op     string // acquire, resume, release, release-reusable, destroy, stop
	name   string
	fault  daytonatest.Fault // Method, Route, Skip
	expect map[string]outcome
}

// faultConfig keeps the bounded reads (livenessTimeoutMs) shorter than a
// 429's Retry-After, so a throttled bounded read fails, yet far longer than
// any healthy read on a loaded machine: the bound only ever ends a hang.
// The acquire budget (timeoutMs) stays the harness's generous one.
var faultConfig = map[string]any{"livenessTimeoutMs": 5000}

// workerEndsHang are the steps whose hang the worker's own liveness bound
// ends. Every other hang would run into a bound (timeoutMs, plus 5 s for
// stop and delete) longer than a test should wait; there the host gives up
// first, and its deadline passes once the hang has begun (not after a
// wall-clock interval, which a loaded machine could spend before reaching
// the hang): the outcome rules must hold when the host gives up first.
var workerEndsHang = map[string]bool{
	"release/fresh read":       true,
	"stop/disable auto-delete": true,
	"stop/confirm read":        true,
}

var faultSteps = []faultStep{
	// Not allocated, but a 5xx, a hang or a lost connection cannot prove
	// that: the never-observed name is reported, not guessed.
	// 429: a refusal: nothing allocated (create is never retried)
	{op: "acquire", name: "create", fault: daytonatest.Fault{Method: "POST", Route: rCreate}, expect: map[string]outcome{
		"500": {wantEnvelope, liveNone}, "429": {wantError, liveNone}, "hang": {wantEnvelope, liveNone}, "drop": {wantEnvelope, liveNone}, "delay": {wantLease, liveLease}}},
	// Allocated, reply lost: found by exact name and labels, deleted.
	// (A performed 429 is not modelled: Daytona's throttler answers 429
	// before the request is handled, so a 429 create allocated nothing.)
	// hang: the late reply is never observed
	{op: "acquire", name: "create performed", fault: daytonatest.Fault{Method: "POST", Route: rCreate, Perform: true}, expect: map[string]outcome{
		"500": {wantError, liveNone}, "hang": {wantEnvelope, liveNamed}, "drop": {wantError, liveNone}}},
	// 500: deleted inline, original error kept
	// hang: budget spent: nothing more happens, the host journals it
	{op: "acquire", name: "workspace setup", fault: daytonatest.Fault{Route: rExecute}, expect: map[string]outcome{
		"500": {wantError, liveNone}, "429": {wantError, liveNone}, "hang": {wantEnvelope, liveObserved}, "drop": {wantError, liveNone}, "delay": {wantLease, liveLease}}},
	// 429: retried (idempotent) and confirmed
	// drop: retried (idempotent) and confirmed
	{op: "acquire", name: "inline delete after failed setup", fault: daytonatest.Fault{Method: "DELETE", Route: rSandbox}, expect: map[string]outcome{
		"500": {wantEnvelope, liveObserved}, "429": {wantError, liveNone}, "hang": {wantEnvelope, liveObserved}, "drop": {wantError, liveNone}, "delay": {wantError, liveNone}}},
	// 500: 500 is not retried by the client
	// 429: retried
	// drop: retried
	{op: "resume", name: "read", fault: daytonatest.Fault{Method: "GET", Route: rSandbox}, expect: map[string]outcome{
		"500": {wantError, liveLease}, "429": {wantLease, liveLease}, "hang": {wantError, liveLease}, "drop": {wantLease, liveLease}, "delay": {wantLease, liveLease}}},
	// 429: retried after Retry-After
	{op: "resume", name: "start", fault: daytonatest.Fault{Route: rStart}, expect: map[string]outcome{
		"500": {wantError, liveLease}, "429": {wantLease, liveLease}, "hang": {wantError, liveLease}, "drop": {wantError, liveLease}, "delay": {wantLease, liveLease}}},
	// 429: commands are never re-sent
	{op: "resume", name: "sentinel", fault: daytonatest.Fault{Route: rExecute}, expect: map[string]outcome{
		"500": {wantError, liveLease}, "429": {wantError, liveLease}, "hang": {wantError, liveLease}, "drop": {wantError, liveLease}, "delay": {wantLease, liveLease}}},
	// Best effort (docs/behavior.md#warm-window): the resume completes whatever the setter does.
	{op: "resume-warm", name: "raise auto-stop", fault: daytonatest.Fault{Route: rAutostop}, expect: map[string]outcome{
		"500": {wantLease, liveLease}, "429": {wantLease, liveLease}, "hang": {wantLease, liveLease}, "drop": {wantLease, liveLease}, "delay": {wantLease, liveLease}}},
	// 429: retried after Retry-After
	{op: "resume-recover", name: "recover", fault: daytonatest.Fault{Route: rRecover}, expect: map[string]outcome{
		"500": {wantError, liveLease}, "429": {wantLease, liveLease}, "hang": {wantError, liveLease}, "drop": {wantError, liveLease}, "delay": {wantLease, liveLease}}},
	// Anything but a finished recovery is the typed recover_unfinished.
	{op: "stop-recover", name: "recover", fault: daytonatest.Fault{Route: rRecover}, expect: map[string]outcome{
		"500": {wantError, liveLease}, "429": {wantStopped, liveLease}, "hang": {wantError, liveLease}, "drop": {wantError, liveLease}, "delay": {wantStopped, liveLease}}},
	// 500: falls back to delete
	// 429: retried after Retry-After
	// hang: the host's deadline ends it: no receipt, nothing deleted
	{op: "release-archive", name: "archive", fault: daytonatest.Fault{Route: rArchive}, expect: map[string]outcome{
		"500": {wantDestroyed, liveNone}, "429": {wantStopped, liveLease}, "hang": {wantError, liveLease}, "drop": {wantDestroyed, liveNone}, "delay": {wantStopped, liveLease}}},
	// 429: Retry-After (10 s) does not fit the 5 s liveness bound
	// hang: bounded by livenessTimeoutMs
	{op: "release", name: "fresh read", fault: daytonatest.Fault{Method: "GET", Route: rSandbox}, expect: map[string]outcome{
		"500": {wantError, liveLease}, "429": {wantError, liveLease}, "hang": {wantError, liveLease}, "drop": {wantDestroyed, liveNone}, "delay": {wantDestroyed, liveNone}}},
	{op: "release", name: "delete", fault: daytonatest.Fault{Method: "DELETE", Route: rSandbox}, expect: map[string]outcome{
		"500": {wantError, liveLease}, "429": {wantDestroyed, liveNone}, "hang": {wantError, liveLease}, "drop": {wantDestroyed, liveNone}, "delay": {wantDestroyed, liveNone}}},
	// 500: deleted, but not confirmed: no receipt (the host's destroy retry confirms)
	{op: "release", name: "wait for destruction", fault: daytonatest.Fault{Method: "GET", Route: rSandbox, Skip: 1}, expect: map[string]outcome{
		"500": {wantError, liveNone}, "429": {wantDestroyed, liveNone}, "hang": {wantError, liveNone}, "drop": {wantDestroyed, liveNone}, "delay": {wantDestroyed, liveNone}}},
	// 500: falls back to delete-and-wait
	// hang: the host's deadline ends it first: no receipt, nothing deleted
	{op: "release-reusable", name: "stop", fault: daytonatest.Fault{Route: rStop}, expect: map[string]outcome{
		"500": {wantDestroyed, liveNone}, "429": {wantStopped, liveLease}, "hang": {wantError, liveLease}, "drop": {wantDestroyed, liveNone}, "delay": {wantStopped, liveLease}}},
	{op: "destroy", name: "delete", fault: daytonatest.Fault{Method: "DELETE", Route: rSandbox}, expect: map[string]outcome{
		"500": {wantError, liveLease}, "429": {wantDestroyed, liveNone}, "hang": {wantError, liveLease}, "drop": {wantDestroyed, liveNone}, "delay": {wantDestroyed, liveNone}}},
	{op: "destroy", name: "wait for destruction", fault: daytonatest.Fault{Method: "GET", Route: rSandbox}, expect: map[string]outcome{
		"500": {wantError, liveNone}, "429": {wantDestroyed, liveNone}, "hang": {wantError, liveNone}, "drop": {wantDestroyed, liveNone}, "delay": {wantDestroyed, liveNone}}},
	{op: "stop", name: "read", fault: daytonatest.Fault{Method: "GET", Route: rSandbox}, expect: map[string]outcome{
		"500": {wantError, liveLease}, "429": {wantStopped, liveLease}, "hang": {wantError, liveLease}, "drop": {wantStopped, liveLease}, "delay": {wantStopped, liveLease}}},
	// 429: Retry-After does not fit the liveness bound
	{op: "stop", name: "disable auto-delete", fault: daytonatest.Fault{Route: rAutodel}, expect: map[string]outcome{
		"500": {wantError, liveLease}, "429": {wantError, liveLease}, "hang": {wantError, liveLease}, "drop": {wantError, liveLease}, "delay": {wantStopped, liveLease}}},
	// 429: Retry-After does not fit the liveness bound
	{op: "stop", name: "confirm read", fault: daytonatest.Fault{Method: "GET", Route: rSandbox, Skip: 1}, expect: map[string]outcome{
		"500": {wantError, liveLease}, "429": {wantError, liveLease}, "hang": {wantError, liveLease}, "drop": {wantStopped, liveLease}, "delay": {wantStopped, liveLease}}},
	{op: "stop", name: "stop", fault: daytonatest.Fault{Route: rStop}, expect: map[string]outcome{
		"500": {wantError, liveLease}, "429": {wantStopped, liveLease}, "hang": {wantError, liveLease}, "drop": {wantError, liveLease}, "delay": {wantStopped, liveLease}}},
}

func TestFaultMatrix(t *testing.T) {
	for _, step := range faultSteps {
		for kind, exp := range step.expect {
			t.Run(step.op+"/"+step.name+"/"+kind, func(t *testing.T) {
				t.Parallel()
				runFaultCase(t, step, kind, exp)
			})
		}
	}
}

func runFaultCase(t *testing.T, step faultStep, kind string, exp outcome) {
	cfg := with(faultConfig, "reuseLease", strings.HasPrefix(step.op, "resume") || step.op == "release-reusable",
		"archiveOnRelease", step.op == "release-archive")
	e := newTestEnv(t, cfg)
	f := faultKinds[kind]
	f.Method, f.Route, f.Skip, f.Perform, f.Times = step.fault.Method, step.fault.Route, step.fault.Skip, step.fault.Perform, 1

	var l lease
	var id string
	if step.op != "acquire" {
		l = e.acquire(nil)
		id = *l.ProviderLeaseID
		switch step.op {
		case "resume", "resume-warm":
			require.NoError(t, e.srv.StopSandbox(id))
			e.await(id, "stopped")
		case "resume-recover", "stop-recover":
			require.NoError(t, e.srv.SetError(id, "no space left on device", true))
		}
	}
	if step.name == "inline delete after failed setup" {
		e.srv.Inject(daytonatest.Fault{Route: rExecute, Status: 500, Times: 1})
	}
	h := e.srv.Inject(f)
	e.srv.ResetRequests()

	var raw json.RawMessage
	var err error
	call := e.call
	workerEnds := workerEndsHang[step.op+"/"+step.name]
	if kind == "hang" && !workerEnds {
		hung := func() bool { return h.Hits() > 0 }
		if f.Perform {
			hung = e.allocated(1) // the create's allocating is done
		}
		call = func(method string, params any) (json.RawMessage, error) {
			return e.callExpiringWhen(method, params, hung)
		}
	}
	switch step.op {
	case "acquire":
		p := with(e.base(nil), "runId", "run-1", "agentId", "agent-1", "executionWorkspaceId", "ws-1")
		raw, err = call("environmentAcquireLease", p)
	case "resume", "resume-recover":
		raw, err = call("environmentResumeLease", e.resumeParams(l, nil))
	case "resume-warm":
		raw, err = call("environmentResumeLease", e.resumeParams(l, map[string]any{"warmRunnerIdleTimeoutMs": 900000}))
	case "release", "release-reusable", "release-archive":
		raw, err = call("environmentReleaseLease", e.leaseParams(l, nil))
	case "destroy":
		raw, err = call("environmentDestroyLease", e.leaseParams(l, nil))
	case "stop", "stop-recover":
		raw, err = call("environmentStopLease", e.leaseParams(l, nil))
	}
	require.Equal(t, 1, h.Hits(), "the fault applied")
	if kind == "hang" && workerEnds {
		var lt *bound.TimeoutError
		require.ErrorAs(t, err, &lt, "the worker's liveness bound ended the hang")
	}

	var ce *cleanup.Error
	switch exp.want {
	case wantLease:
		require.NoError(t, err)
		got := decode[lease](t, raw)
		require.NotNil(t, got.ProviderLeaseID)
		id = *got.ProviderLeaseID
	case wantError:
		require.Error(t, err)
		require.False(t, errors.As(err, &ce), "no envelope: %v", err)
		require.NotContains(t, err.Error(), e.srv.APIKey())
		if strings.HasPrefix(step.op, "resume") {
			require.Regexp(t, hostTransient, err.Error(), "the host retries a transient resume failure")
		}
		if step.op == "stop-recover" {
			stopErrorOf(t, err, id, StopRecoverUnfinished)
		}
	case wantEnvelope:
		ce = envelopeOf(t, err)
		id = ce.Envelope.ObservedProviderLeaseID
	case wantStopped, wantDestroyed:
		require.NoError(t, err)
		require.JSONEq(t, receiptJSON(id, exp.want), string(raw))
		if exp.want == wantStopped && step.op == "release-archive" {
			require.Contains(t, []string{"archiving", "archived"}, e.state(id), "archived on release")
		} else if exp.want == wantStopped {
			require.Equal(t, "stopped", e.state(id), "a receipt only after Daytona confirmed")
		} else {
			require.Equal(t, "gone", e.state(id), "a receipt only after completed destruction")
		}
	}
	switch exp.live {
	case liveNone:
		e.expectLive()
	case liveLease:
		e.expectLive(id)
	case liveObserved:
		require.NotEmpty(t, id, "the envelope names the allocation")
		e.expectLive(id)
		resolveEnvelope(t, e, ce)
	case liveNamed:
		require.Empty(t, id, "never observed")
		live := e.live()
		require.Len(t, live, 1)
		require.Equal(t, ce.Envelope.ProviderLeaseID, live[0].Name, "the allocation carries the envelope's name")
		resolveEnvelope(t, e, ce)
	}
	if strings.HasPrefix(step.op, "resume") || strings.HasPrefix(step.op, "stop") {
		require.Zero(t, e.srv.CountRequests("DELETE", rSandbox), "%s never deletes", step.op)
		require.Zero(t, e.srv.CountRequests("POST", rCreate), "%s never replaces", step.op)
	}
}

// resolveEnvelope proves an envelope is actionable: the host's destroy with
// the journaled record removes exactly that allocation.
// Title 15: setup fails, its inline deletion hangs, and the budget runs
// out. The deletion was issued exactly once; the envelope carries the
// observed sandbox, and the diagnostic names an acquisition phase (the
// host's schema has no cleanup phase) inside the budget.
func TestHungInlineDeletionKeepsTheFailedSetupsOwnership(t *testing.T) {
	e := newTestEnv(t, nil)
	e.srv.Inject(daytonatest.Fault{Route: rExecute, Status: 500, Times: 1}) // the setup fails
	hang := e.srv.Inject(daytonatest.Fault{Method: "DELETE", Route: rSandbox, Hang: true, Times: 1})
	ce := envelopeOf(t, e.acquireExpiringWhen(func() bool { return hang.Hits() > 0 }))
	require.Equal(t, "Daytona lease acquisition timed out; allocation cleanup is pending", ce.Message)
	live := e.live()
	require.Len(t, live, 1, "the hung deletion did not happen")
	require.Equal(t, live[0].ID, ce.Envelope.ObservedProviderLeaseID)
	require.Equal(t, 1, e.srv.CountRequests("DELETE", rSandbox), "deletion issued once, never retried after the budget")

	require.NotNil(t, ce.Diagnostic)
	require.Contains(t, []string{"create", "workspace", "shell", "expiry", "sentinel"}, ce.Diagnostic.Phase)
	require.Equal(t, "workspace", ce.Diagnostic.Phase, "the phase that failed")
	require.EqualValues(t, 20000, ce.Diagnostic.BudgetMs)
	require.GreaterOrEqual(t, ce.Diagnostic.ElapsedMs, int64(0))
	var wire struct {
		Diagnostic struct {
			Phase string `json:"phase"`
		} `json:"acquisitionDiagnostic"`
	}
	require.NoError(t, json.Unmarshal(mustJSON(t, ce.RPCData()), &wire))
	require.Equal(t, "workspace", wire.Diagnostic.Phase, "on the wire too")
	resolveEnvelope(t, e, ce)
}

func resolveEnvelope(t *testing.T, e *testEnv, ce *cleanup.Error) {
	t.Helper()
	e.srv.ClearFaults()
	p := with(e.base(nil), "providerLeaseId", ce.Envelope.ProviderLeaseID,
		"leaseMetadata", map[string]any{"failedCreateCleanup": ce.Envelope})
	raw, err := e.call("environmentDestroyLease", p)
	if ce.Envelope.ObservedProviderLeaseID == "" {
		// First sight: the host must journal the observed id before any
		// deletion; the retry with it deletes.
		obs := envelopeOf(t, err)
		require.Equal(t, "Persist observed sandbox identity before cleanup", obs.Message)
		require.Len(t, e.live(), 1, "observation deletes nothing")
		p["leaseMetadata"] = map[string]any{"failedCreateCleanup": obs.Envelope}
		raw, err = e.call("environmentDestroyLease", p)
	}
	require.NoError(t, err, "the observed id was journaled")
	require.JSONEq(t, receiptJSON(ce.Envelope.ProviderLeaseID, "destroyed"), string(raw))
	e.expectLive()
}
