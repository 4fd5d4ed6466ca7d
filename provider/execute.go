package provider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	cmdexec "github.com/daytonaworker/daytona-worker/exec"
	"github.com/daytonaworker/daytona-worker/internal/clamp"
	"github.com/daytonaworker/daytona-worker/provider/config"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// answerMargin is how long before the host's own timeout (command timeout +
// 30 s, docs/host.md#host-timeouts) the worker stops waiting, so the host always gets
// an answer rather than a timeout.
const answerMargin = 15 * time.Second

// commandRunner is what the driver needs of the command runner: run a
// command in a lease's sandbox, and follow the lease's life. Keys are the
// lease scope keys.
type commandRunner interface {
	// Execute runs one command, streaming output to sink when it is not nil.
	Execute(ctx context.Context, t cmdexec.Target, req cmdexec.Request, sink cmdexec.Sink) (cmdexec.Result, error)
	// CancelLease ends in-flight commands of the lease now (cancelActiveWork,
	// stop); later commands fail as no longer active.
	CancelLease(key string)
	// ReopenLease lifts that cancellation when the lease becomes active
	// again (acquire, resume).
	ReopenLease(key string)
	// CloseLease deletes the lease's persistent session.
	CloseLease(ctx context.Context, key string) error
	// ForgetSessions drops the session record: the sandbox restarted.
	ForgetSessions(key string)
}

var _ commandRunner = (*cmdexec.Runner)(nil)

func (d *Driver) execute(ctx context.Context, p rpc.ExecuteParams) (rpc.ExecuteResult, error) {
	leaseID := deref(p.Lease.ProviderLeaseID)
	if leaseID == "" {
		// A result, not an error, with the reference's exact text (no
		// trailing newline): hosts and operators match it.
		return rpc.ExecuteResult{ExitCode: new(1), Stderr: "No provider lease ID available for execution."}, nil
	}
	cwd := deref(p.Cwd)
	cwdField := "cwd"
	if cwd == "" {
		cwd, _ = p.Lease.Metadata["remoteCwd"].(string)
		cwdField = "lease.metadata.remoteCwd"
	}
	if err := rejectNUL(p, cwdField, cwd); err != nil {
		return rpc.ExecuteResult{}, err
	}
	c, err := d.resolveAccount(p.Config)
	if err != nil {
		return rpc.ExecuteResult{}, err
	}
	k := c.scope(p.EnvironmentBase, leaseID)
	timeoutMs := config.ResolveTimeoutMs(p.TimeoutMs, c.cfg)
	timeout := clamp.Millis(timeoutMs)
	ctx, cancel := context.WithTimeout(ctx, timeout+answerMargin)
	defer cancel()
	req := cmdexec.Request{Command: p.Command, Args: p.Args, Cwd: cwd, Env: p.Env, Stdin: p.Stdin,
		Timeout: timeout, BypassSession: p.BypassSession}
	live := rpc.NewLiveLog(ctx)
	defer live.Close(false) // every chunk precedes the response

	var res cmdexec.Result
	var hit bool
	var getDuration time.Duration
	err = d.scopes.withActivity(ctx, k, leaseID, false, func(ctx context.Context) error {
		start := d.now()
		sb, h, err := d.sandbox(ctx, c, k, leaseID)
		getDuration, hit = d.now().Sub(start), h
		if err != nil {
			return err
		}
		if sb.State != daytona.StateStarted {
			d.runner.ForgetSessions(string(k)) // a restart destroyed the session
			if sb, err = d.ensureStarted(ctx, c, sb); err != nil {
				d.handles.evict(k)
				return err
			}
			d.handles.seed(k, sb)
		}
		// A one-shot execute never calls the sink (exec's rule): its output
		// reaches the host once, in the result.
		res, err = d.runner.Execute(ctx, cmdexec.Target{Client: c.client, Sandbox: sb.Ref(), LeaseKey: string(k)}, req, live.Write)
		// With a result, chunks still pending are dropped: the result
		// holds their bytes (the live text stays a prefix of it).
		live.Close(err == nil)
		switch {
		case err == nil && !res.TimedOut:
			d.handles.markFresh(k) // only success proves the sandbox is alive
		case err != nil:
			// A failed call casts doubt on the cached sandbox (stopped
			// behind the worker's back, say): the next call reads it
			// again, and starts it if it must, instead of failing the
			// same way until the handle goes stale.
			d.handles.evict(k)
		}
		return err
	})
	if errors.Is(err, cmdexec.ErrLeaseNotActive) {
		return rpc.ExecuteResult{}, &LeaseInactiveError{LeaseID: leaseID}
	}
	if errors.Is(err, cmdexec.ErrInvalidEnvKey) || errors.Is(err, cmdexec.ErrInvalidRequest) {
		return rpc.ExecuteResult{}, rpc.InvalidParams("%s", clamp.Echo(err.Error()))
	}
	if err != nil {
		return rpc.ExecuteResult{}, err
	}
	md := res.Metadata
	if md == nil {
		md = map[string]any{}
	}
	md["cacheHit"] = hit
	md["getDurationMs"] = getDuration.Milliseconds()
	return rpc.ExecuteResult{ExitCode: res.ExitCode, TimedOut: res.TimedOut, Stdout: res.Stdout, Stderr: res.Stderr, Metadata: md}, nil
}

// rejectNUL refuses a NUL byte anywhere in what becomes the command line,
// its environment or its directory. Neither a shell script nor a process
// argument can carry one, and dropping it silently would run another
// command than asked ("ec\x00ho" ran echo). Env keys are checked by the
// runner, with their own message.
func rejectNUL(p rpc.ExecuteParams, cwdField, cwd string) error {
	if strings.IndexByte(p.Command, 0) >= 0 {
		return nulParam("command")
	}
	for i, a := range p.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return nulParam(fmt.Sprintf("args[%d]", i))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		if strings.IndexByte(p.Env[k], 0) >= 0 {
			return nulParam(fmt.Sprintf("env[%s]", strconv.Quote(clamp.Echo(k))))
		}
	}
	if strings.IndexByte(cwd, 0) >= 0 {
		return nulParam(cwdField)
	}
	return nil
}
