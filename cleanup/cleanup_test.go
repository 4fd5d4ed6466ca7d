package cleanup

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/bound"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
	"github.com/stretchr/testify/require"
)

const fp = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func envelope(attempt string) Envelope {
	return Envelope{
		ProviderLeaseID: CreationNamePrefix + attempt, CompanyID: "company-1", EnvironmentID: "env-1", RunID: "run-1",
		AttemptID: attempt, AccountFingerprint: fp,
		Labels: map[string]string{LabelProvider: ProviderValue, LabelCompanyID: "company-1", LabelEnvironmentID: "env-1",
			LabelRunID: "run-1", LabelCreateAttempt: attempt, "paperclip-reuse-lease": "false"},
	}
}

func TestEnvelopeValidationMatchesTheHost(t *testing.T) {
	good := envelope("a1")
	require.NoError(t, good.Validate())
	bad := map[string]func(e *Envelope){
		"id with a slash":    func(e *Envelope) { e.CompanyID = "a/b" },
		"empty environment":  func(e *Envelope) { e.EnvironmentID = "" },
		"long run id":        func(e *Envelope) { e.RunID = strings.Repeat("r", 201) },
		"uppercase print":    func(e *Envelope) { e.AccountFingerprint = strings.ToUpper(fp) },
		"short print":        func(e *Envelope) { e.AccountFingerprint = "abc" },
		"foreign label key":  func(e *Envelope) { e.Labels["owner"] = "x" },
		"label value spaces": func(e *Envelope) { e.Labels[LabelRunID] = "a b" },
		"too many labels": func(e *Envelope) {
			for i := range 17 {
				e.Labels["paperclip-x"+strings.Repeat("y", i)] = "v"
			}
		},
		"observed with space": func(e *Envelope) { e.ObservedProviderLeaseID = "a b" },
	}
	for name, mutate := range bad {
		e := good.Clone()
		mutate(&e)
		require.Error(t, e.Validate(), name)
		_, err := ParseEnvelope(e)
		require.Error(t, err, name)
	}
	parsed, err := ParseEnvelope(map[string]any{"providerLeaseId": good.ProviderLeaseID, "companyId": "company-1",
		"environmentId": "env-1", "runId": "run-1", "attemptId": "a1", "accountFingerprint": fp, "labels": good.Labels, "extra": 1})
	require.NoError(t, err)
	require.Equal(t, good, parsed)
	_, err = ParseEnvelope(nil)
	require.Error(t, err)
}

func TestErrorWireShape(t *testing.T) {
	e := &Error{Message: "pending", Envelope: envelope("a1"), Diagnostic: &Diagnostic{Phase: "shell", ElapsedMs: 5, BudgetMs: 10},
		Causes: []error{errors.New("provider said secret-token-123")}}
	require.EqualValues(t, -32002, e.RPCCode(), "the host's worker-error code")
	b, err := json.Marshal(e.RPCData())
	require.NoError(t, err)
	require.NotContains(t, string(b), "secret-token-123", "provider text never reaches the envelope")
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	require.Equal(t, Schema, m["schema"])
	require.Equal(t, "shell", m["acquisitionDiagnostic"].(map[string]any)["phase"])
	require.Equal(t, "pending", e.Error())
}

func TestErrorDataLeavesOnlyWhatTheHostAccepts(t *testing.T) {
	// RPCData is where every envelope leaves the worker: a diagnostic the
	// host would reject is left out so the envelope still gets journaled; an
	// envelope it would reject sends no data.
	data := func(e *Error) map[string]any {
		b, err := json.Marshal(e.RPCData())
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		return m
	}
	for _, phase := range []string{"create", "workspace", "shell", "expiry", "sentinel"} {
		m := data(&Error{Envelope: envelope("a1"), Diagnostic: &Diagnostic{Phase: phase, ElapsedMs: 0, BudgetMs: 1}})
		require.Equal(t, phase, m["acquisitionDiagnostic"].(map[string]any)["phase"])
	}
	// The host's bounds themselves are kept: a week elapsed, a day's budget.
	m := data(&Error{Envelope: envelope("a1"), Diagnostic: &Diagnostic{Phase: "shell", ElapsedMs: 604800000, BudgetMs: 86400000}})
	require.Equal(t, map[string]any{"phase": "shell", "elapsedMs": float64(604800000), "budgetMs": float64(86400000)}, m["acquisitionDiagnostic"])
	for name, d := range map[string]Diagnostic{
		"cleanup phase":    {Phase: "cleanup", ElapsedMs: 5, BudgetMs: 10},
		"empty phase":      {ElapsedMs: 5, BudgetMs: 10},
		"negative elapsed": {Phase: "shell", ElapsedMs: -1, BudgetMs: 10},
		"elapsed > week":   {Phase: "shell", ElapsedMs: 604800001, BudgetMs: 10},
		"zero budget":      {Phase: "shell", ElapsedMs: 5},
		"budget > day":     {Phase: "shell", ElapsedMs: 5, BudgetMs: 86400001},
	} {
		m := data(&Error{Envelope: envelope("a1"), Diagnostic: &d})
		require.NotContains(t, m, "acquisitionDiagnostic", name)
		require.Equal(t, Schema, m["schema"], name)
		require.NotNil(t, m["cleanup"], name)
	}
	bad := envelope("a1")
	bad.CompanyID = "a/b"
	require.Nil(t, (&Error{Envelope: bad, Diagnostic: &Diagnostic{Phase: "shell", BudgetMs: 1}}).RPCData())
}

