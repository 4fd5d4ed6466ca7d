package cleanup

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// A sandbox under the exact creation name that lacks any one ownership
// label (not a wrong value: no label at all) is not ours: Verify refuses
// it, DestroyFailedCreation deletes nothing, and an envelope that lacks
// the label is refused before any provider call. (Planted: a missing
// ownership label accepted.)
func TestMissingOwnershipLabelIsNeverAccepted(t *testing.T) {
	te := testenv.New(t)
	ctx := context.Background()
	for i, key := range []string{LabelProvider, LabelCompanyID, LabelEnvironmentID, LabelRunID, LabelCreateAttempt, LabelReuseLease} {
		t.Run(key, func(t *testing.T) {
			env := envelope(fmt.Sprintf("%08d-5555-4555-8555-555555555555", i))
			labels := CopyLabels(env.Labels)
			delete(labels, key)
			sb := create(t, te, Envelope{ProviderLeaseID: env.ProviderLeaseID, Labels: labels})

			got, _, err := te.Client.Sandboxes.Get(ctx, sb.ID)
			require.NoError(t, err)
			require.ErrorIs(t, Verify(got, &env), ErrOwnership)
			e := env.Clone()
			require.ErrorIs(t, DestroyFailedCreation(ctx, te.Client.Sandboxes, fp, &e, Options{}), ErrOwnership)
			require.Empty(t, e.ObservedProviderLeaseID, "a sandbox that is not ours is not observed")
			require.True(t, alive(t, te, sb.ID), "not deleted")
			require.Zero(t, te.Server.CountRequests("DELETE", "/sandbox/{sandboxIdOrName}"))

			// The envelope itself without the label: no provider call.
			short := env.Clone()
			delete(short.Labels, key)
			before := len(te.Server.Requests())
			err = DestroyFailedCreation(ctx, te.Client.Sandboxes, fp, &short, Options{})
			if key == LabelReuseLease {
				// Not one the pre-check demands: an envelope without it
				// matches the sandbox without it, which is then deleted.
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrOwnership)
			require.Len(t, te.Server.Requests(), before, "refused before any provider call")
		})
	}
}

// The sweep's age filter keeps sandboxes created at least OlderThan ago:
// exactly OlderThan old matches, a nanosecond younger does not, and an
// unknown creation time never does. (Planted: < for <= on the age.)
func TestSweepAgeAtTheLimit(t *testing.T) {
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	labels, err := OwnershipLabels("company-1", "env-1", "", "66666666-6666-4666-8666-666666666666", false)
	require.NoError(t, err)
	sb := &daytona.Sandbox{ID: "sb-1", Name: CreationName(labels[LabelCreateAttempt]), Labels: labels,
		CreatedAt: created.Format(time.RFC3339Nano), State: daytona.StateStarted}
	at := func(d time.Duration) func() time.Time { return func() time.Time { return created.Add(d) } }
	for _, c := range []struct {
		name string
		now  time.Duration
		want bool
	}{
		{"exactly OlderThan", time.Hour, true},
		{"one nanosecond younger", time.Hour - 1, false},
		{"older", time.Hour + 1, true},
	} {
		require.Equal(t, c.want, SweepFilter{OlderThan: time.Hour, Now: at(c.now)}.Matches(sb), c.name)
	}
	unknown := *sb
	unknown.CreatedAt = ""
	require.False(t, SweepFilter{OlderThan: time.Nanosecond, Now: at(time.Hour)}.Matches(&unknown), "unknown age is never old enough")
	require.True(t, SweepFilter{All: true}.Matches(&unknown), "no age filter: any age")
	age, ok := Age(sb, created.Add(-time.Minute))
	require.True(t, ok)
	require.Zero(t, age, "a creation time in the future is age 0, never negative")
}

