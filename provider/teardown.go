package provider

import (
	"context"
	"errors"
	"time"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/bound"
	"github.com/daytonaworker/daytona-worker/internal/clamp"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// Bounds of stopping (docs/behavior.md#stop, docs/behavior.md#recover-then-stop):
// stopStepCap caps each step of the Stop button and stop lease, and
// recoverWaitBound the one recover stop-only may try.
const (
	stopStepCap      = 30 * time.Second
	recoverWaitBound = 20 * time.Second
)

// StopErrorSchema names the typed stop error's data (docs/host.md#newer-contract,
// proposed; kept here and nowhere else).
const StopErrorSchema = "paperclip/environment-stop-error/v1"

// Reasons of a StopError.
const (
	StopUnrecoverable     = "unrecoverable_error"
	StopErrorAfterRecover = "error_after_recover"
	StopRecoverUnfinished = "recover_unfinished"
)

// StopError is PluginEnvironmentStopError: the stop-only hook could not
// bring an errored sandbox to a stop. The sandbox is never deleted.
type StopError struct {
	ProviderLeaseID string
	Reason          string
	SandboxState    string
	cause           error
}

func (e *StopError) Error() string {
	id := clamp.Echo(e.ProviderLeaseID)
	switch e.Reason {
	case StopUnrecoverable:
		return "Daytona sandbox " + id + " is in an unrecoverable error state and cannot be stopped; it was preserved."
	case StopErrorAfterRecover:
		return "Daytona sandbox " + id + " returned to an error state after recovery and cannot be stopped; it was preserved."
	default:
		return "Daytona sandbox " + id + " did not finish recovering, so it could not be stopped; it was preserved."
	}
}

func (e *StopError) Unwrap() error { return e.cause }

// RPCCode and RPCData put the typed error on the wire.
func (e *StopError) RPCCode() int64 { return rpc.CodeWorkerError }

// RPCData is the proposed error.data of PluginEnvironmentStopError.
func (e *StopError) RPCData() any {
	return map[string]any{"schema": StopErrorSchema, "name": "PluginEnvironmentStopError",
		"providerLeaseId": e.ProviderLeaseID, "reason": e.Reason, "sandboxState": nullable(e.SandboxState)}
}

// teardown is the shared frame of release, destroy and stop: the teardown
// gate (admission closed first), one deadline, evidence bookkeeping.
type teardown struct {
	d   *Driver
	c   *account
	k   scopeKey
	id  string
	gen uint64
}

func (d *Driver) beginTeardown(p rpc.ReleaseParams) (*teardown, func(), error) {
	c, err := d.resolveAccount(p.Config)
	if err != nil {
		return nil, nil, err
	}
	id := deref(p.ProviderLeaseID)
	k := c.scope(p.EnvironmentBase, id)
	end := d.scopes.beginTeardown(k)
	return &teardown{d: d, c: c, k: k, id: id}, func() { end(); d.handles.evict(k) }, nil
}

// observe captures the activity generation before a provider observation.
func (t *teardown) observe() { t.gen, _ = t.d.scopes.generation(t.k) }

// confirmed clears allocation evidence after a stop or delete receipt, but
// only when no other work on the sandbox started or finished meanwhile.
func (t *teardown) confirmed(destroyed bool) {
	if gen, active := t.d.scopes.generation(t.k); gen == t.gen && active == 0 {
		t.d.idle.release(t.k)
		if destroyed {
			// Only this company's evidence: a sweep after the environment
			// was deleted destroys with environmentId "", and must not
			// leave the acquire's allocation evidence behind.
			t.d.idle.releaseOrphaned(t.k)
		}
	}
}

func (t *teardown) receipt(state string) *rpc.Receipt {
	t.confirmed(state == "destroyed")
	return &rpc.Receipt{ProviderLeaseID: t.id, State: state}
}

// drainStepBound caps each bridge-cleanup step of a teardown; a shorter
// livenessTimeoutMs caps it further.
const drainStepBound = 10 * time.Second

// drain runs the bridge cleanup before termination (docs/behavior.md#release
// step 4): wait for activity, delete the session. Each step is bounded and
// its failure only logged: a hung drain never blocks termination.
func (t *teardown) drain(ctx context.Context) {
	limit := drainStepBound
	if b, ok := t.c.cfg.LivenessBound(); ok && b < limit {
		limit = max(time.Millisecond, b)
	}
	steps := []struct {
		op string
		fn func(context.Context) error
	}{
		{"sandbox.activityDrain", func(ctx context.Context) error { return t.d.scopes.waitIdle(ctx, t.k) }},
		{"sandbox.sessionTeardown", func(ctx context.Context) error { return t.d.runner.CloseLease(ctx, string(t.k)) }},
		{"sandbox.channelTeardown", func(ctx context.Context) error { return t.d.closeLease(ctx, t.k) }},
	}
	for _, s := range steps {
		if err := bound.Call(ctx, s.op, limit, s.fn); err != nil {
			t.d.log.Warn("Sandbox bridge cleanup failed; continuing provider termination.", "op", s.op, "err", err)
		}
	}
}

// fresh reads the sandbox now: a cached "stopped" is not a receipt. The read
// is bounded by livenessTimeoutMs, capped at max when max > 0 (the Stop
// button and stop lease use min(livenessTimeoutMs, 30 s), docs/behavior.md#stop, docs/behavior.md#release).
func (t *teardown) fresh(ctx context.Context, max time.Duration) (*daytona.Sandbox, error) {
	t.observe()
	var sb *daytona.Sandbox
	err := t.c.boundCall(ctx, "sandbox.refreshData", max, func(ctx context.Context) error {
		var err error
		sb, err = t.c.sandboxOrNil(ctx, t.id)
		return err
	})
	return sb, err
}

// stopAndWait stops a sandbox and waits until Daytona reports it stopped.
// Daytona refuses a stop with 409 while it is changing the sandbox's state
// itself — typically its own auto-stop, which the warm window can race
// (docs/behavior.md#warm-window): then it waits, inside the same bound, until
// the sandbox settles. A sandbox Daytona stopped is the receipt; a started
// one is stopped again. Falling back to delete for a busy stop would destroy
// a sandbox the caller asked to keep.
func (t *teardown) stopAndWait(ctx context.Context, limit time.Duration) error {
	api := t.c.client.Sandboxes
	return bound.Call(ctx, "sandbox.stop", limit, func(ctx context.Context) error {
		for attempt := 0; ; attempt++ {
			_, _, err := api.Stop(ctx, t.id, false)
			if err == nil {
				_, err = api.WaitUntilStopped(ctx, t.id)
				return err
			}
			if !errors.Is(err, daytona.ErrConflict) || attempt >= maxStopRetries {
				return err
			}
			sb, werr := api.WaitForState(ctx, t.id, daytona.StateStarted, daytona.StateStopped, daytona.StateArchived)
			if werr != nil {
				return errors.Join(err, werr)
			}
			if retained(sb.State) {
				return nil
			}
		}
	})
}

// maxStopRetries bounds the stops retried after a 409 transition.
const maxStopRetries = 2

// retained: the sandbox's compute is not running and its files are kept.
// An archived sandbox (Daytona archives a stopped one after its
// auto-archive interval) is as stopped as it gets: stopping it again is
// refused with 400, and must not be mistaken for a failed stop.
func retained(s daytona.SandboxState) bool {
	return s == daytona.StateStopped || s == daytona.StateArchived
}

// deleteAndWait deletes the sandbox and waits for completed destruction.
// Daytona refuses a delete with 409 while another transition is pending (a
// stop whose reply was lost, an auto-stop or auto-archive racing the
// teardown): then it waits, inside the same bound, until the sandbox is in a
// stable state and deletes again, instead of failing a teardown that only
// had to wait.
func (t *teardown) deleteAndWait(ctx context.Context) error {
	api := t.c.client.Sandboxes
	return bound.Call(ctx, "sandbox.delete", t.c.cfg.AcquireBudget()+startMargin, func(ctx context.Context) error {
		err := cleanup.DeleteAndWait(ctx, api, t.id)
		for attempt := 0; errors.Is(err, daytona.ErrConflict) && attempt < maxDeleteRetries; attempt++ {
			_, werr := api.WaitForState(ctx, t.id, daytona.StateStarted, daytona.StateStopped,
				daytona.StateArchived, daytona.StateError, daytona.StateBuildFailed)
			if werr != nil && !errors.Is(werr, daytona.ErrNotFound) {
				return errors.Join(err, werr)
			}
			err = cleanup.DeleteAndWait(ctx, api, t.id)
		}
		return err
	})
}

// maxDeleteRetries bounds the deletes retried after a 409 transition.
const maxDeleteRetries = 2

func (d *Driver) release(ctx context.Context, p rpc.ReleaseParams) (*rpc.Receipt, error) {
	if deref(p.ProviderLeaseID) == "" {
		return nil, nil
	}
	if p.ResourceDisposition == "stop_and_retain" {
		return d.stop(ctx, p)
	}
	t, end, err := d.beginTeardown(p)
	if err != nil {
		return nil, err
	}
	defer end()
	cfg := t.c.cfg
	ctx, cancel := context.WithTimeout(ctx, cfg.AcquireBudget()+2*startMargin)
	defer cancel()
	if p.CancelActiveWork {
		// The Stop button: end running commands now, stop without waiting
		// for them, never delete.
		d.runner.CancelLease(string(t.k))
		_ = d.closeLease(ctx, t.k)
		sb, err := t.fresh(ctx, stopStepCap)
		if err != nil {
			return nil, err
		}
		if sb == nil {
			return t.receipt("destroyed"), nil
		}
		if !retained(sb.State) {
			if err := t.stopAndWait(ctx, min(cfg.AcquireBudget(), stopStepCap)+startMargin); err != nil {
				return nil, err
			}
		}
		d.runner.ForgetSessions(string(t.k))
		return t.receipt("stopped"), nil
	}
	t.drain(ctx)
	sb, err := t.fresh(ctx, 0)
	if err != nil {
		return nil, err
	}
	if sb == nil {
		return t.receipt("destroyed"), nil
	}
	stopBound := cfg.AcquireBudget() + startMargin
	if cfg.ReuseLease {
		if !retained(sb.State) {
			if err := t.stopAndWait(ctx, stopBound); err != nil {
				d.log.Warn("Failed to stop Daytona sandbox during lease release. Attempting delete instead.", "sandboxId", t.id, "err", err)
				if derr := t.deleteAndWait(ctx); derr != nil {
					return nil, errors.Join(err, derr)
				}
				return t.receipt("destroyed"), nil
			}
		}
		return t.receipt("stopped"), nil
	}
	if cfg.ArchiveOnRelease {
		err := func() error {
			if !retained(sb.State) {
				if err := t.stopAndWait(ctx, stopBound); err != nil {
					return err
				}
			}
			if _, _, err := t.c.client.Sandboxes.SetAutoDeleteInterval(ctx, t.id, 60); err != nil {
				return err
			}
			_, _, err := t.c.client.Sandboxes.Archive(ctx, t.id)
			return err
		}()
		if err == nil {
			return t.receipt("stopped"), nil
		}
		d.log.Warn("Failed to archive Daytona sandbox during lease release. Falling back to delete.", "sandboxId", t.id, "err", err)
	}
	if err := t.deleteAndWait(ctx); err != nil {
		return nil, err
	}
	return t.receipt("destroyed"), nil
}

func (d *Driver) destroy(ctx context.Context, p rpc.ReleaseParams) (*rpc.Receipt, error) {
	id := deref(p.ProviderLeaseID)
	if id == "" {
		return nil, nil
	}
	if raw, ok := p.LeaseMetadata["failedCreateCleanup"]; ok {
		return d.destroyFailedCreate(ctx, p, raw)
	}
	t, end, err := d.beginTeardown(p)
	if err != nil {
		return nil, err
	}
	defer end()
	ctx, cancel := context.WithTimeout(ctx, t.c.cfg.AcquireBudget()+2*startMargin)
	defer cancel()
	t.drain(ctx)
	t.observe()
	if err := t.deleteAndWait(ctx); err != nil {
		return nil, err
	}
	d.runner.ForgetSessions(string(t.k))
	return t.receipt("destroyed"), nil
}

// destroyFailedCreate resolves a journaled creation envelope: observe the
// real id first (the host persists it), delete on the next call
// (docs/behavior.md#destroy-failed-creation, docs/behavior.md#destroy).
func (d *Driver) destroyFailedCreate(ctx context.Context, p rpc.ReleaseParams, raw any) (*rpc.Receipt, error) {
	id := deref(p.ProviderLeaseID)
	env, err := cleanup.ParseEnvelope(raw)
	if err != nil || env.CompanyID != p.CompanyID || env.EnvironmentID != p.EnvironmentID || env.ProviderLeaseID != id {
		return nil, cleanup.ErrScope
	}
	c, err := d.resolveAccount(p.Config)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.AcquireBudget()+2*startMargin)
	defer cancel()
	err = cleanup.DestroyFailedCreation(ctx, c.client.Sandboxes, c.fingerprint, &env, cleanup.Options{RequireDurableObservation: true})
	if err != nil {
		// A fenced retry (another account, or a sandbox under the name that
		// is not ours) is nothing this worker could ever clean up: it must
		// not keep the worker awake. Everything else is uncertain.
		if !errors.Is(err, cleanup.ErrOwnership) {
			d.idle.setUncertain(env.ProviderLeaseID, true)
		}
		return nil, err
	}
	d.idle.setUncertain(env.ProviderLeaseID, false)
	if env.ObservedProviderLeaseID != "" {
		d.idle.release(c.scope(p.EnvironmentBase, env.ObservedProviderLeaseID))
	}
	return &rpc.Receipt{ProviderLeaseID: id, State: "destroyed"}, nil
}

