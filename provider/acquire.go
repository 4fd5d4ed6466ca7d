package provider

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/bound"
	"github.com/daytonaworker/daytona-worker/internal/clamp"
	"github.com/daytonaworker/daytona-worker/provider/config"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// Acquisition phases, in order (docs/behavior.md#acquire): the only values
// the host accepts as acquisitionDiagnostic.phase. Inline cleanup is not a
// phase of its own: a budget spent while cleaning up reports the phase whose
// failure started the cleanup.
const (
	phaseCreate    = "create"
	phaseWorkspace = "workspace"
	phaseShell     = "shell"
	phaseExpiry    = "expiry"
	phaseSentinel  = "sentinel"
)

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// acquisition is one fresh acquire: one budget across every phase, and a
// latch so nothing happens once that budget is spent.
type acquisition struct {
	d        *Driver
	c        *account
	p        rpc.AcquireParams
	start    time.Time
	budget   time.Duration
	mu       sync.Mutex
	phase    string
	cleaning bool // inline cleanup of a failed setup is under way
	envelope cleanup.Envelope
}

func (a *acquisition) setPhase(p string) {
	a.mu.Lock()
	a.phase = p
	a.mu.Unlock()
}

// timeoutFailure is the error once the budget is spent: the envelope, so the
// host journals the allocation; never a late admission.
func (a *acquisition) timeoutFailure(cause error) error {
	a.mu.Lock()
	phase, during := a.phase, a.phase
	if a.cleaning {
		during = "cleanup" // the log says what ran; the diagnostic keeps a host phase
	}
	a.mu.Unlock()
	elapsed := a.d.now().Sub(a.start)
	//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
	timeout := fmt.Errorf("Daytona lease acquisition exceeded %d ms during %s", a.budget.Milliseconds(), during)
	a.d.idle.setUncertain(a.envelope.ProviderLeaseID, true)
	return &cleanup.Error{
		Message:    "Daytona lease acquisition timed out; allocation cleanup is pending",
		Envelope:   a.envelope.Clone(),
		Diagnostic: &cleanup.Diagnostic{Phase: phase, ElapsedMs: max(0, elapsed.Milliseconds()), BudgetMs: a.budget.Milliseconds()},
		Causes:     []error{timeout, cause},
	}
}

func (d *Driver) acquire(ctx context.Context, p rpc.AcquireParams) (rpc.Lease, error) {
	c, err := d.resolveAccount(p.Config)
	if err != nil {
		return rpc.Lease{}, err
	}
	src, err := config.RuntimeCreateSource(c.cfg)
	if err != nil {
		return rpc.Lease{}, err
	}
	ttl, err := c.cfg.CreationTTLMinutes()
	if err != nil {
		return rpc.Lease{}, err
	}
	attemptID := cleanup.NewAttemptID()
	if p.CreationOperationID != nil && *p.CreationOperationID != "" {
		if !uuidPattern.MatchString(*p.CreationOperationID) {
			return rpc.Lease{}, rpc.InvalidParams("invalid params: \"creationOperationId\" must be a lowercase UUID")
		}
		attemptID = *p.CreationOperationID
	}
	labels, err := cleanup.OwnershipLabels(p.CompanyID, p.EnvironmentID, p.RunID, attemptID, c.cfg.ReuseLease)
	if err != nil {
		return rpc.Lease{}, rpc.InvalidParams("invalid params: %v", err)
	}
	a := &acquisition{d: d, c: c, p: p, start: d.now(), budget: c.cfg.AcquireBudget(), phase: phaseCreate}
	a.envelope = cleanup.Envelope{
		ProviderLeaseID: cleanup.CreationName(attemptID), CompanyID: p.CompanyID, EnvironmentID: p.EnvironmentID,
		RunID: p.RunID, AttemptID: attemptID, AccountFingerprint: c.fingerprint, Labels: cleanup.CopyLabels(labels),
	}
	ctx, cancel := context.WithTimeout(ctx, a.budget)
	defer cancel()

	sb, err := a.create(ctx, src, labels, ttl)
	if err != nil {
		return rpc.Lease{}, err
	}
	lease, setupErr := a.setup(ctx, sb)
	if setupErr == nil {
		return lease, nil
	}
	if ctx.Err() != nil {
		// Spent: a late reply starts nothing and deletes nothing.
		return rpc.Lease{}, a.timeoutFailure(setupErr)
	}
	// Inline cleanup inside the same budget; an unconfirmed deletion hands
	// the allocation to the host.
	a.mu.Lock()
	a.cleaning = true
	a.mu.Unlock()
	if derr := cleanup.DeleteAndWait(ctx, c.client.Sandboxes, sb.ID); derr != nil {
		if ctx.Err() != nil {
			return rpc.Lease{}, a.timeoutFailure(errors.Join(setupErr, derr))
		}
		d.idle.setUncertain(a.envelope.ProviderLeaseID, true)
		return rpc.Lease{}, &cleanup.Error{
			Message:  "Daytona lease setup failed; allocation cleanup is pending",
			Envelope: a.envelope.Clone(), Causes: []error{setupErr, derr},
		}
	}
	d.idle.release(c.scope(p.EnvironmentBase, sb.ID)) // deleted and gone: no allocation left
	return rpc.Lease{}, setupErr
}

