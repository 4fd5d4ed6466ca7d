package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path"
	"strings"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/bound"
	"github.com/daytonaworker/daytona-worker/provider/config"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// notResumable is resume's "replace this lease" answer.
func notResumable(sentinel map[string]any) rpc.Lease {
	md := map[string]any{"expired": true}
	if sentinel != nil {
		md["workspaceSentinel"] = sentinel
	}
	return rpc.Lease{ProviderLeaseID: nil, Metadata: md}
}

// ephemeralProofMissing is the no-provider-call pre-check of an ephemeral
// lease (docs/behavior.md#resume, ephemeral pre-check): proof is never minted on resume.
func ephemeralProofMissing(md map[string]any, leaseID string) bool {
	s, _ := md["workspaceSentinel"].(map[string]any)
	token, _ := s["token"].(string)
	runID, _ := s["runId"].(string)
	boundID, _ := s["providerLeaseId"].(string)
	sandboxID, _ := md["sandboxId"].(string)
	if token == "" || runID == "" || boundID != leaseID || sandboxID != leaseID {
		return true
	}
	if exp, ok := md["nativeWorkspaceExportResume"].(map[string]any); ok {
		if r, _ := exp["runId"].(string); r != runID {
			return true
		}
	}
	return false
}

func (d *Driver) resume(ctx context.Context, p rpc.ResumeParams) (rpc.Lease, error) {
	if p.ProviderLeaseID == "" {
		return notResumable(nil), nil
	}
	if reuse, ok := p.LeaseMetadata["reuseLease"].(bool); ok && !reuse && ephemeralProofMissing(p.LeaseMetadata, p.ProviderLeaseID) {
		return notResumable(map[string]any{"result": "mismatch"}), nil
	}
	c, err := d.resolveAccount(p.Config)
	if err != nil {
		return rpc.Lease{}, err
	}
	k := c.scope(p.EnvironmentBase, p.ProviderLeaseID)
	if d.scopes.settling(k) {
		//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
		return rpc.Lease{}, errors.New("The stopped Daytona sandbox is still settling cancelled work. Retry shortly.")
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.AcquireBudget())
	defer cancel()
	var lease rpc.Lease
	err = d.scopes.withActivity(ctx, k, p.ProviderLeaseID, true, func(ctx context.Context) error {
		var err error
		lease, err = d.resumeActive(ctx, c, k, p)
		if err != nil || lease.ProviderLeaseID == nil {
			// Failed or not resumable: the next use re-reads the sandbox
			// (docs/behavior.md#resume: evict on a lost container, a
			// sentinel mismatch or any error).
			d.handles.evict(k)
		}
		return err
	})
	if err != nil {
		return rpc.Lease{}, transientForHost(err)
	}
	return lease, nil
}

func (d *Driver) resumeActive(ctx context.Context, c *account, k scopeKey, p rpc.ResumeParams) (rpc.Lease, error) {
	sb, err := c.sandboxOrNil(ctx, p.ProviderLeaseID)
	if err != nil {
		return rpc.Lease{}, err
	}
	if sb == nil {
		d.idle.release(k)
		return notResumable(nil), nil
	}
	if sb.ID != p.ProviderLeaseID {
		return rpc.Lease{}, &HandleMismatchError{Got: sb.ID, Want: p.ProviderLeaseID}
	}
	if sb.Destroying() {
		// Deleted (GET by id still shows it until destruction completes):
		// as gone as a 404, and starting it would fail or be undone.
		d.idle.release(k)
		return notResumable(nil), nil
	}
	if containerGone(sb) {
		fresh, gone, err := d.confirmGone(ctx, c, k, p.ProviderLeaseID)
		if err != nil || gone {
			return notResumable(nil), err
		}
		sb = fresh
	}
	resumedFrom := string(sb.State)
	if sb.State != daytona.StateStarted {
		d.runner.ForgetSessions(string(k)) // a restart destroys the session
		_ = d.closeLease(ctx, k)           // and the terminals
	}
	started, err := d.ensureStarted(ctx, c, sb)
	if err != nil && ctx.Err() == nil && sb.State != daytona.StateError {
		// The start may itself have run into a lost container (Daytona
		// refuses it and puts the sandbox in error with the exact report):
		// the same fresh read decides, rather than failing the run on a
		// provable loss. Anything else keeps the start's error.
		if _, gone, cerr := d.confirmGone(ctx, c, k, p.ProviderLeaseID); cerr == nil && gone {
			return notResumable(nil), nil
		}
	}
	if err != nil {
		return rpc.Lease{}, err
	}
	sb = started
	sentinel, _ := p.LeaseMetadata["workspaceSentinel"].(map[string]any)
	token, _ := sentinel["token"].(string)
	remoteCwd, _ := p.LeaseMetadata["remoteCwd"].(string)
	sentinelPath, _ := sentinel["path"].(string)
	if sentinelPath == "" && remoteCwd != "" {
		sentinelPath = path.Join(remoteCwd, sentinelRelPath)
	}
	result := "missing"
	shell := "sh"
	if token != "" && sentinelPath != "" {
		out, err := runScript(ctx, c, sb, resumeScript(sentinelPath), remainingSeconds(ctx))
		if err != nil {
			return rpc.Lease{}, err
		}
		shell, result = verifySentinel(out, token)
	}
	verdict := map[string]any{"path": nullable(sentinelPath), "token": nullable(token), "result": result}
	for _, key := range []string{"runId", "providerLeaseId"} {
		if v, ok := sentinel[key]; ok {
			verdict[key] = v
		}
	}
	if result != "matched" {
		return notResumable(verdict), nil
	}
	if remoteCwd == "" {
		remoteCwd = path.Dir(path.Dir(sentinelPath))
	}
	d.raiseWarmAutoStop(ctx, c, sb)
	d.handles.seed(k, sb)
	d.remember(c, k, sb, remoteCwd)
	d.scopes.open(k)
	d.runner.ReopenLease(string(k))
	d.idle.allocate(k)
	md := leaseMetadata(c.cfg, sb, setupResult{remoteCwd: remoteCwd, shell: shell}, true, resumedFrom, verdict)
	md["sandboxState"] = string(daytona.StateStarted)
	return rpc.Lease{ProviderLeaseID: new(sb.ID), Metadata: md}, nil
}