// Label and id bounds, at the bound and one past (docs/behavior.md#envelope):
// 16 labels are valid, 17 are not. (Pins a default: MaxEnvelopeLabels, 16.)
func TestLabelLimitsAtTheLimit(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
		id   string
	}{
		{"id of 200", true, strings.Repeat("a", MaxEnvelopeIDLength)},
		{"id of 201", false, strings.Repeat("a", MaxEnvelopeIDLength+1)},
		{"id of 1", true, "a"},
		{"id of 0", false, ""},
	} {
		require.Equal(t, c.ok, IsEnvelopeID(c.id), c.name)
		require.Equal(t, c.ok, ValidateLabels(map[string]string{"paperclip-x": c.id}) == nil, c.name)
	}
	set := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m["paperclip-"+strings.Repeat("x", i+1)] = "v"
		}
		return m
	}
	// 16 labels, the host's limit, and 17, as literal counts.
	require.NoError(t, ValidateLabels(set(16)))
	err := ValidateLabels(set(17))
	require.Error(t, err)
	require.Contains(t, err.Error(), "17 labels exceed the limit of 16")
	e := envelope("a1")
	e.Labels = set(16)
	require.NoError(t, e.Validate())
	e.Labels = set(17)
	require.Error(t, e.Validate())

	// The attempt id must leave the creation name within 200 characters.
	_, err = OwnershipLabels("c", "e", "", strings.Repeat("a", MaxAttemptIDLength), false)
	require.NoError(t, err)
	_, err = OwnershipLabels("c", "e", "", strings.Repeat("a", MaxAttemptIDLength+1), false)
	require.Error(t, err)
	require.Len(t, CreationName(strings.Repeat("a", MaxAttemptIDLength)), MaxEnvelopeIDLength)

	// A destroying name is DESTROYED_<name>_<something>: the separator and
	// at least one character after it.
	require.True(t, destroyingName("DESTROYED_n_1", "n"))
	require.False(t, destroyingName("DESTROYED_n_", "n"))
	require.False(t, destroyingName("DESTROYED_nx1", "n"))
	// The prefix, the name and the separator each must match.
	require.False(t, destroyingName("DESTROYEX_n_1", "n"))
	require.False(t, destroyingName("XESTROYED_n_1", "n"))
	require.False(t, destroyingName("DESTROYED_m_1", "n"))
	require.False(t, destroyingName("DESTROYED_nn_1", "n"))
	require.True(t, destroyingName("DESTROYED_nn_1", "nn"))
}

// The sweep retries a delete refused with 409 exactly
// maxSweepDeleteRetries times, then reports the refusal and keeps the
// sandbox.
func TestSweepDeleteRefusedEveryTimeIsTriedThreeTimes(t *testing.T) {
	require.Equal(t, 2, maxSweepDeleteRetries)
	env := testenv.New(t)
	ctx := context.Background()
	sb := ownedSandbox(t, env, "company-1", "env-1", "run-1")
	env.Server.Inject(daytonatest.Fault{Method: "DELETE", Route: "/sandbox/{sandboxIdOrName}", Status: 409,
		Body: `{"statusCode":409,"message":"state change in progress"}`})
	f := SweepFilter{RunID: "run-1"}
	res := DeleteOrphans(ctx, env.Client.Sandboxes, []daytona.Sandbox{*sb}, f, 0, nil)
	require.Len(t, res, 1)
	require.ErrorIs(t, res[0].Err, daytona.ErrConflict)
	require.Equal(t, 1+maxSweepDeleteRetries, env.Server.CountRequests("DELETE", "/sandbox/{sandboxIdOrName}"))
	require.True(t, alive(t, env, sb.ID))
}

// sweepRefusedOnce sweeps one owned sandbox whose first delete Daytona
// refuses (409, a state change) and whose read while the sweep waits for
// it to settle is answered waitStatus; it returns the one result.
func sweepRefusedOnce(t *testing.T, waitStatus int) (*testenv.Env, *daytona.Sandbox, []SweepResult) {
	t.Helper()
	env := testenv.New(t)
	sb := ownedSandbox(t, env, "company-1", "env-1", "run-1")
	env.Server.Inject(daytonatest.Fault{Method: "DELETE", Route: "/sandbox/{sandboxIdOrName}", Status: 409, Times: 1,
		Body: `{"statusCode":409,"message":"state change in progress"}`})
	// The first read is the sweep's own re-read; the second, the wait's.
	env.Server.Inject(daytonatest.Fault{Method: "GET", Route: "/sandbox/{sandboxIdOrName}", Status: waitStatus, Skip: 1, Times: 1})
	res := DeleteOrphans(context.Background(), env.Client.Sandboxes, []daytona.Sandbox{*sb}, SweepFilter{RunID: "run-1"}, 0, nil)
	require.Len(t, res, 1)
	return env, sb, res
}

// A sandbox that answers 404 while the sweep waits out a refused delete
// is no failure: the delete is tried again and its answer decides (the
// sweep's twin of provider's TestDestroyWaitingOutATransitionTakesANotFoundAsGone).
func TestSweepDeleteWaitTakesANotFoundAsGone(t *testing.T) {
	env, sb, res := sweepRefusedOnce(t, 404)
	require.NoError(t, res[0].Err)
	require.Equal(t, 2, env.Server.CountRequests("DELETE", "/sandbox/{sandboxIdOrName}"))
	require.False(t, alive(t, env, sb.ID))
}

