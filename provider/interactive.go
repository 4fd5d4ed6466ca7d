package provider

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/clamp"
	"github.com/daytonaworker/daytona-worker/provider/config"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// Interactive setup: the host asks for a sandbox a person connects to over
// SSH to prepare a template, then captures it (template.go) or cancels it.
// The SSH token is the one secret: it is only ever in the connection
// payload the host asked for, never in metadata, summaries, errors or logs.

// SSH access lifetime bounds, in minutes.
const (
	defaultSSHMinutes = 60
	maxSSHMinutes     = 1440
)

// maxTemplateRef is the longest source template ref a setup accepts.
const maxTemplateRef = 1024

// setupCleanupBound bounds the deletion of a setup sandbox whose start
// failed; it runs even when the call's own deadline is spent.
const setupCleanupBound = 30 * time.Second

// fallbackSSHHost is where Daytona's SSH gateway listens, for an SSH access
// answer that carries a token but no command.
const fallbackSSHHost = "ssh.app.daytona.io"

// registerInteractive adds runner ingress, interactive setup and
// templates.
func (d *Driver) registerInteractive(reg *rpc.Registry) {
	reg.Register("environmentRunnerIngressEndpoint", hook(d, d.runnerIngress))
	reg.Register("environmentStartInteractiveSetup", hook(d, d.startInteractiveSetup))
	reg.Register("environmentGetInteractiveSetup", hook(d, d.getInteractiveSetup))
	reg.Register("environmentCancelInteractiveSetup", hook(d, d.cancelInteractiveSetup))
	reg.Register("environmentCaptureTemplate", hook(d, d.captureTemplate))
	reg.Register("environmentDeleteTemplate", hook(d, d.deleteTemplate))
}

// missingSession is the answer for a setup whose sandbox is gone.
func missingSession() *rpc.SetupSession {
	return &rpc.SetupSession{Status: "missing", Metadata: map[string]any{"provider": DriverKey, "missing": true}}
}

func (d *Driver) startInteractiveSetup(ctx context.Context, p rpc.SetupStartParams) (*rpc.SetupSession, error) {
	c, err := d.resolveAccount(p.Config)
	if err != nil {
		return nil, err
	}
	src, err := setupSource(c.cfg, deref(p.SourceTemplateRef), deref(p.SourceTemplateKind))
	if err != nil {
		return nil, err
	}
	ttl, err := c.cfg.CreationTTLMinutes()
	if err != nil {
		return nil, err
	}
	attemptID := cleanup.NewAttemptID()
	labels, err := cleanup.OwnershipLabels(p.CompanyID, p.EnvironmentID, "", attemptID, false)
	if err == nil {
		labels[cleanup.LabelPurpose] = cleanup.PurposeInteractiveSetup
		labels[cleanup.LabelSetupSessionID] = p.SessionID
		err = cleanup.ValidateLabels(labels)
	}
	if err != nil {
		return nil, rpc.InvalidParams("invalid params: %v", err)
	}
	a := &acquisition{d: d, c: c, p: rpc.AcquireParams{EnvironmentBase: p.EnvironmentBase}, start: d.now(),
		budget: c.cfg.AcquireBudget(), phase: phaseCreate}
	a.envelope = cleanup.Envelope{
		ProviderLeaseID: cleanup.CreationName(attemptID), CompanyID: p.CompanyID, EnvironmentID: p.EnvironmentID,
		AttemptID: attemptID, AccountFingerprint: c.fingerprint, Labels: cleanup.CopyLabels(labels),
	}
	ctx, cancel := context.WithTimeout(ctx, a.budget)
	defer cancel()
	sb, err := a.create(ctx, src, labels, ttl)
	if err != nil {
		return nil, err
	}
	k := c.scope(p.EnvironmentBase, sb.ID)
	sess, err := d.describeSetup(ctx, c, sb, true, p.ConnectionExpiresInMinutes)
	if err != nil {
		// Nothing of a failed start may outlive it: delete the sandbox,
		// under a bound of its own (the call's may be what ran out).
		// No lease reaches the host either way, so nothing would ever
		// release the allocation: it goes now, and a sandbox that
		// outlives its delete is named for the operator (it carries the
		// ownership labels, so a sweep finds it).
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), setupCleanupBound)
		defer ccancel()
		derr := cleanup.DeleteAndWait(cctx, c.client.Sandboxes, sb.ID)
		d.idle.release(k)
		if derr != nil {
			d.log.Warn("Failed to delete the Daytona setup sandbox after a failed start.", "sandboxId", sb.ID, "err", derr)
			return nil, errors.Join(err, fmt.Errorf("the setup sandbox %s could not be deleted: %w", sb.ID, derr))
		}
		return nil, err
	}
	d.scopes.open(k)
	d.runner.ReopenLease(string(k))
	d.handles.seed(k, sb)
	sess.Metadata["imageConfigured"] = src.Image != ""
	sess.Metadata["snapshotConfigured"] = src.Snapshot != ""
	sess.Metadata["sourceTemplateRefRedacted"] = deref(p.SourceTemplateRef) != ""
	if ea := deref(p.ExpiresAt); ea != "" {
		sess.ExpiresAt = &ea
	} else if ea, _ := sess.ConnectionPayload["expiresAt"].(string); ea != "" {
		sess.ExpiresAt = &ea
	}
	return sess, nil
}

