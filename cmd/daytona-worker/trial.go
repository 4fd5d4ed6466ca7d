package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/provider"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/google/uuid"
)

// The scope of a trial lease's sandbox: its company label, and the prefix
// of its run label (a UUID follows), so `daytona-worker sweep --company
// daytona-worker-doctor` finds any a trial could not remove.
const (
	trialCompany     = "daytona-worker-doctor"
	trialEnvironment = "doctor"
	trialRunPrefix   = "doctor-"
)

// trialCleanupBound bounds the cleanup of a trial after its context ended
// (Ctrl-C): a delete and its wait, as a teardown's.
const trialCleanupBound = 2 * time.Minute

// trialObserveTries bounds the host-style retries of a failed creation's
// cleanup: one to record the observed sandbox, one to delete it, and a few
// for a create that is not visible yet.
const trialObserveTries = 5

// trialStep is one timed step of a trial lease.
type trialStep struct {
	Name   string
	Took   time.Duration
	Detail string
	Err    error
}

// trialReport is what a trial lease did.
type trialReport struct {
	// RunID is the run label of the trial's sandbox.
	RunID string
	// Steps are the steps in order, including the cleanup.
	Steps []trialStep
	// Leftover names the sandbox (or creation name) whose removal could not
	// be confirmed; "" when nothing is left behind.
	Leftover string
}

// runTrial runs one lease exactly as a run would, through the handlers the
// host calls (the worker's registry, params and results as JSON): acquire,
// execute `echo ok`, sync a small tree in and back out, destroy. each (optional) sees every step as it ends. However ctx ends
// (Ctrl-C), what was created is destroyed with a fresh bound: a lease by
// environmentDestroyLease, an interrupted or uncertain create through its
// cleanup envelope as the host would finish it, and anything still carrying
// the trial's run label by cleanup's sweep. What could not be confirmed
// gone is named in Leftover.
func runTrial(ctx context.Context, d *provider.Driver, raw json.RawMessage, each func(trialStep)) trialReport {
	reg := rpc.NewRegistry()
	d.Register(reg)
	t := &trial{d: d, reg: reg, raw: raw, each: each, rep: trialReport{RunID: trialRunPrefix + uuid.NewString()}}
	t.run(ctx)
	t.cleanup(ctx)
	return t.rep
}

type trial struct {
	d        *provider.Driver
	reg      *rpc.Registry
	raw      json.RawMessage
	each     func(trialStep)
	rep      trialReport
	lease    *rpc.Lease
	leaseCfg json.RawMessage
	envelope *cleanup.Envelope // an uncertain create to finish
	name     string            // the sandbox's name once known
}

func (t *trial) base(cfg json.RawMessage) rpc.EnvironmentBase {
	return rpc.EnvironmentBase{DriverKey: provider.DriverKey, CompanyID: trialCompany, EnvironmentID: trialEnvironment, Config: cfg}
}

// step runs fn as a named step, unless an earlier one failed.
func (t *trial) step(ctx context.Context, name string, fn func(ctx context.Context) (string, error)) bool {
	start := time.Now()
	detail, err := fn(ctx)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	s := trialStep{Name: name, Took: time.Since(start), Detail: detail, Err: err}
	t.rep.Steps = append(t.rep.Steps, s)
	if t.each != nil {
		t.each(s)
	}
	return err == nil
}