// The re-read before a sweep's delete decides: a sandbox that has gone
// meanwhile is done (no DELETE sent), one the re-read cannot see is that
// error (no DELETE sent), and one that left the filter's states is
// refused as changed and left alone.
func TestDeleteOrphansReReadDecides(t *testing.T) {
	for name, tc := range map[string]struct {
		fault   daytonatest.Fault
		stop    bool
		wantErr error
		alive   bool
	}{
		// Only the re-read says 404: the sandbox stays, untouched.
		"gone":       {fault: daytonatest.Fault{Method: "GET", Route: "/sandbox/{sandboxIdOrName}", Status: 404, Times: 1}, alive: true},
		"unreadable": {fault: daytonatest.Fault{Method: "GET", Route: "/sandbox/{sandboxIdOrName}", Status: 500, Times: 1}, wantErr: daytona.ErrServer, alive: true},
		"state left": {stop: true, wantErr: ErrOwnership, alive: true},
	} {
		t.Run(name, func(t *testing.T) {
			env := testenv.New(t)
			ctx := context.Background()
			sb := ownedSandbox(t, env, "company-1", "env-1", "run-1")
			f := SweepFilter{RunID: "run-1", States: []daytona.SandboxState{daytona.StateStarted}}
			found, err := FindOrphans(ctx, env.Client.Sandboxes, f)
			require.NoError(t, err)
			require.Len(t, found, 1)
			if tc.stop {
				_, _, err = env.Client.Sandboxes.Stop(ctx, sb.ID, false)
				require.NoError(t, err)
				_, err = env.Client.Sandboxes.WaitUntilStopped(ctx, sb.ID)
				require.NoError(t, err)
			}
			if tc.fault.Method != "" {
				env.Server.Inject(tc.fault)
			}
			res := DeleteOrphans(ctx, env.Client.Sandboxes, found, f, 1, nil)
			require.Len(t, res, 1)
			if tc.wantErr == nil {
				require.NoError(t, res[0].Err)
			} else {
				require.ErrorIs(t, res[0].Err, tc.wantErr)
			}
			require.Zero(t, env.Server.CountRequests("DELETE", "/sandbox/{sandboxIdOrName}"), "no delete sent")
			require.Equal(t, tc.alive, alive(t, env, sb.ID))
		})
	}
}

// A refused delete whose wait for the sandbox to settle fails (other than
// by the sandbox being gone) ends the sweep's work on it with both errors:
// one DELETE, no retry against a sandbox it cannot read.
func TestSweepDeleteStopsWhenTheSettleWaitFails(t *testing.T) {
	env, sb, res := sweepRefusedOnce(t, 500)
	require.ErrorIs(t, res[0].Err, daytona.ErrConflict)
	require.ErrorIs(t, res[0].Err, daytona.ErrServer)
	require.Equal(t, 1, env.Server.CountRequests("DELETE", "/sandbox/{sandboxIdOrName}"))
	require.True(t, alive(t, env, sb.ID))
}

// A listing that fails is the sweep's error, not an empty result.
func TestFindOrphansFailsWithItsListing(t *testing.T) {
	env := testenv.New(t)
	ownedSandbox(t, env, "company-1", "env-1", "run-1")
	env.Server.Inject(daytonatest.Fault{Method: "GET", Route: "/sandbox", Status: 500})
	found, err := FindOrphans(context.Background(), env.Client.Sandboxes, SweepFilter{RunID: "run-1"})
	require.ErrorIs(t, err, daytona.ErrServer)
	require.Empty(t, found)
}

// A delete by name that answers 404 is confirmed only by the listing of
// sandboxes Daytona renamed while destroying: when that listing, or the
// wait on a renamed sandbox, fails, DeleteAndWait fails too instead of
// calling the sandbox gone.
func TestDeleteAndWaitByNameFailsWithItsRenameLookup(t *testing.T) {
	for name, fault := range map[string]func(id string) daytonatest.Fault{
		"listing": func(string) daytonatest.Fault {
			return daytonatest.Fault{Method: "GET", Route: "/sandbox", Status: 500}
		},
		// Reads of the renamed sandbox by its id only: the name is gone.
		"wait": func(id string) daytonatest.Fault {
			return daytonatest.Fault{Method: "GET", Route: "/sandbox/{sandboxIdOrName}", Sandbox: id, Status: 500}
		},
	} {
		t.Run(name, func(t *testing.T) {
			env := testenv.New(t)
			ctx := context.Background()
			sb := ownedSandbox(t, env, "company-1", "env-1", "run-1")
			release := env.Server.HoldTransitions(sb.ID)
			defer release()
			// A delete sent earlier whose answer was lost: the sandbox is
			// being destroyed under its new name.
			_, _, err := env.Client.Sandboxes.Delete(ctx, sb.ID)
			require.NoError(t, err)
			env.Server.Inject(fault(sb.ID))
			err = DeleteAndWait(ctx, env.Client.Sandboxes, sb.Name)
			require.ErrorIs(t, err, daytona.ErrServer)
		})
	}
}

// Verify refuses a sandbox without an id whatever its name and labels.
func TestVerifyRefusesASandboxWithoutAnID(t *testing.T) {
	e := envelope("attempt-1")
	require.ErrorIs(t, Verify(nil, &e), ErrOwnership)
	require.ErrorIs(t, Verify(&daytona.Sandbox{Name: e.ProviderLeaseID, Labels: e.Labels}, &e), ErrOwnership)
}
