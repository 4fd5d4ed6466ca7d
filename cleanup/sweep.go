package cleanup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
)

// ErrNoScope: a sweep without any filter would select every sandbox this
// plugin ever created in the account; the caller must ask for that
// explicitly (SweepFilter.All).
var ErrNoScope = errors.New("cleanup: a sweep needs a filter (company, environment, run, age or state) or an explicit all")

// SweepFilter selects the sandboxes an orphan sweep acts on. Every field
// narrows the selection; the ownership label set is always required on top.
type SweepFilter struct {
	CompanyID     string
	EnvironmentID string
	RunID         string
	// OlderThan keeps sandboxes created at least this long ago (0 = any
	// age). A sandbox whose creation time is unknown is never old enough.
	OlderThan time.Duration
	// States keeps sandboxes in one of these states (nil = any).
	States []daytona.SandboxState
	// All allows a sweep with no other filter.
	All bool
	// Now is the clock ages are measured with; nil means time.Now.
	Now func() time.Time
}

// Check returns ErrNoScope for a filter that would select every sandbox of
// the plugin without All; callers check a command line with it before any
// provider call.
func (f SweepFilter) Check() error {
	if f.All || f.CompanyID != "" || f.EnvironmentID != "" || f.RunID != "" || f.OlderThan > 0 || len(f.States) > 0 {
		return nil
	}
	return ErrNoScope
}

func (f SweepFilter) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// labels is the label filter sent with the listing: the provider label
// and every id filter.
func (f SweepFilter) labels() map[string]string {
	l := map[string]string{LabelProvider: ProviderValue}
	for k, v := range map[string]string{LabelCompanyID: f.CompanyID, LabelEnvironmentID: f.EnvironmentID, LabelRunID: f.RunID} {
		if v != "" {
			l[k] = v
		}
	}
	return l
}

// Owned reports whether sb carries this plugin's full ownership label set
// (provider, company, environment, reuse flag and create attempt, each
// well-formed) under the creation name that attempt gives it. A sandbox
// without all of that was not made by this plugin (or not by a version of
// it whose sandboxes can be told apart), and is never touched by a sweep.
func Owned(sb *daytona.Sandbox) bool {
	if sb == nil || sb.ID == "" || sb.Labels[LabelProvider] != ProviderValue {
		return false
	}
	for _, k := range []string{LabelCompanyID, LabelEnvironmentID, LabelCreateAttempt} {
		if !IsEnvelopeID(sb.Labels[k]) {
			return false
		}
	}
	if r := sb.Labels[LabelReuseLease]; r != "true" && r != "false" {
		return false
	}
	if run, ok := sb.Labels[LabelRunID]; ok && !IsEnvelopeID(run) {
		return false
	}
	return sb.Name == CreationName(sb.Labels[LabelCreateAttempt])
}

// Age is how long ago sb was created, and false when Daytona did not say.
func Age(sb *daytona.Sandbox, now time.Time) (time.Duration, bool) {
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(sb.CreatedAt))
	if err != nil {
		return 0, false
	}
	return max(0, now.Sub(t)), true
}

// Matches reports whether sb is one the filter selects: owned (Owned), and
// every filter holds on the sandbox itself. It is the re-check of every
// listed sandbox: a listing may return sandboxes its label filter does not
// match (an eventually consistent index, a filter the server ignores).
func (f SweepFilter) Matches(sb *daytona.Sandbox) bool {
	if !Owned(sb) {
		return false
	}
	for k, v := range f.labels() {
		if sb.Labels[k] != v {
			return false
		}
	}
	if len(f.States) > 0 && !slices.Contains(f.States, sb.State) {
		return false
	}
	if f.OlderThan > 0 {
		age, ok := Age(sb, f.now())
		if !ok || age < f.OlderThan {
			return false
		}
	}
	return true
}

// FindOrphans lists the sandboxes the filter selects, each re-verified
// with Matches, in the listing's order. It refuses (ErrNoScope) a filter
// that selects nothing but the plugin unless f.All is set.
func FindOrphans(ctx context.Context, api SandboxAPI, f SweepFilter) ([]daytona.Sandbox, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	found, err := api.ListAll(ctx, &daytona.ListOptions{Labels: f.labels(), States: f.States})
	if err != nil {
		return nil, err
	}
	var out []daytona.Sandbox
	for i := range found {
		if f.Matches(&found[i]) {
			out = append(out, found[i])
		}
	}
	return out, nil
}

// SweepResult is the outcome of deleting one sandbox.
type SweepResult struct {
	Sandbox daytona.Sandbox
	Err     error // nil: deleted and confirmed gone
}

// DefaultSweepConcurrency is how many deletions a sweep runs at once when
// the caller does not say: enough to clear a crashed run's leftovers
// quickly, few enough to stay clear of Daytona's lifecycle rate limit.
const DefaultSweepConcurrency = 4

// DeleteOrphans deletes each sandbox, at most concurrency at a time, and
// waits until each is gone (DeleteAndWait). Each sandbox is re-read and
// re-verified with f.Matches just before its delete, so a sandbox that was
// relabelled, or whose name now belongs to another sandbox, is left alone
// (reported as ErrOwnership). done, when non-nil, is called once per
// sandbox as it finishes (from several goroutines, one call at a time).
// The results are in the order of sbs.
func DeleteOrphans(ctx context.Context, api SandboxAPI, sbs []daytona.Sandbox, f SweepFilter, concurrency int, done func(SweepResult)) []SweepResult {
	if concurrency <= 0 {
		concurrency = DefaultSweepConcurrency
	}
	results := make([]SweepResult, len(sbs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, concurrency)
	for i := range sbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
				results[i] = SweepResult{Sandbox: sbs[i], Err: deleteOrphan(ctx, api, &sbs[i], f)}
			case <-ctx.Done():
				results[i] = SweepResult{Sandbox: sbs[i], Err: ctx.Err()}
			}
			if done != nil {
				mu.Lock()
				done(results[i])
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return results
}

func deleteOrphan(ctx context.Context, api SandboxAPI, sb *daytona.Sandbox, f SweepFilter) error {
	fresh, _, err := api.Get(ctx, sb.ID)
	switch {
	case errors.Is(err, daytona.ErrNotFound):
		return nil // gone already
	case err != nil:
		return err
	case fresh.ID != sb.ID || !f.Matches(fresh):
		return fmt.Errorf("%w: sandbox %s changed since it was listed", ErrOwnership, sb.ID)
	}
	err = DeleteAndWait(ctx, api, fresh.ID)
	// Daytona refuses a delete (409) while the sandbox is changing state
	// (starting, stopping, an auto-stop): wait until it settles, then
	// delete again, a bounded number of times.
	for attempt := 0; errors.Is(err, daytona.ErrConflict) && attempt < maxSweepDeleteRetries; attempt++ {
		_, werr := api.WaitForState(ctx, fresh.ID, settledStates...)
		if werr != nil && !errors.Is(werr, daytona.ErrNotFound) {
			return errors.Join(err, werr)
		}
		err = DeleteAndWait(ctx, api, fresh.ID)
	}
	return err
}

// maxSweepDeleteRetries bounds the deletes a sweep retries after a 409.
const maxSweepDeleteRetries = 2

// settledStates are the states a sandbox rests in, where Daytona accepts
// a delete.
var settledStates = []daytona.SandboxState{daytona.StateStarted, daytona.StateStopped, daytona.StateArchived,
	daytona.StateError, daytona.StateBuildFailed}
