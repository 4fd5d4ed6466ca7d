package cleanup

import (
	"context"
	"errors"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/bound"
)

// SandboxAPI is the part of the Daytona client cleanup needs;
// *daytona.SandboxesService satisfies it.
type SandboxAPI interface {
	Get(ctx context.Context, idOrName string) (*daytona.Sandbox, *daytona.Response, error)
	Delete(ctx context.Context, idOrName string) (*daytona.Sandbox, *daytona.Response, error)
	WaitUntilGone(ctx context.Context, sandboxID string) error
	ListAll(ctx context.Context, opts *daytona.ListOptions) ([]daytona.Sandbox, error)
	WaitForState(ctx context.Context, idOrName string, targets ...daytona.SandboxState) (*daytona.Sandbox, error)
}

var _ SandboxAPI = (*daytona.SandboxesService)(nil)

// Bounds of the failed-creation cleanup calls (docs/behavior.md#destroy-failed-creation).
const (
	LookupBound = 10 * time.Second
	DeleteBound = 15 * time.Second
)

// Errors of failed-creation cleanup, with the reference's messages.
var (
	//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
	ErrOwnership = errors.New("Failed-create sandbox ownership does not match")
	//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
	ErrScope = errors.New("Failed-create sandbox cleanup scope does not match")
	// ErrNotObserved: a name that was never observed is missing; the create
	// may still materialise, so absence proves nothing.
	ErrNotObserved = errors.New("failed-create sandbox is not visible yet; its absence is not proof of removal")
)

// Options tune DestroyFailedCreation; zero values use the reference bounds.
type Options struct {
	LookupBound, DeleteBound time.Duration
	// RequireDurableObservation: on first sight of the sandbox, return an
	// *Error carrying the observed id instead of deleting, so the host
	// persists it first (destroy path, docs/behavior.md#destroy).
	RequireDurableObservation bool
}

// DestroyFailedCreation finds the allocation an envelope describes, proves it
// is ours and deletes it, waiting for completed destruction
// (docs/behavior.md#destroy-failed-creation). fingerprint is the account fingerprint of the
// current config: a changed key fences the retry. On success the allocation
// is confirmed gone. env.ObservedProviderLeaseID is set when the sandbox is
// first seen.
func DestroyFailedCreation(ctx context.Context, api SandboxAPI, fingerprint string, env *Envelope, o Options) error {
	if o.LookupBound <= 0 {
		o.LookupBound = LookupBound
	}
	if o.DeleteBound <= 0 {
		o.DeleteBound = DeleteBound
	}
	if err := checkEnvelope(fingerprint, env); err != nil {
		return err
	}
	key := env.ProviderLeaseID
	if env.ObservedProviderLeaseID != "" {
		key = env.ObservedProviderLeaseID
	}
	var sb *daytona.Sandbox
	err := bound.Call(ctx, "sandbox.failedCreateLookup", o.LookupBound, func(ctx context.Context) error {
		var err error
		sb, _, err = api.Get(ctx, key)
		return err
	})
	switch {
	case errors.Is(err, daytona.ErrNotFound) && env.ObservedProviderLeaseID != "":
		return nil // the exact id we observed is gone: conclusive
	case errors.Is(err, daytona.ErrNotFound):
		return ErrNotObserved
	case err != nil:
		return err
	}
	if err := Verify(sb, env); err != nil {
		return err
	}
	if env.ObservedProviderLeaseID == "" {
		env.ObservedProviderLeaseID = sb.ID
		if o.RequireDurableObservation {
			return &Error{Message: "Persist observed sandbox identity before cleanup", Envelope: env.Clone()}
		}
	}
	return bound.Call(ctx, "sandbox.failedCreateDelete", o.DeleteBound, func(ctx context.Context) error {
		return DeleteAndWait(ctx, api, sb.ID)
	})
}

// checkEnvelope is the no-provider-call pre-check of docs/behavior.md#destroy-failed-creation step 1.
func checkEnvelope(fingerprint string, env *Envelope) error {
	if env == nil || env.AttemptID == "" || env.ProviderLeaseID != CreationNamePrefix+env.AttemptID ||
		env.AccountFingerprint != fingerprint {
		return ErrOwnership
	}
	want := map[string]string{
		LabelProvider: ProviderValue, LabelCreateAttempt: env.AttemptID,
		LabelCompanyID: env.CompanyID, LabelEnvironmentID: env.EnvironmentID,
	}
	if env.RunID != "" {
		want[LabelRunID] = env.RunID
	}
	for k, v := range want {
		if env.Labels[k] != v {
			return ErrOwnership
		}
	}
	return nil
}

// Verify proves sb is the allocation env describes: the observed id (when
// known), the exact creation name, and every envelope label with its exact
// value. SDK- or server-added labels on the sandbox are fine.
func Verify(sb *daytona.Sandbox, env *Envelope) error {
	if sb == nil || sb.ID == "" {
		return ErrOwnership
	}
	if env.ObservedProviderLeaseID != "" && sb.ID != env.ObservedProviderLeaseID {
		return ErrOwnership
	}
	if sb.Name != env.ProviderLeaseID && !destroyingName(sb.Name, env.ProviderLeaseID) {
		return ErrOwnership
	}
	for k, v := range env.Labels {
		if got, ok := sb.Labels[k]; !ok || got != v {
			return ErrOwnership
		}
	}
	return nil
}

const destroyingPrefix = "DESTROYED_"

// destroyingName: Daytona renames a sandbox it is destroying to
// DESTROYED_<name>_<ms> (docs/daytona.md#delete).
func destroyingName(got, want string) bool {
	const p = destroyingPrefix
	return len(got) > len(p)+len(want)+1 && got[:len(p)] == p && got[len(p):len(p)+len(want)] == want &&
		got[len(p)+len(want)] == '_'
}

// DeleteAndWait deletes a sandbox by id or name and waits until Daytona
// has completed its destruction: an accepted delete is not a receipt. A
// sandbox that is already gone counts as deleted.
//
// The wait is on the id from the delete answer, never on a name: Daytona
// renames a sandbox as it starts destroying it, so the old name answers
// 404 at once while the sandbox is still running.
func DeleteAndWait(ctx context.Context, api SandboxAPI, idOrName string) error {
	sb, _, err := api.Delete(ctx, idOrName)
	switch {
	case errors.Is(err, daytona.ErrNotFound):
		// Gone, never there, or renamed by a delete sent earlier whose
		// answer was lost: that sandbox is still being destroyed under its
		// new name, and only its id can say when it is done.
		if err := waitRenamed(ctx, api, idOrName); err != nil {
			return err
		}
	case err != nil:
		return err
	case sb != nil && sb.ID != "":
		return api.WaitUntilGone(ctx, sb.ID)
	}
	return api.WaitUntilGone(ctx, idOrName)
}

// waitRenamed waits until every sandbox Daytona renamed from name while
// destroying it is gone.
func waitRenamed(ctx context.Context, api SandboxAPI, name string) error {
	found, err := api.ListAll(ctx, &daytona.ListOptions{Name: destroyingPrefix + name + "_", IncludeDestroying: true})
	if err != nil {
		return err
	}
	for _, sb := range found {
		if destroyingName(sb.Name, name) && sb.ID != "" {
			if err := api.WaitUntilGone(ctx, sb.ID); err != nil {
				return err
			}
		}
	}
	return nil
}