// confirmGone re-reads a sandbox that reported a missing container: only a
// fresh read (bounded by livenessTimeoutMs) that repeats the exact report,
// or a NotFound, proves the loss (docs/behavior.md#resume, missing-container confirmation). Any
// other failure is returned and preserves the lease.
func (d *Driver) confirmGone(ctx context.Context, c *account, k scopeKey, id string) (fresh *daytona.Sandbox, gone bool, err error) {
	err = c.boundCall(ctx, "sandbox.refreshData", 0, func(ctx context.Context) error {
		var err error
		fresh, err = c.sandboxOrNil(ctx, id)
		return err
	})
	switch {
	case err != nil:
		return nil, false, err
	case fresh == nil || containerGone(fresh):
		d.idle.release(k)
		return nil, true, nil
	case fresh.ID != id:
		return nil, false, &HandleMismatchError{Got: fresh.ID, Want: id}
	}
	return fresh, false, nil
}

// containerGone is the missing-container rule of docs/behavior.md#missing-container:
// state error, recoverable false, and exactly Docker's "No such container"
// text for this very id (compared literally). A recoverable sandbox with
// that text is recovered like any other recoverable error.
func containerGone(sb *daytona.Sandbox) bool {
	return sb.ID != "" && !sb.Recoverable && sb.ContainerMissing()
}

// verifySentinel reads resumeScript's output: the shell, then the file.
func verifySentinel(out, token string) (shell, result string) {
	first, rest, _ := strings.Cut(out, "\n")
	shell = "sh"
	if strings.TrimPrefix(first, setupMarker+"\t") == "bash" {
		shell = "bash"
	}
	if strings.Contains(rest, setupMarker+"-missing") {
		return shell, "missing"
	}
	var file struct {
		Token string `json:"token"`
	}
	if json.Unmarshal([]byte(strings.TrimSpace(rest)), &file) != nil || file.Token != token {
		return shell, "mismatch"
	}
	return shell, "matched"
}

// warmRaiseBound bounds the best-effort auto-stop raise of a warm sandbox
// (docs/behavior.md#warm-window).
const warmRaiseBound = 5 * time.Second

// raiseWarmAutoStop lifts a warm reusable sandbox's auto-stop above the warm
// window (docs/behavior.md#warm-window): best effort, bounded to 5 s.
func (d *Driver) raiseWarmAutoStop(ctx context.Context, c *account, sb *daytona.Sandbox) {
	if !c.cfg.ReuseLease {
		return
	}
	if _, warm := c.cfg.WarmIdleWindowMs(); !warm {
		return
	}
	want := config.EffectiveAutoStopMinutes(c.cfg, true, 0)
	current := int64(-1)
	if sb.AutoStopInterval != nil {
		current = int64(*sb.AutoStopInterval)
	}
	if current >= 0 && !config.ShouldRaiseAutoStop(current, want) {
		return
	}
	err := bound.Call(ctx, "sandbox.setAutostopInterval", warmRaiseBound, func(ctx context.Context) error {
		_, _, err := c.client.Sandboxes.SetAutoStopInterval(ctx, sb.ID, int(want))
		return err
	})
	if err != nil {
		d.log.Warn("could not raise the auto-stop interval above the warm window; continuing", "sandboxId", sb.ID, "err", err)
	}
}

// transientForHost phrases errors that do not prove a loss so the host's
// resume retry applies (docs/host.md#resume: the host matches timeout, rate
// limit, network, service unavailable).
func transientForHost(err error) error {
	var ne net.Error
	var rl *daytona.RateLimitError
	var te *daytona.TransportError
	switch {
	case errors.As(err, &rl):
		//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
		return fmt.Errorf("Daytona rate limit reached: %w", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, daytona.ErrTimeout):
		//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
		return fmt.Errorf("Daytona sandbox resume timed out: %w", err)
	case errors.Is(err, daytona.ErrServer):
		//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
		return fmt.Errorf("Daytona service unavailable: %w", err)
	case errors.As(err, &ne), errors.As(err, &te):
		// Any failed exchange (a reset, or an EOF that is not a net.Error)
		// proves nothing about the sandbox.
		//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
		return fmt.Errorf("Daytona network error: %w", err)
	}
	return err
}