// create makes the sandbox under the attempt's unique name and waits until
// it runs. A failure that may have allocated something is cleaned up by name
// and label, or handed to the host as an envelope.
func (a *acquisition) create(ctx context.Context, src config.CreateSource, labels map[string]string, ttl int64) (*daytona.Sandbox, error) {
	cfg := a.c.cfg
	req := &daytona.CreateSandboxRequest{
		Name:                a.envelope.ProviderLeaseID,
		Labels:              cleanup.CopyLabels(labels), // the client or server may add labels; ownership checks use ours
		AutoStopInterval:    new(int(config.EffectiveAutoStopMinutes(cfg, cfg.ReuseLease, 0))),
		AutoArchiveInterval: new(int(cfg.AutoArchiveInterval)),
		AutoDeleteInterval:  new(int(cfg.AutoDeleteInterval)),
	}
	if cfg.Language != "" {
		req.Labels["code-toolbox-language"] = cfg.Language // what the SDKs send for a language hint
	}
	if ttl > 0 {
		req.TTLMinutes = new(int(ttl))
	}
	switch {
	case src.Image != "":
		req.Image = src.Image
		if r := src.Resources; r != nil {
			req.CPU, req.Memory, req.Disk, req.GPU = wholeUnits(r.CPU), wholeUnits(r.Memory), wholeUnits(r.Disk), wholeUnits(r.GPU)
		}
	case src.Snapshot != "":
		req.Snapshot = src.Snapshot
	}
	sb, _, err := a.c.client.Sandboxes.Create(ctx, req)
	if err == nil && sb.State != daytona.StateStarted {
		a.envelope.ObservedProviderLeaseID = sb.ID
		var waited *daytona.Sandbox
		waited, err = a.c.client.Sandboxes.WaitUntilStarted(ctx, sb.ID)
		if err == nil {
			sb = waited
		} else if ctx.Err() == nil {
			return nil, a.failedAfterCreate(ctx, sb, err)
		}
	}
	switch {
	case err == nil:
		a.envelope.ObservedProviderLeaseID = sb.ID
		a.d.idle.allocate(a.c.scope(a.p.EnvironmentBase, sb.ID))
		return sb, nil
	case ctx.Err() != nil:
		return nil, a.timeoutFailure(err)
	case errors.Is(err, daytona.ErrConflict):
		return nil, a.nameTaken(ctx, err)
	case errors.Is(err, daytona.ErrUnreachable):
		// The request never left this machine: nothing can exist, and a
		// cleanup envelope would only make a wrong apiUrl look like a leak.
		return nil, newUnreachableError(err)
	case definitiveRejection(err):
		// Daytona refused the request itself: nothing was allocated.
		return nil, err
	}
	// Uncertain: the sandbox may exist. Find it by its exact name and labels
	// and delete it, or report the allocation.
	env := a.envelope.Clone()
	cerr := cleanup.DestroyFailedCreation(ctx, a.c.client.Sandboxes, a.c.fingerprint, &env, cleanup.Options{})
	if cerr == nil {
		return nil, err // cleanup confirmed: the original create error
	}
	if ctx.Err() != nil {
		a.envelope = env
		return nil, a.timeoutFailure(errors.Join(err, cerr))
	}
	a.d.idle.setUncertain(env.ProviderLeaseID, true)
	return nil, &cleanup.Error{
		Message:  "Daytona sandbox creation failed; cleanup could not be confirmed for " + env.ProviderLeaseID,
		Envelope: env, Causes: []error{err, cerr},
	}
}

// failedAfterCreate handles a created sandbox that never became usable.
func (a *acquisition) failedAfterCreate(ctx context.Context, sb *daytona.Sandbox, cause error) error {
	if derr := cleanup.DeleteAndWait(ctx, a.c.client.Sandboxes, sb.ID); derr != nil {
		if ctx.Err() != nil {
			return a.timeoutFailure(errors.Join(cause, derr))
		}
		a.d.idle.setUncertain(a.envelope.ProviderLeaseID, true)
		return &cleanup.Error{Message: "Daytona lease setup failed; allocation cleanup is pending",
			Envelope: a.envelope.Clone(), Causes: []error{cause, derr}}
	}
	a.d.idle.release(a.c.scope(a.p.EnvironmentBase, sb.ID))
	return cause
}