// stop is stop-only preservation (docs/behavior.md#stop, docs/behavior.md#recover-then-stop): confirm
// the retention policy, recover an errored sandbox once, stop; never delete.
func (d *Driver) stop(ctx context.Context, p rpc.ReleaseParams) (*rpc.Receipt, error) {
	if deref(p.ProviderLeaseID) == "" {
		//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
		return nil, errors.New("Daytona stop requires an exact sandbox identity")
	}
	t, end, err := d.beginTeardown(p)
	if err != nil {
		return nil, err
	}
	defer end()
	cfg := t.c.cfg
	// Under the host's timeoutMs + 30 s, with room for one bounded recover.
	ctx, cancel := context.WithTimeout(ctx, cfg.AcquireBudget()+startMargin+recoverWaitBound)
	defer cancel()
	d.runner.CancelLease(string(t.k))
	_ = d.closeLease(ctx, t.k)
	sb, err := t.c.sandboxOrNil(ctx, t.id)
	if err != nil {
		return nil, err
	}
	if sb == nil {
		//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
		return nil, errors.New("Daytona retained sandbox is unavailable")
	}
	// The policy first: only a fresh read that shows auto-delete disabled
	// counts; otherwise nothing is stopped or deleted.
	if err := t.c.boundCall(ctx, "sandbox.setAutoDeleteInterval", stopStepCap, func(ctx context.Context) error {
		_, _, err := t.c.client.Sandboxes.SetAutoDeleteInterval(ctx, t.id, -1)
		return err
	}); err != nil {
		return nil, err
	}
	sb, err = t.fresh(ctx, stopStepCap)
	if err != nil {
		return nil, err
	}
	if sb == nil || sb.AutoDeleteInterval == nil || *sb.AutoDeleteInterval != -1 {
		//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
		return nil, errors.New("Daytona retention policy was not confirmed")
	}
	if sb.State == daytona.StateError {
		if !sb.Recoverable {
			return nil, &StopError{ProviderLeaseID: t.id, Reason: StopUnrecoverable, SandboxState: string(sb.State)}
		}
		rctx, rcancel := context.WithTimeout(ctx, recoverWaitBound)
		_, _, rerr := t.c.client.Sandboxes.Recover(rctx, t.id, false)
		if rerr == nil {
			sb, rerr = t.c.client.Sandboxes.WaitUntilStarted(rctx, t.id)
		}
		rcancel()
		if rerr != nil {
			state := ""
			var se *daytona.SandboxStateError
			if errors.As(rerr, &se) && se.State == daytona.StateError {
				return nil, &StopError{ProviderLeaseID: t.id, Reason: StopErrorAfterRecover, SandboxState: string(se.State), cause: rerr}
			}
			if sb != nil {
				state = string(sb.State)
			}
			return nil, &StopError{ProviderLeaseID: t.id, Reason: StopRecoverUnfinished, SandboxState: state, cause: rerr}
		}
	}
	if !retained(sb.State) {
		t.observe()
		if err := t.stopAndWait(ctx, cfg.AcquireBudget()+startMargin); err != nil {
			return nil, err
		}
	}
	d.runner.ForgetSessions(string(t.k))
	return t.receipt("stopped"), nil
}
