package provider

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/provider/config"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// probeWindow is the part of the host's 120 s probe timeout the worker uses;
// the checks get all of it but probeDeleteReserve, and the deletion what is
// left (at least probeDeleteMin).
const (
	probeWindow        = 115 * time.Second
	probeDeleteReserve = 15 * time.Second
	probeDeleteMin     = 5 * time.Second
)

// probe creates a throwaway sandbox, checks it and always deletes it. It
// never throws: failures are ok:false with a secret-free summary.
func (d *Driver) probe(ctx context.Context, p rpc.EnvironmentBase) (rpc.ProbeResult, error) {
	c, err := d.resolveAccount(p.Config)
	if err != nil {
		return probeFailure(ParseConfigOrDefault(p.Config), err), nil
	}
	started := d.now()
	budget := min(c.cfg.AcquireBudget(), probeWindow-probeDeleteReserve)
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	src, err := config.RuntimeCreateSource(c.cfg)
	if err != nil {
		return probeFailure(c.cfg, err), nil
	}
	ttl, _ := c.cfg.CreationTTLMinutes()
	attemptID := cleanup.NewAttemptID()
	labels, err := cleanup.OwnershipLabels(p.CompanyID, p.EnvironmentID, "", attemptID, c.cfg.ReuseLease)
	if err != nil {
		return probeFailure(c.cfg, err), nil
	}
	a := &acquisition{d: d, c: c, p: rpc.AcquireParams{EnvironmentBase: p}, start: d.now(), budget: budget, phase: phaseCreate}
	a.envelope = cleanup.Envelope{ProviderLeaseID: cleanup.CreationName(attemptID), CompanyID: p.CompanyID,
		EnvironmentID: p.EnvironmentID, AttemptID: attemptID, AccountFingerprint: c.fingerprint, Labels: cleanup.CopyLabels(labels)}
	sb, err := a.create(ctx, src, labels, ttl)
	if err != nil {
		return probeFailure(c.cfg, err), nil
	}
	defer func() {
		// Always delete, with a fresh bound: the probe's own may be spent.
		// The host waits 120 s for a probe: the deletion gets what is left
		// of that (at least 5 s); an unfinished wait leaves a delete that
		// Daytona is already carrying out, and is logged.
		left := max(probeDeleteMin, probeWindow-d.now().Sub(started))
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), left)
		defer cancel()
		if err := cleanup.DeleteAndWait(dctx, c.client.Sandboxes, sb.ID); err != nil {
			d.log.Warn("probe sandbox deletion failed", "sandboxId", sb.ID, "err", err)
		} else {
			d.idle.release(c.scope(p, sb.ID))
		}
	}()
	out, err := runScript(ctx, c, sb, probeScript, remainingSeconds(ctx))
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