// nameTaken: the operation's name exists already (a retried creation
// operation, or a create whose reply was lost). Never create under another
// name; prove ownership and hand the existing allocation to the host.
func (a *acquisition) nameTaken(ctx context.Context, cause error) error {
	var sb *daytona.Sandbox
	err := bound.Call(ctx, "sandbox.failedCreateLookup", cleanup.LookupBound, func(ctx context.Context) error {
		var err error
		sb, _, err = a.c.client.Sandboxes.Get(ctx, a.envelope.ProviderLeaseID)
		return err
	})
	env := a.envelope.Clone()
	switch {
	case err == nil && cleanup.Verify(sb, &env) == nil:
		env.ObservedProviderLeaseID = sb.ID
	case err == nil, errors.Is(err, daytona.ErrNotFound):
		// Someone else's sandbox holds the name (or it vanished): nothing
		// of ours to report.
		//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
		return fmt.Errorf("Daytona sandbox name %s is already taken and could not be proven to belong to this creation operation", env.ProviderLeaseID)
	}
	// Ours, or (lookup failed) quite possibly ours: the host journals it.
	a.d.idle.setUncertain(env.ProviderLeaseID, true)
	return &cleanup.Error{
		Message:  "Daytona sandbox " + env.ProviderLeaseID + " already exists for this creation operation; cleanup is pending",
		Envelope: env, Causes: []error{cause, err},
	}
}

// UnreachableError: a create (or probe) that never reached Daytona — the
// name did not resolve, the connection was refused, the TLS handshake
// failed — so nothing was allocated. It names the API URL (never with
// credentials or a query) and the cause.
type UnreachableError struct {
	URL    string
	Reason string
	cause  error
}

func newUnreachableError(err error) *UnreachableError {
	e := &UnreachableError{URL: daytona.DefaultAPIURL, Reason: "unknown error", cause: err}
	var te *daytona.TransportError
	if errors.As(err, &te) {
		if te.BaseURL != "" {
			e.URL = te.BaseURL
		}
		e.Reason = te.Reason()
	}
	return e
}

func (e *UnreachableError) Error() string {
	return "cannot reach Daytona at " + clamp.Echo(e.URL) + ": " + clamp.Echo(e.Reason)
}

func (e *UnreachableError) Unwrap() error { return e.cause }

// definitiveRejection: a 4xx answer (not a timeout) means Daytona refused
// the create before allocating anything.
func definitiveRejection(err error) bool {
	var er *daytona.ErrorResponse
	if errors.As(err, &er) {
		return er.StatusCode >= 400 && er.StatusCode < 500 && er.StatusCode != 408 && er.StatusCode != 409
	}
	var rl *daytona.RateLimitError
	return errors.As(err, &rl)
}

// setup prepares the created sandbox and admits the lease.
func (a *acquisition) setup(ctx context.Context, sb *daytona.Sandbox) (rpc.Lease, error) {
	c, p := a.c, a.p
	in := sentinelInputs{
		companyID: p.CompanyID, environmentID: p.EnvironmentID, agentID: deref(p.AgentID),
		executionWorkspaceID: deref(p.ExecutionWorkspaceID), issueID: deref(p.IssueID), adapterType: deref(p.AdapterType),
		runID: p.RunID, sandboxID: sb.ID, reuse: c.cfg.ReuseLease, cfg: c.cfg,
	}
	token := sentinelToken(in)
	a.setPhase(phaseWorkspace)
	out, err := runScript(ctx, c, sb, workspaceScript, remainingSeconds(ctx))
	if err != nil {
		return rpc.Lease{}, err
	}
	ws, err := parseSetup(out)
	if err != nil {
		return rpc.Lease{}, err
	}
	if ctx.Err() != nil {
		return rpc.Lease{}, ctx.Err()
	}
	a.setPhase(phaseShell)
	// Any failure of the detection means sh, as in the reference; a spent
	// budget is caught by the check below.
	out, err = runScript(ctx, c, sb, shellScript, remainingSeconds(ctx))
	if ws.shell = "sh"; err == nil {
		ws.shell = parseShell(out)
	}
	if ctx.Err() != nil {
		return rpc.Lease{}, ctx.Err()
	}
	a.setPhase(phaseExpiry)
	expiresAt, err := a.configureExpiry(ctx, sb)
	if err != nil {
		return rpc.Lease{}, err
	}
	if ctx.Err() != nil {
		return rpc.Lease{}, ctx.Err()
	}
	a.setPhase(phaseSentinel)
	if token != "" {
		file := sentinelFile(in, token, a.d.now().UTC().Format(time.RFC3339Nano))
		if _, err := runScript(ctx, c, sb, sentinelScript(path.Join(ws.remoteCwd, sentinelRelPath), file), remainingSeconds(ctx)); err != nil {
			return rpc.Lease{}, err
		}
		if ctx.Err() != nil {
			return rpc.Lease{}, ctx.Err()
		}
	}
	sentinel := map[string]any{"path": path.Join(ws.remoteCwd, sentinelRelPath), "token": nil, "result": "skipped"}
	if token != "" {
		sentinel["token"], sentinel["result"] = token, "written"
		if !c.cfg.ReuseLease {
			sentinel["runId"], sentinel["providerLeaseId"] = p.RunID, sb.ID
		}
	}
	md := leaseMetadata(c.cfg, sb, ws, false, "", sentinel)
	k := c.scope(p.EnvironmentBase, sb.ID)
	a.d.scopes.open(k)
	a.d.runner.ReopenLease(string(k))
	a.d.handles.seed(k, sb)
	a.d.remember(c, k, sb, ws.remoteCwd)
	return rpc.Lease{ProviderLeaseID: new(sb.ID), Metadata: md, ExpiresAt: expiresAt}, nil
}

