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

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/clamp"
	"github.com/daytonaworker/daytona-worker/provider/config"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// Bounds the reference uses (docs/behavior.md#ensure-started, docs/behavior.md#stop, docs/behavior.md#warm-window, docs/behavior.md#recover-then-stop),
// and probeWindow, the part of the host's 120 s probe timeout the worker uses.
const (
	probeWindow      = 115 * time.Second
	startMargin      = 5 * time.Second
	stopStepCap      = 30 * time.Second
	warmRaiseBound   = 5 * time.Second
	recoverWaitBound = 20 * time.Second
	maxStartRetries  = 2
)

// probe creates a throwaway sandbox, checks it and always deletes it. It
// never throws: failures are ok:false with a secret-free summary.
func (d *Driver) probe(ctx context.Context, p rpc.EnvironmentBase) (rpc.ProbeResult, error) {
	c, err := d.connect(p.Config)
	if err != nil {
		return probeFailure(ParseConfigOrDefault(p.Config), err), nil
	}
	started := d.now()
	budget := min(c.cfg.AcquireBudget(), probeWindow-15*time.Second) // the host waits 120 s
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	src, err := config.RuntimeCreateSource(c.cfg)
	if err != nil {
		return probeFailure(c.cfg, err), nil
	}
	ttl, _ := c.cfg.CreationTTLMinutes()
	attemptID := NewAttemptID()
	labels, err := OwnershipLabels(p.CompanyID, p.EnvironmentID, "", attemptID, c.cfg.ReuseLease)
	if err != nil {
		return probeFailure(c.cfg, err), nil
	}
	a := &acquisition{d: d, c: c, p: rpc.AcquireParams{EnvironmentBase: p}, start: d.now(), budget: budget, phase: phaseCreate}
	a.envelope = cleanup.Envelope{ProviderLeaseID: CreationName(attemptID), CompanyID: p.CompanyID,
		EnvironmentID: p.EnvironmentID, AttemptID: attemptID, AccountFingerprint: c.fingerprint, Labels: CopyLabels(labels)}
	sb, err := a.create(ctx, src, labels, ttl)
	if err != nil {
		return probeFailure(c.cfg, err), nil
	}
	defer func() {
		// Always delete, with a fresh bound: the probe's own may be spent.
		// The host waits 120 s for a probe: the deletion gets what is left
		// of that (at least 5 s); an unfinished wait leaves a delete that
		// Daytona is already carrying out, and is logged.
		left := max(5*time.Second, probeWindow-d.now().Sub(started))
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), left)
		defer cancel()
		if err := cleanup.DeleteAndWait(dctx, c.client.Sandboxes, sb.ID); err != nil {
			d.log.Warn("probe sandbox deletion failed", "sandboxId", sb.ID, "err", err)
		} else {
			d.idle.release(c.scope(p, sb.ID))
		}
	}()
	out, err := runScript(ctx, c, sb, setupScript(nil), remainingSeconds(ctx))
	if err != nil {
		return probeFailure(c.cfg, err), nil
	}
	ws, err := parseSetup(out)
	if err != nil {
		return probeFailure(c.cfg, err), nil
	}
	md := config.LeaseMetadata(c.cfg)
	md["provider"], md["shellCommand"], md["sandboxId"], md["sandboxName"] = DriverKey, ws.shell, sb.ID, sb.Name
	md["target"], md["remoteCwd"] = nullable(sb.Target), ws.remoteCwd
	return rpc.ProbeResult{OK: true, Summary: "Connected to Daytona sandbox " + sb.Name + ".", Metadata: md}, nil
}

func probeFailure(cfg config.Config, err error) rpc.ProbeResult {
	md := config.LeaseMetadata(cfg)
	md["provider"] = DriverKey
	md["error"] = err.Error()
	summary := "Daytona sandbox probe failed."
	if ue := (*UnreachableError)(nil); errors.As(err, &ue) {
		summary = ue.Error() // the whole story: a wrong or unreachable apiUrl
	}
	return rpc.ProbeResult{OK: false, Summary: summary, Metadata: md,
		Diagnostics: []rpc.ProbeDiagnostic{{Severity: "error", Message: err.Error()}}}
}

