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

// execWork adapts the command runner to the teardown side of [LeaseWork].
type execWork struct{ r *cmdexec.Runner }

func (w execWork) Cancel(k string)                           { w.r.CancelLease(k) }
func (w execWork) Close(ctx context.Context, k string) error { return w.r.CloseLease(ctx, k) }
func (w execWork) Forget(k string)                           { w.r.ForgetSessions(k) }
func (w execWork) Reopen(k string)                           { w.r.ReopenLease(k) }

// reopen lifts a cancellation tombstone of the command runner when a lease
// becomes active again (acquire, resume).
func (d *Driver) reopen(k scopeKey) {
	if r, ok := d.work.(interface{ Reopen(string) }); ok {
		r.Reopen(string(k))
	}
}

func (d *Driver) execute(ctx context.Context, p rpc.ExecuteParams) (rpc.ExecuteResult, error) {
	leaseID := deref(p.Lease.ProviderLeaseID)
	if leaseID == "" {
		// The reference answers a result, not an error.
		return rpc.ExecuteResult{ExitCode: ptr(1), Stderr: "Daytona execute requires a sandbox lease id.\n"}, nil
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
	c, err := d.connect(p.Config)
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
	live := newLogSink(ctx)
	defer live.close() // every chunk precedes the response

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
			d.work.Forget(string(k)) // a restart destroyed the session
			if sb, err = d.ensureStarted(ctx, c, sb); err != nil {
				d.handles.evict(k)
				return err
			}
			d.handles.seed(k, sb)
		}
		sink := cmdexec.Sink(live.write)
		if req.BypassSession {
			// The one-shot API answers once, with everything: streaming that
			// right before the result would only send it twice.
			sink = nil
		}
		res, err = d.exec.Execute(ctx, cmdexec.Target{Client: c.client, Sandbox: sb.Ref(), LeaseKey: string(k)}, req, sink)
		live.close()
		if err == nil && !res.TimedOut {
			d.handles.markFresh(k) // only success proves the sandbox is alive
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

// nulParam is the -32602 answer to a NUL byte in the named param field.
func nulParam(field string) error {
	return rpc.InvalidParams("invalid params: %s contains a NUL byte", field)
}

// shellOf is the lease's shell for host-built scripts (bash or sh).
func shellOf(md map[string]any) string {
	if s, _ := md["shellCommand"].(string); strings.TrimSpace(s) == "bash" {
		return "bash"
	}
	return "sh"
}