// setupSource is the creation source of a setup sandbox: the config's,
// unless the host names a source template (a snapshot unless it says
// otherwise), which replaces the config's image or snapshot.
func setupSource(cfg config.Config, ref, kind string) (config.CreateSource, error) {
	if kind == "" {
		kind = "snapshot"
	}
	if kind != "snapshot" && kind != "image" {
		return config.CreateSource{}, rpc.InvalidParams("Daytona interactive setup can start from image or snapshot templates only, not %s.", clamp.Echo(kind))
	}
	if ref == "" {
		return config.RuntimeCreateSource(cfg)
	}
	// An image ref becomes a Dockerfile's FROM line: a line break or any
	// other control character, or a space, would add instructions.
	if len(ref) > maxTemplateRef || strings.IndexFunc(ref, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0 {
		return config.CreateSource{}, rpc.InvalidParams("invalid params: sourceTemplateRef must be one word of at most %d characters without control characters", maxTemplateRef)
	}
	if kind == "image" {
		cfg.Snapshot, cfg.Image = "", ref
	} else {
		cfg.Snapshot, cfg.Image = ref, ""
	}
	return config.RuntimeCreateSource(cfg)
}

// describeSetup prepares the started setup sandbox (workspace and shell)
// and describes it; with mint, it creates an SSH access and returns it in
// the connection payload.
func (d *Driver) describeSetup(ctx context.Context, c *account, sb *daytona.Sandbox, mint bool, minutes *float64) (*rpc.SetupSession, error) {
	out, err := runScript(ctx, c, sb, probeScript, remainingSeconds(ctx))
	if err != nil {
		return nil, err
	}
	ws, err := parseSetup(out)
	if err != nil {
		return nil, err
	}
	sess := &rpc.SetupSession{
		ProviderLeaseID: new(sb.ID),
		Status:          "waiting_for_user",
		Metadata: map[string]any{
			"provider": DriverKey, "sandboxId": sb.ID, "sandboxState": nullable(string(sb.State)),
			"shellCommand": ws.shell, "target": nullable(sb.Target), "timeoutMs": c.cfg.TimeoutMs,
			"remoteCwd": ws.remoteCwd, "connectionRedacted": true,
			"imageConfigured": c.cfg.Image != "", "snapshotConfigured": c.cfg.Snapshot != "" && c.cfg.Image == "",
		},
	}
	n := sshMinutes(minutes)
	summary := map[string]any{"type": "ssh", "username": "token", "hostRedacted": true, "portRedacted": true,
		"commandRedacted": true, "metadata": map[string]any{"provider": DriverKey, "expiresInMinutes": n}}
	sess.ConnectionSummary = summary
	if !mint {
		return sess, nil
	}
	acc, _, err := c.client.Sandboxes.CreateSSHAccess(ctx, sb.ID, n)
	if err != nil {
		return nil, err
	}
	command := acc.SSHCommand
	if command == "" && acc.Token != "" {
		command = "ssh " + acc.Token + "@" + fallbackSSHHost
	}
	if command == "" {
		//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
		return nil, errors.New("Daytona SSH access did not return a token or SSH command.")
	}
	expiresAt := acc.ExpiresAt
	if t, ok := parseTime(expiresAt); ok {
		expiresAt = t.UTC().Format(isoMillis)
	} else {
		expiresAt = d.now().Add(time.Duration(n) * time.Minute).UTC().Format(isoMillis)
	}
	summary["expiresAt"] = expiresAt
	sess.ConnectionPayload = map[string]any{"type": "ssh", "command": command, "token": nullable(acc.Token),
		"expiresAt": expiresAt, "metadata": map[string]any{"provider": DriverKey, "sensitive": true}}
	return sess, nil
}

// isoMillis is JavaScript's Date.prototype.toISOString layout.
const isoMillis = "2006-01-02T15:04:05.000Z"

// sshMinutes is the SSH access lifetime: the requested minutes, truncated
// and clamped to 1..1440, or 60.
func sshMinutes(v *float64) int {
	if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
		return defaultSSHMinutes
	}
	return int(min(max(math.Trunc(*v), 1), maxSSHMinutes))
}

