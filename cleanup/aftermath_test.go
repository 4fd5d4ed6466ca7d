package cleanup

// What cleanup leaves behind: which sandboxes are gone, which stay, and
// when a deletion counts as done. Written for bugs of the fresh sample of
// hand-planted bugs in docs/testing.md that no test caught.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// DeleteAndWait by name returns only once the sandbox is gone: Daytona
// renames a sandbox it starts destroying, so the old name answers 404 at
// once; the wait must follow the id from the delete answer. (Planted: the
// wait on the name instead of the id.)
func TestDeleteAndWaitByNameWaitsForTheRealDeletion(t *testing.T) {
	env := testenv.New(t, testenv.WithServer(daytonatest.WithTransitionDelay(300*time.Millisecond)))
	sb := ownedSandbox(t, env, "company-1", "env-1", "run-1")
	require.NotEqual(t, sb.ID, sb.Name)
	require.NoError(t, DeleteAndWait(context.Background(), env.Client.Sandboxes, sb.Name))
	require.False(t, alive(t, env, sb.ID), "returned before Daytona completed the deletion")
	require.Equal(t, 1, env.Server.CountRequests("DELETE", "/sandbox/{sandboxIdOrName}"))
}

// A delete sent earlier whose answer was lost leaves the sandbox being
// destroyed under its DESTROYED_ name, so the old name answers 404 at
// once: DeleteAndWait by that name (its delete answered 404) waits on the
// renamed sandbox's id and returns only once it is gone. The destruction
// is held, so "returned too early" is a fact, not a race. (Found by make
// dropcond -cover: no cleanup test ran the renamed sandbox's wait.)
func TestDeleteAndWaitByNameWaitsForARenamedSandbox(t *testing.T) {
	env := testenv.New(t)
	sb := ownedSandbox(t, env, "company-1", "env-1", "run-1")
	ctx := context.Background()
	release := env.Server.HoldTransitions(sb.ID)
	_, _, err := env.Client.Sandboxes.Delete(ctx, sb.Name) // its answer "lost"
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- DeleteAndWait(ctx, env.Client.Sandboxes, sb.Name) }()
	requireWaitsOn(t, env, sb.ID, done, release)
	require.False(t, alive(t, env, sb.ID))
}

// requireWaitsOn checks that a call (its result on done) reads the held
// sandbox id while it is being destroyed and has not returned then; it
// then releases the destruction and requires the call to succeed.
func requireWaitsOn(t *testing.T, env *testenv.Env, id string, done <-chan error, release func()) {
	t.Helper()
	read := make(chan error, 1)
	go func() {
		read <- env.Server.Await(t.Context(), func() bool {
			for _, r := range env.Server.Requests() {
				if r.Method == "GET" && r.Path == "/sandbox/"+id {
					return true
				}
			}
			return false
		})
	}()
	select {
	case err := <-done:
		release()
		t.Fatalf("returned (%v) while the sandbox was still being destroyed", err)
	case err := <-read:
		require.NoError(t, err)
	}
	require.True(t, alive(t, env, id), "held: the destruction is still under way")
	release()
	require.NoError(t, <-done)
}

// An envelope with no labels cannot be journaled by the host.
func TestEnvelopeWithoutLabelsIsInvalid(t *testing.T) {
	e := envelope("a1")
	e.Labels = map[string]string{}
	require.Error(t, e.Validate())
	e.Labels = nil
	require.Error(t, e.Validate())
}

// otherOnGet answers a Get of one id with another sandbox's record, as a
// lookup that resolved to the wrong sandbox would.
type otherOnGet struct {
	SandboxAPI
	id    string
	other *daytona.Sandbox
}

func (o otherOnGet) Get(ctx context.Context, id string) (*daytona.Sandbox, *daytona.Response, error) {
	if id == o.id {
		return o.other, nil, nil
	}
	return o.SandboxAPI.Get(ctx, id)
}

// The re-read before a sweep's delete must return the very sandbox that
// was listed: a record of another sandbox, even one the filter matches,
// is refused and neither sandbox is deleted. (Planted: the id comparison
// dropped.)
func TestDeleteOrphansRefusesARereadOfAnotherSandbox(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	a := ownedSandbox(t, env, "company-1", "env-1", "run-1")
	b := ownedSandbox(t, env, "company-1", "env-1", "run-1")
	api := otherOnGet{SandboxAPI: env.Client.Sandboxes, id: a.ID, other: b}
	f := SweepFilter{RunID: "run-1"}
	res := DeleteOrphans(ctx, api, []daytona.Sandbox{*a}, f, 1, nil)
	require.Len(t, res, 1)
	require.ErrorIs(t, res[0].Err, ErrOwnership)
	require.True(t, alive(t, env, a.ID))
	require.True(t, alive(t, env, b.ID))
	require.Zero(t, env.Server.CountRequests("DELETE", "/sandbox/{sandboxIdOrName}"))
}