// configureExpiry honours ttlMinutes and requestedExpiresAt
// (docs/behavior.md#expiry, docs/behavior.md#ttl): the earlier deadline wins, and an
// expiry is reported only once Daytona confirms it.
func (a *acquisition) configureExpiry(ctx context.Context, sb *daytona.Sandbox) (*string, error) {
	ttl, _ := a.c.cfg.CreationTTLMinutes()
	var created *time.Time
	if ttl > 0 {
		t, ok := parseTime(sb.AutoDestroyAt)
		if !ok {
			fresh, _, err := a.c.client.Sandboxes.Get(ctx, sb.ID)
			if err != nil {
				return nil, err
			}
			if t, ok = parseTime(fresh.AutoDestroyAt); !ok {
				//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
				return nil, fmt.Errorf("Daytona did not confirm the %d-minute lifetime of sandbox %s", ttl, sb.ID)
			}
		}
		// The expiry Daytona set is verified, not only read: one later
		// than the configured lifetime (a minute's slack for the clocks)
		// would outlive what the operator asked for.
		if latest := a.d.now().Add(time.Duration(ttl+1) * time.Minute); t.After(latest) {
			return nil, fmt.Errorf("sandbox %s expires at %s by Daytona's clock, later than its configured %d-minute lifetime", sb.ID, t.UTC().Format(time.RFC3339), ttl)
		}
		created = &t
	}
	requested, ok := parseTime(deref(a.p.RequestedExpiresAt))
	if !ok {
		return formatTime(created), nil
	}
	if created != nil && !created.After(requested) {
		return formatTime(created), nil // the creation expiry is already earlier
	}
	minutes := int(math.Floor(requested.Sub(a.d.now()).Minutes())) // round down: never after the deadline
	if minutes < 1 {
		return nil, nil
	}
	if _, _, err := a.c.client.Sandboxes.SetTTL(ctx, sb.ID, minutes); err != nil {
		return nil, err
	}
	fresh, _, err := a.c.client.Sandboxes.Get(ctx, sb.ID)
	if err != nil {
		return nil, err
	}
	t, ok := parseTime(fresh.AutoDestroyAt)
	if !ok || t.After(requested) {
		return nil, nil // unconfirmed: the host fails closed
	}
	return formatTime(&t), nil
}

// leaseMetadata is the lease metadata of docs/behavior.md#acquire. It never
// carries host-owned keys (docs/host.md#lease) and config keys keep their
// saved values, so reuse matching still works.
func leaseMetadata(cfg config.Config, sb *daytona.Sandbox, ws setupResult, resumed bool, resumedFrom string, sentinel map[string]any) map[string]any {
	md := config.LeaseMetadata(cfg)
	md["provider"] = DriverKey
	md["shellCommand"] = ws.shell
	md["sandboxId"] = sb.ID
	md["sandboxName"] = sb.Name
	md["sandboxState"] = nullable(string(sb.State))
	md["target"] = nullable(sb.Target)
	md["remoteCwd"] = ws.remoteCwd
	md["resumedLease"] = resumed
	if resumedFrom != "" {
		md["resumedFromState"] = resumedFrom
	}
	if sentinel != nil {
		md["workspaceSentinel"] = sentinel
	}
	return md
}

func remainingSeconds(ctx context.Context) int64 {
	if dl, ok := ctx.Deadline(); ok {
		return config.ToTimeoutSeconds(max(1, time.Until(dl).Milliseconds()))
	}
	return config.ToTimeoutSeconds(config.DefaultTimeoutMs)
}

func wholeUnits(v *float64) int {
	if v == nil {
		return 0
	}
	return int(math.Ceil(*v)) // Daytona takes whole units; never under-provision
}

func parseTime(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

func formatTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	return new(t.UTC().Format(time.RFC3339Nano))
}