func (d *Driver) getInteractiveSetup(ctx context.Context, p rpc.SetupGetParams) (*rpc.SetupSession, error) {
	id := deref(p.ProviderLeaseID)
	if id == "" {
		return missingSession(), nil
	}
	var sess *rpc.SetupSession
	err := d.withLiveSandbox(ctx, p.EnvironmentBase, id, func(ctx context.Context, c *account, _ scopeKey, sb *daytona.Sandbox) error {
		var err error
		mint := p.IncludeConnectionPayload != nil && *p.IncludeConnectionPayload
		sess, err = d.describeSetup(ctx, c, sb, mint, p.ConnectionExpiresInMinutes)
		return err
	})
	var inactive *LeaseInactiveError
	if errors.As(err, &inactive) {
		// Cancelled (or torn down) on this worker: missing once the
		// sandbox is gone, else the refusal.
		if c, cerr := d.resolveAccount(p.Config); cerr == nil {
			if sb, gerr := c.sandboxOrNil(ctx, id); gerr == nil && sb == nil {
				err = daytona.ErrNotFound
			}
		}
	}
	switch {
	case errors.Is(err, daytona.ErrNotFound):
		return missingSession(), nil
	case err != nil:
		return nil, err
	}
	if ea, _ := sess.ConnectionPayload["expiresAt"].(string); ea != "" {
		sess.ExpiresAt = &ea
	}
	return sess, nil
}

func (d *Driver) cancelInteractiveSetup(ctx context.Context, p rpc.SetupCancelParams) (*rpc.SetupCancelResult, error) {
	id := deref(p.ProviderLeaseID)
	reason := nullable(deref(p.Reason))
	missing := &rpc.SetupCancelResult{Status: "missing", Metadata: map[string]any{"provider": DriverKey, "missing": true, "reason": reason}}
	if id == "" {
		return missing, nil
	}
	t, end, err := d.beginTeardown(rpc.ReleaseParams{EnvironmentBase: p.EnvironmentBase, ProviderLeaseID: &id})
	if err != nil {
		return nil, err
	}
	defer end()
	ctx, cancel := context.WithTimeout(ctx, t.c.cfg.AcquireBudget()+2*startMargin)
	defer cancel()
	d.handles.evict(t.k)
	t.drain(ctx)
	sb, err := t.fresh(ctx, 0)
	if err != nil {
		return nil, err
	}
	if sb == nil {
		t.confirmed(true)
		return missing, nil
	}
	if err := t.deleteAndWait(ctx); err != nil {
		return nil, err
	}
	d.runner.ForgetSessions(string(t.k))
	t.confirmed(true)
	status := "cancelled"
	if deref(p.Reason) == "timed_out" {
		status = "timed_out"
	}
	return &rpc.SetupCancelResult{Status: status, Metadata: map[string]any{"provider": DriverKey, "sandboxId": id, "reason": reason}}, nil
}