// ParseConfigOrDefault parses a config, falling back to the defaults.
func ParseConfigOrDefault(raw json.RawMessage) config.Config {
	cfg, err := config.Parse(raw)
	if err != nil {
		return config.Default()
	}
	return cfg
}

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
	c, err := d.connect(p.Config)
	if err != nil {
		return rpc.Lease{}, err
	}
	k := c.scope(p.EnvironmentBase, p.ProviderLeaseID)
	if d.scopes.settling(k) {
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

func (d *Driver) resumeActive(ctx context.Context, c *conn, k scopeKey, p rpc.ResumeParams) (rpc.Lease, error) {
	sb, err := c.getOrNil(ctx, p.ProviderLeaseID)
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
		d.work.Forget(string(k)) // a restart destroys the session
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
	d.scopes.open(k)
	d.reopen(k)
	d.idle.allocate(k)
	md := leaseMetadata(c.cfg, sb, setupResult{remoteCwd: remoteCwd, shell: shell}, true, resumedFrom, verdict)
	md["sandboxState"] = string(daytona.StateStarted)
	return rpc.Lease{ProviderLeaseID: ptr(sb.ID), Metadata: md}, nil
}

// confirmGone re-reads a sandbox that reported a missing container: only a
// fresh read (bounded by livenessTimeoutMs) that repeats the exact report,
// or a NotFound, proves the loss (docs/behavior.md#resume, missing-container confirmation). Any
// other failure is returned and preserves the lease.
func (d *Driver) confirmGone(ctx context.Context, c *conn, k scopeKey, id string) (fresh *daytona.Sandbox, gone bool, err error) {
	err = c.liveness(ctx, "sandbox.refreshData", 0, func(ctx context.Context) error {
		var err error
		fresh, err = c.getOrNil(ctx, id)
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

// raiseWarmAutoStop lifts a warm reusable sandbox's auto-stop above the warm
// window (docs/behavior.md#warm-window): best effort, bounded to 5 s.
func (d *Driver) raiseWarmAutoStop(ctx context.Context, c *conn, sb *daytona.Sandbox) {
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
	err := cleanup.WithLiveness(ctx, "sandbox.setAutostopInterval", warmRaiseBound, func(ctx context.Context) error {
		_, _, err := c.client.Sandboxes.SetAutoStopInterval(ctx, sb.ID, int(want))
		return err
	})
	if err != nil {
		d.log.Warn("could not raise the auto-stop interval above the warm window; continuing", "sandboxId", sb.ID, "err", err)
	}
}

// ensureStarted starts or recovers a sandbox and waits until it runs
// (docs/behavior.md#ensure-started), retrying a start Daytona refuses while the
// sandbox is still stopping (docs/behavior.md#refused-resume).
func (d *Driver) ensureStarted(ctx context.Context, c *conn, sb *daytona.Sandbox) (*daytona.Sandbox, error) {
	if sb.State == daytona.StateStarted {
		return sb, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.AcquireBudget()+startMargin)
	defer cancel()
	if sb.State == daytona.StateError {
		if !sb.Recoverable {
			return nil, unrecoverable(sb)
		}
		if _, _, err := c.client.Sandboxes.Recover(ctx, sb.ID, false); err != nil {
			return nil, err
		}
		return c.client.Sandboxes.WaitUntilStarted(ctx, sb.ID)
	}
	for attempt := 0; ; attempt++ {
		if sb.State == daytona.StateStopping || sb.State == daytona.StateStarting || sb.State == daytona.StateRestoring {
			settled, err := d.settle(ctx, c, sb.ID)
			if err != nil {
				return nil, err
			}
			if settled.State == daytona.StateStarted {
				return settled, nil
			}
			sb = settled
		}
		_, _, err := c.client.Sandboxes.Start(ctx, sb.ID)
		if err == nil {
			return c.client.Sandboxes.WaitUntilStarted(ctx, sb.ID)
		}
		if !startRefused(err) {
			return nil, err
		}
		if attempt >= maxStartRetries {
			return nil, fmt.Errorf("Daytona refused to start sandbox %s while it was changing state (service unavailable); the lease was preserved: %w", sb.ID, err)
		}
		sb = &daytona.Sandbox{ID: sb.ID, State: daytona.StateStopping}
	}
}

// settle waits, bounded, until a transitioning sandbox is stopped or started.
func (d *Driver) settle(ctx context.Context, c *conn, id string) (*daytona.Sandbox, error) {
	ctx, cancel := context.WithTimeout(ctx, d.retryW)
	defer cancel()
	return c.client.Sandboxes.WaitForState(ctx, id, daytona.StateStopped, daytona.StateStarted, daytona.StateArchived)
}

// startRefused: 409 "state change in progress" or 400 "not in valid state".
func startRefused(err error) bool {
	var er *daytona.ErrorResponse
	if !errors.As(err, &er) {
		return false
	}
	msg := strings.ToLower(er.Message + " " + er.Reason)
	return er.StatusCode == 409 || (er.StatusCode == 400 && strings.Contains(msg, "state"))
}

func unrecoverable(sb *daytona.Sandbox) error {
	reason := sb.ErrorReason
	if reason == "" {
		reason = "unknown error"
	}
	return fmt.Errorf("Daytona sandbox %s is in an unrecoverable error state: %s", sb.ID, clamp.Echo(reason))
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
		return fmt.Errorf("Daytona rate limit reached: %w", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, daytona.ErrTimeout):
		return fmt.Errorf("Daytona sandbox resume timed out: %w", err)
	case errors.Is(err, daytona.ErrServer):
		return fmt.Errorf("Daytona service unavailable: %w", err)
	case errors.As(err, &ne), errors.As(err, &te):
		// Any failed exchange (a reset, or an EOF that is not a net.Error)
		// proves nothing about the sandbox.
		return fmt.Errorf("Daytona network error: %w", err)
	}
	return err
}

func (d *Driver) realize(ctx context.Context, p rpc.RealizeParams) (rpc.RealizeResult, error) {
	remoteCwd, _ := p.Lease.Metadata["remoteCwd"].(string)
	remoteCwd = strings.TrimSpace(remoteCwd)
	for _, alt := range []*string{p.Workspace.RemotePath, p.Workspace.LocalPath} {
		if remoteCwd == "" {
			remoteCwd = deref(alt)
		}
	}
	if remoteCwd == "" {
		remoteCwd = "/" + workspaceDirName
	}
	res := rpc.RealizeResult{Cwd: remoteCwd, Metadata: map[string]any{"provider": DriverKey, "remoteCwd": remoteCwd}}
	leaseID := deref(p.Lease.ProviderLeaseID)
	if leaseID == "" {
		return res, nil
	}
	c, err := d.connect(p.Config)
	if err != nil {
		return rpc.RealizeResult{}, err
	}
	k := c.scope(p.EnvironmentBase, leaseID)
	ctx, cancel := context.WithTimeout(ctx, c.cfg.AcquireBudget()+startMargin)
	defer cancel()
	err = d.scopes.withActivity(ctx, k, leaseID, false, func(ctx context.Context) error {
		sb, _, err := d.sandbox(ctx, c, k, leaseID)
		if err != nil {
			return err
		}
		if sb.State != daytona.StateStarted {
			// As execute does: a restart destroyed the session, and the
			// cache must not keep the stopped record (the next command
			// would start an already started sandbox again).
			d.work.Forget(string(k))
			if sb, err = d.ensureStarted(ctx, c, sb); err != nil {
				d.handles.evict(k)
				return err
			}
			d.handles.seed(k, sb)
		}
		if _, err := c.client.Files.CreateFolder(ctx, sb.Ref(), remoteCwd, "755"); err != nil {
			return err
		}
		d.handles.markFresh(k)
		return nil
	})
	if err != nil {
		return rpc.RealizeResult{}, err
	}
	return res, nil
}

// sandbox returns the lease's record from the cache (single flight on a
// miss), refreshing an entry idle past half the auto-stop interval
// (docs/behavior.md#handle-cache, docs/behavior.md#stale-handle). A failed refresh evicts and fails closed.
func (d *Driver) sandbox(ctx context.Context, c *conn, k scopeKey, leaseID string) (*daytona.Sandbox, bool, error) {
	fetch := func(ctx context.Context) (*daytona.Sandbox, error) {
		sb, _, err := c.client.Sandboxes.Get(ctx, leaseID)
		return sb, err
	}
	sb, hit, err := d.handles.get(ctx, k, leaseID, fetch)
	if err != nil || !hit {
		return sb, hit, err
	}
	if threshold, ok := config.StaleHandleThreshold(c.cfg); ok && d.handles.stale(k, threshold) {
		var fresh *daytona.Sandbox
		err := c.liveness(ctx, "sandbox.refreshData", 0, func(ctx context.Context) error {
			var err error
			fresh, err = fetch(ctx)
			return err
		})
		if err == nil && fresh.ID != leaseID {
			err = &HandleMismatchError{Got: fresh.ID, Want: leaseID}
		}
		if err != nil {
			d.handles.evict(k)
			return nil, hit, err
		}
		d.handles.seed(k, fresh)
		return fresh, hit, nil
	}
	return sb, hit, nil
}