func (t *trial) run(ctx context.Context) {
	ok := t.step(ctx, "acquire", func(ctx context.Context) (string, error) {
		l, err := call[rpc.Lease](ctx, t.reg, "environmentAcquireLease", rpc.AcquireParams{EnvironmentBase: t.base(t.raw), RunID: t.rep.RunID,
			AgentID: new("doctor"), ExecutionWorkspaceID: new("doctor")})
		var ce *cleanup.Error
		if errors.As(err, &ce) {
			env := ce.Envelope.Clone()
			t.envelope, t.name = &env, env.ProviderLeaseID
		}
		if err != nil {
			return "", err
		}
		if l.ProviderLeaseID == nil {
			//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
			return "", errors.New("Daytona returned no lease")
		}
		t.lease, t.name = &l, fmt.Sprint(l.Metadata["sandboxName"])
		t.leaseCfg = mergeConfig(t.raw, l.Metadata)
		return fmt.Sprintf("sandbox %s, cwd %v", t.name, l.Metadata["remoteCwd"]), nil
	})
	ok = ok && t.step(ctx, "execute echo ok", func(ctx context.Context) (string, error) {
		r, err := call[rpc.ExecuteResult](ctx, t.reg, "environmentExecute", rpc.ExecuteParams{EnvironmentBase: t.base(t.leaseCfg), Lease: *t.lease, Command: "echo", Args: []string{"ok"}})
		switch {
		case err != nil:
			return "", err
		case r.ExitCode == nil || *r.ExitCode != 0 || r.Stdout != "ok\n":
			code := "none"
			if r.ExitCode != nil {
				code = fmt.Sprint(*r.ExitCode)
			}
			return "", fmt.Errorf("echo ok: exit %s, stdout %q, stderr %q", code, r.Stdout, r.Stderr)
		}
		return "exit 0, stdout \"ok\"", nil
	})
	if !ok {
		return
	}
	src, err := os.MkdirTemp("", "daytona-doctor-")
	if err != nil {
		t.step(ctx, "sync in", func(context.Context) (string, error) { return "", err })
		return
	}
	defer os.RemoveAll(src)
	remote := fmt.Sprint(t.lease.Metadata["remoteCwd"]) + "/daytona-doctor"
	ok = t.step(ctx, "sync in", func(ctx context.Context) (string, error) {
		if err := writeTrialTree(filepath.Join(src, "in")); err != nil {
			return "", err
		}
		return t.sync(ctx, "environmentSyncIn", filepath.Join(src, "in"), remote)
	})
	ok = ok && t.step(ctx, "sync out", func(ctx context.Context) (string, error) {
		detail, err := t.sync(ctx, "environmentSyncOut", remote, filepath.Join(src, "out"))
		if err == nil {
			err = sameTrialTree(filepath.Join(src, "out"))
		}
		return detail, err
	})
	if ok {
		t.step(ctx, "destroy", func(ctx context.Context) (string, error) { return t.destroy(ctx) })
	}
}

func (t *trial) sync(ctx context.Context, method, from, to string) (string, error) {
	res, err := call[rpc.SyncResult](ctx, t.reg, method, rpc.SyncParams{EnvironmentBase: t.base(t.leaseCfg), Lease: *t.lease, Operations: []rpc.SyncOperation{{
		OperationID: "doctor", Files: []rpc.SyncFileMapping{{SourcePath: from, TargetPath: to, Kind: "directory"}}}}})
	if err != nil {
		return "", err
	}
	var files, size int64
	for _, op := range res.Operations {
		files, size = files+op.FilesTransferred, size+op.BytesTransferred
	}
	return fmt.Sprintf("%d files, %d bytes", files, size), nil
}

// destroy ends the lease; afterwards nothing of it is left.
func (t *trial) destroy(ctx context.Context) (string, error) {
	r, err := call[*rpc.Receipt](ctx, t.reg, "environmentDestroyLease", rpc.ReleaseParams{EnvironmentBase: t.base(t.leaseCfg), ProviderLeaseID: t.lease.ProviderLeaseID, LeaseMetadata: t.lease.Metadata})
	if err != nil {
		return "", err
	}
	if r == nil || r.State != "destroyed" {
		//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
		return "", errors.New("Daytona did not confirm the destruction")
	}
	t.lease, t.name = nil, ""
	return "destroyed", nil
}