// create starts a sandbox under the envelope's name and labels.
func create(t *testing.T, env *testenv.Env, e Envelope) *daytona.Sandbox {
	return env.StartSandbox(t, &daytona.CreateSandboxRequest{Name: e.ProviderLeaseID, Labels: e.Labels}).Sandbox
}

func TestDestroyFailedCreationObservesThenDeletes(t *testing.T) {
	te := testenv.New(t)
	srv, c := te.Server, te.Client
	ctx := context.Background()
	env := envelope("11111111-1111-4111-8111-111111111111")
	sb := create(t, te, env)

	// Durable observation: first call records the id and deletes nothing.
	e := env.Clone()
	err := DestroyFailedCreation(ctx, c.Sandboxes, fp, &e, Options{RequireDurableObservation: true})
	var ce *Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, sb.ID, ce.Envelope.ObservedProviderLeaseID)
	info, _ := srv.Sandbox(sb.ID)
	require.Equal(t, "started", info.State)

	// With the observed id: deleted and waited for.
	e = ce.Envelope
	require.NoError(t, DestroyFailedCreation(ctx, c.Sandboxes, fp, &e, Options{RequireDurableObservation: true}))
	_, _, err = c.Sandboxes.Get(ctx, sb.ID)
	require.ErrorIs(t, err, daytona.ErrNotFound)
	// Gone observed id: conclusive.
	require.NoError(t, DestroyFailedCreation(ctx, c.Sandboxes, fp, &e, Options{}))
	// A never-observed name that is missing proves nothing.
	never := envelope("22222222-2222-4222-8222-222222222222")
	require.ErrorIs(t, DestroyFailedCreation(ctx, c.Sandboxes, fp, &never, Options{}), ErrNotObserved)
}

func TestDestroyFailedCreationNeverDeletesWhatItCannotProve(t *testing.T) {
	te := testenv.New(t)
	srv, c := te.Server, te.Client
	ctx := context.Background()
	env := envelope("33333333-3333-4333-8333-333333333333")
	forged := env.Clone()
	forged.Labels[LabelCompanyID] = "company-2" // a sandbox of another company under that name
	sb := create(t, te, forged)
	for name, e := range map[string]Envelope{
		"labels differ":  env.Clone(),
		"wrong name":     func() Envelope { x := env.Clone(); x.ProviderLeaseID = CreationNamePrefix + "other"; return x }(),
		"other observed": func() Envelope { x := forged.Clone(); x.ObservedProviderLeaseID = "someone-else"; return x }(),
	} {
		err := DestroyFailedCreation(ctx, c.Sandboxes, fp, &e, Options{})
		require.Error(t, err, name)
	}
	other := forged.Clone()
	require.ErrorIs(t, DestroyFailedCreation(ctx, c.Sandboxes, strings.Repeat("f", 64), &other, Options{}), ErrOwnership, "another account is fenced")
	info, _ := srv.Sandbox(sb.ID)
	require.Equal(t, "started", info.State, "nothing was deleted")
	require.Zero(t, srv.CountRequests("DELETE", "/sandbox/{sandboxIdOrName}"))
}

func TestDestroyFailedCreationBoundsAHungLookup(t *testing.T) {
	te := testenv.New(t)
	srv, c := te.Server, te.Client
	srv.Inject(daytonatest.Fault{Method: "GET", Route: "/sandbox/{sandboxIdOrName}", Hang: true})
	env := envelope("44444444-4444-4444-8444-444444444444")
	err := DestroyFailedCreation(context.Background(), c.Sandboxes, fp, &env, Options{LookupBound: 50 * time.Millisecond})
	var lt *bound.TimeoutError
	require.ErrorAs(t, err, &lt)
	require.Equal(t, "sandbox.failedCreateLookup", lt.Op)
	require.Contains(t, err.Error(), `did not respond within 50 ms`)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestDestroyingNameStillProvesOwnership(t *testing.T) {
	env := envelope("a1")
	sb := &daytona.Sandbox{ID: "x", Name: "DESTROYED_" + env.ProviderLeaseID + "_1700000000000", Labels: env.Labels}
	require.NoError(t, Verify(sb, &env))
	sb.Name = "DESTROYED_" + env.ProviderLeaseID + "x_1"
	require.ErrorIs(t, Verify(sb, &env), ErrOwnership)
}

func TestEnvelopeErrorsQuoteABoundedSliceOfAHugeLabel(t *testing.T) {
	e := envelope("a1")
	e.Labels = map[string]string{strings.Repeat("Q", 10<<20): "v"}
	err := e.Validate()
	require.Error(t, err)
	require.LessOrEqual(t, len(err.Error()), 1024)
}