// The envelope pre-check refuses, before any provider call, an envelope
// whose providerLeaseId is not the creation name of its attempt, or whose
// account is another one: nothing is looked up, nothing deleted. (Planted:
// the name check dropped from the pre-check.)
func TestEnvelopePreCheckMakesNoProviderCall(t *testing.T) {
	te := testenv.New(t)
	ctx := context.Background()
	env := envelope("77777777-7777-4777-8777-777777777777")
	sb := create(t, te, env)
	for name, e := range map[string]Envelope{
		"another attempt's name": func() Envelope { x := env.Clone(); x.ProviderLeaseID = CreationName("other"); return x }(),
		"another account":        env.Clone(),
		"no attempt":             func() Envelope { x := env.Clone(); x.AttemptID = ""; return x }(),
		"no attempt, the bare prefix as its name": func() Envelope {
			x := env.Clone()
			x.AttemptID, x.ProviderLeaseID, x.Labels[LabelCreateAttempt] = "", CreationNamePrefix, ""
			return x
		}(),
	} {
		account := fp
		if name == "another account" {
			account = strings.Repeat("e", 64)
		}
		before := len(te.Server.Requests())
		require.ErrorIs(t, DestroyFailedCreation(ctx, te.Client.Sandboxes, account, &e, Options{}), ErrOwnership, name)
		require.Len(t, te.Server.Requests(), before, "%s: no provider call", name)
	}
	require.True(t, alive(t, te, sb.ID))
	before := len(te.Server.Requests())
	require.ErrorIs(t, DestroyFailedCreation(ctx, te.Client.Sandboxes, fp, nil, Options{}), ErrOwnership, "no envelope")
	require.Len(t, te.Server.Requests(), before)

	// Verify refuses a sandbox record without an id, or none.
	require.ErrorIs(t, Verify(nil, &env), ErrOwnership)
	require.ErrorIs(t, Verify(&daytona.Sandbox{Name: env.ProviderLeaseID, Labels: env.Labels}, &env), ErrOwnership)
}

// An envelope without a diagnostic sends no acquisitionDiagnostic member
// at all (not a null one).
func TestErrorWithoutDiagnosticSendsNone(t *testing.T) {
	b, err := json.Marshal((&Error{Message: "pending", Envelope: envelope("a1")}).RPCData())
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	require.NotContains(t, m, "acquisitionDiagnostic")
	require.Contains(t, m, "cleanup")
}

// Owned takes a sandbox only with the whole label set, each value
// well-formed, under its attempt's creation name: each part missing or
// wrong alone makes it foreign, so a sweep never touches it.
func TestOwnedNeedsEveryPart(t *testing.T) {
	labels, err := OwnershipLabels("company-1", "env-1", "run-1", "attempt-1", true)
	require.NoError(t, err)
	owned := func(change func(sb *daytona.Sandbox)) bool {
		sb := &daytona.Sandbox{ID: "sb-1", Name: CreationName("attempt-1"), Labels: map[string]string{}}
		for k, v := range labels {
			sb.Labels[k] = v
		}
		if change != nil {
			change(sb)
		}
		return Owned(sb)
	}
	require.True(t, owned(nil))
	require.False(t, Owned(nil))
	for name, change := range map[string]func(sb *daytona.Sandbox){
		"no id":               func(sb *daytona.Sandbox) { sb.ID = "" },
		"no provider label":   func(sb *daytona.Sandbox) { delete(sb.Labels, LabelProvider) },
		"another provider":    func(sb *daytona.Sandbox) { sb.Labels[LabelProvider] = "e2b" },
		"no company":          func(sb *daytona.Sandbox) { delete(sb.Labels, LabelCompanyID) },
		"no environment":      func(sb *daytona.Sandbox) { delete(sb.Labels, LabelEnvironmentID) },
		"no attempt":          func(sb *daytona.Sandbox) { delete(sb.Labels, LabelCreateAttempt) },
		"no reuse flag":       func(sb *daytona.Sandbox) { delete(sb.Labels, LabelReuseLease) },
		"a reuse flag of yes": func(sb *daytona.Sandbox) { sb.Labels[LabelReuseLease] = "yes" },
		"a bad run id":        func(sb *daytona.Sandbox) { sb.Labels[LabelRunID] = "a/b" },
		"another name":        func(sb *daytona.Sandbox) { sb.Name = CreationName("attempt-2") },
	} {
		require.False(t, owned(change), name)
	}
	require.True(t, owned(func(sb *daytona.Sandbox) { delete(sb.Labels, LabelRunID) }), "the run id is optional")
}

// With an observed id, the failed-create cleanup looks the sandbox up by
// that id, never by its creation name: a sandbox Daytona is already
// destroying answers 404 by its old name (it was renamed DESTROYED_…),
// yet it still exists, and the cleanup reports success only once it is
// gone. (Sample-6 bug 15: the lookup by name after an observation.)
func TestDestroyFailedCreationLooksUpTheObservedID(t *testing.T) {
	te := testenv.New(t)
	ctx := context.Background()
	env := envelope("33333333-3333-4333-8333-333333333333")
	sb := create(t, te, env)
	env.ObservedProviderLeaseID = sb.ID
	release := te.Server.HoldTransitions(sb.ID)
	_, _, err := te.Client.Sandboxes.Delete(ctx, sb.Name) // an earlier delete whose answer was lost
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- DestroyFailedCreation(ctx, te.Client.Sandboxes, fp, &env, Options{}) }()
	requireWaitsOn(t, te, sb.ID, done, release)
	require.False(t, alive(t, te, sb.ID), "reported gone while the observed sandbox still existed")
}