// cleanup removes whatever the trial left: the lease (when destroy did not
// run or failed), an uncertain create through its envelope, then any
// sandbox with the trial's run label. It runs with a fresh bound, since ctx
// may be what ended the trial.
func (t *trial) cleanup(ctx context.Context) {
	if t.lease == nil && t.envelope == nil && ctx.Err() == nil {
		return // destroyed, or nothing was created
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), trialCleanupBound)
	defer cancel()
	t.step(cctx, "cleanup", func(ctx context.Context) (string, error) {
		// First as a run's host would: destroy the lease, finish an
		// uncertain create. Whatever those could not confirm still carries
		// the trial's run label, and the sweep by that label is the proof.
		var first []error
		leaseID := ""
		if t.lease != nil {
			if _, err := t.destroy(ctx); err != nil {
				first, leaseID = append(first, err), *t.lease.ProviderLeaseID
			}
		}
		if t.envelope != nil {
			if err := t.finishCreation(ctx); err != nil {
				first = append(first, err)
			}
		}
		api, _, err := t.d.Client(t.raw)
		if err != nil {
			return "", errors.Join(append(first, err)...)
		}
		f := cleanup.SweepFilter{CompanyID: trialCompany, RunID: t.rep.RunID}
		found, err := cleanup.FindOrphans(ctx, api.Sandboxes, f)
		if err != nil {
			return "", errors.Join(append(first, err)...)
		}
		var errs []error
		for _, r := range cleanup.DeleteOrphans(ctx, api.Sandboxes, found, f, 0, nil) {
			if r.Err != nil {
				errs = append(errs, r.Err)
				t.name = r.Sandbox.Name
			}
		}
		if t.envelope != nil && t.envelope.ObservedProviderLeaseID == "" &&
			!slices.ContainsFunc(found, func(sb daytona.Sandbox) bool { return sb.Name == t.envelope.ProviderLeaseID }) {
			// A create was sent and its sandbox was never seen: Daytona
			// may still make it, so its absence proves nothing.
			errs = append(errs, fmt.Errorf("sandbox %s: %w", t.envelope.ProviderLeaseID, cleanup.ErrNotObserved))
			t.name = t.envelope.ProviderLeaseID
		}
		if leaseID != "" && !slices.ContainsFunc(found, func(sb daytona.Sandbox) bool { return sb.ID == leaseID }) {
			errs = append(errs, fmt.Errorf("sandbox %s was not listed, so its removal is not confirmed", leaseID))
		}
		if len(errs) > 0 {
			return "", errors.Join(append(first, errs...)...)
		}
		t.name, t.envelope = "", nil
		return "nothing left behind", nil
	})
	t.rep.Leftover = t.name
}

// finishCreation resolves an uncertain create as the host does: destroy
// with the envelope in the lease metadata, persisting the observed id the
// first call reports and calling again.
func (t *trial) finishCreation(ctx context.Context) error {
	var err error
	for range trialObserveTries {
		var r *rpc.Receipt
		r, err = call[*rpc.Receipt](ctx, t.reg, "environmentDestroyLease", rpc.ReleaseParams{EnvironmentBase: t.base(t.raw), ProviderLeaseID: new(t.envelope.ProviderLeaseID),
			LeaseMetadata: map[string]any{"failedCreateCleanup": *t.envelope}})
		var ce *cleanup.Error
		switch {
		case err == nil && r != nil && r.State == "destroyed":
			t.envelope = nil
			return nil
		case errors.As(err, &ce):
			env := ce.Envelope.Clone() // the observed id, persisted
			t.envelope = &env
		case errors.Is(err, cleanup.ErrNotObserved):
			// Not visible (yet): the run-label sweep that follows finds it
			// if it is there by then.
			return nil
		case err != nil:
			return err
		}
	}
	return err
}

// mergeConfig is the config the host rebuilds for later calls of a lease:
// the saved config with the lease metadata over it.
func mergeConfig(raw json.RawMessage, md map[string]any) json.RawMessage {
	m := map[string]any{}
	_ = json.Unmarshal(raw, &m)
	maps.Copy(m, md)
	b, _ := json.Marshal(m)
	return b
}

// The trial's tree: a file, a nested binary file.
var trialFiles = map[string][]byte{
	"hello.txt":       []byte("hello from daytona-worker doctor\n"),
	"nested/data.bin": {0, 1, 2, 3, 255},
}

func writeTrialTree(dir string) error {
	for name, b := range trialFiles {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func sameTrialTree(out string) error {
	for name, want := range trialFiles {
		got, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(name)))
		if err != nil {
			return fmt.Errorf("synced tree: %w", err)
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("synced tree: %s differs after the round trip", name)
		}
	}
	return nil
}

// call invokes the registered handler of method with params as the host
// sends them (JSON) and decodes its result as the host reads it.
func call[R any](ctx context.Context, reg *rpc.Registry, method string, params any) (R, error) {
	var out R
	h, ok := reg.Lookup(method)
	if !ok {
		return out, fmt.Errorf("the worker has no %s", method)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return out, err
	}
	res, err := h(ctx, raw)
	if err != nil {
		return out, err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return out, err
	}
	return out, json.Unmarshal(b, &out)
}
