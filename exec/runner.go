package exec

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"path"
	"strings"
	stdsync "sync"
	"time"

	"github.com/google/uuid"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/clamp"
)

// Target says where a command runs.
type Target struct {
	// Client talks to the lease's Daytona account.
	Client *daytona.Client
	// Sandbox is the started sandbox's toolbox address.
	Sandbox daytona.SandboxRef
	// LeaseKey identifies the lease (the provider's scope key): sessions,
	// cancellation and teardown are per key. Required unless BypassSession.
	LeaseKey string
}

// Request is one command (docs/host.md#execute environmentExecute params).
type Request struct {
	// Command and Args form an argv; each element is shell-quoted.
	Command string
	Args    []string
	// Cwd is entered after profile sourcing ("" = the shell's directory).
	Cwd string
	// Env is added to the non-interactive git defaults (and overrides them).
	Env map[string]string
	// Stdin, when non-nil, is uploaded to a temporary file and redirected;
	// the file is always removed afterwards.
	Stdin *string
	// Timeout is the effective timeout (resolveTimeoutMs of docs/behavior.md#small-functions); git
	// network commands are capped at GitNetworkTimeout. It is the command
	// deadline, counted from the start of Execute, that ends every phase
	// (stream, reads after a close, polling fallback), and the bound of
	// every observation read. 0 means none (the caller's context still
	// applies).
	Timeout time.Duration
	// BypassSession runs the command one-shot without opening the lease's
	// session (provisioning and control commands).
	BypassSession bool
}

// Result is what the host receives (docs/host.md#execute).
type Result struct {
	// ExitCode is nil when the command timed out or its exit is unknown.
	ExitCode *int
	TimedOut bool
	Stdout   string
	Stderr   string
	// Metadata: durationMs always; on timeouts timeoutScope ("command" or
	// "session_log_observation"), commandExitConfirmed and, if known,
	// observedExitCode; outputTruncated when a stream hit the cap;
	// logStream ("fast_path", "followed", "polled", "one_shot") says how the
	// output was observed.
	Metadata map[string]any
}

// Sink receives the live output of the session path (a one-shot execute
// never calls it: its output arrives once, in the result): stream is
// StreamStdout or StreamStderr, text
// is non-empty, never splits a UTF-8 character and is at most 512 KiB.
// Calls are sequential, in order, and all return before Execute does; the
// concatenation per stream is a prefix of the final Stdout/Stderr. Only
// output that arrives while the command runs is sent: what arrives with
// its end (its end markers, or after its exit was read) is in the result
// only. A
// non-nil error stops live output for this execute (the result is
// unaffected).
type Sink func(stream, text string) error

// Options configure a Runner. The zero value is usable.
type Options struct {
	// Clock is the time source (default RealClock).
	Clock Clock
	// OutputCap is the per-stream result cap in host characters
	// (default DefaultOutputCap).
	OutputCap int64
	// Logger receives teardown failures (default: discarded).
	Logger *slog.Logger
}

// Timing constants of the session path (docs/behavior.md#session-path, docs/behavior.md#exited-fast-path, docs/behavior.md#silent-socket).
const (
	PollInterval      = time.Second
	FastPathBound     = 500 * time.Millisecond
	SilentSocketLimit = 15 * time.Second
	// cleanupBound limits stdin removal and session deletion.
	cleanupBound = 10 * time.Second
)

var (
	exitRetryDelays   = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	maxStreamAttempts = 2 // the first connection and one reconnect
	sessionIDPrefix   = "paperclip-"
	stdinFilePrefix   = "paperclip-stdin-"
	stdinDir          = "/tmp" // stdin files are /tmp/paperclip-stdin-<uuid>, as the reference stages them
	discardLogger     = slog.New(slog.DiscardHandler)
)

// Runner executes commands; one per worker process, safe for concurrent
// use. It keeps per-lease state in memory only: the persistent session
// (opened once, single-flight), sessions retired after a timeout, and the
// cancellation tombstone.
type Runner struct {
	clock Clock
	cap   int64
	log   *slog.Logger

	mu     stdsync.Mutex
	leases map[string]*lease
	seed   maphash.Seed // of the command lines' hashes (plan.go)
}

// commandKey is the hash under which a command line's last run is kept
// (plan.go): the script without its stdin redirection.
func (r *Runner) commandKey(script commandScript) uint64 {
	return maphash.String(r.seed, script.line())
}

// NewRunner returns a Runner.
func NewRunner(o Options) *Runner {
	r := &Runner{clock: o.Clock, cap: o.OutputCap, log: o.Logger,
		leases: map[string]*lease{}, seed: maphash.MakeSeed()}
	if r.clock == nil {
		r.clock = RealClock{}
	}
	if r.cap <= 0 {
		r.cap = DefaultOutputCap
	}
	if r.log == nil {
		r.log = discardLogger
	}
	return r
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Execute runs one command and returns its result. Live output goes to
// sink (may be nil). A non-zero exit is a normal result; a timeout is a
// result with TimedOut. Errors mean the command could not be run or
// observed: invalid input (ErrInvalidEnvKey, ErrInvalidRequest, before any
// provider call), a cancelled lease (ErrLeaseNotActive), an uncertain
// dispatch (ErrDispatchUncertain), the caller's context, or a provider
// error (daytona sentinels). With an error the returned Result still holds
// the output collected (and streamed) so far.
func (r *Runner) Execute(ctx context.Context, t Target, req Request, sink Sink) (Result, error) {
	if err := validateEnv(req.Env); err != nil {
		return Result{}, err
	}
	switch {
	case t.Client == nil:
		return Result{}, invalid("no Daytona client")
	case t.Sandbox.ID == "":
		return Result{}, invalid("no sandbox")
	case strings.TrimSpace(req.Command) == "":
		return Result{}, invalid("empty command")
	case !req.BypassSession && t.LeaseKey == "":
		return Result{}, invalid("the session path needs a lease key")
	}
	if req.BypassSession {
		// The one-shot API answers once, with all the output: forwarding it
		// live just before the result would give it to the host twice.
		sink = nil
	}
	x := &run{r: r, t: t, req: req, start: r.clock.Now(), out: newOutput(sink, r.cap)}
	base, cancel := context.WithCancelCause(ctx)
	defer cancel(context.Canceled)
	if t.LeaseKey != "" {
		l, err := r.enter(t.LeaseKey)
		if err != nil {
			return Result{}, err
		}
		defer r.leave(l)
		x.lease = l
		stop := context.AfterFunc(l.ctx, func() { cancel(context.Cause(l.ctx)) })
		defer stop()
	}
	x.ctx = base
	x.eff = min(req.Timeout, clamp.MaxDuration) // a huge timeout must not overflow a deadline
	if isGitNetworkCommand(req.Command, req.Args) {
		x.git = true
		if x.eff <= 0 || x.eff > GitNetworkTimeout {
			x.eff = GitNetworkTimeout
		}
	}
	cmdCtx, cmdCancel := withBound(base, r.clock, x.eff, errCommandDeadline)
	defer cmdCancel()
	x.cmdCtx = cmdCtx

	stdinPath := ""
	if req.Stdin != nil {
		stdinPath = path.Join(stdinDir, stdinFilePrefix+uuid.NewString())
		// Removed whatever happens, even after a failed or partial upload.
		defer func() {
			dctx, cancel := withBound(context.WithoutCancel(ctx), r.clock, cleanupBound, context.DeadlineExceeded)
			defer cancel()
			_, _ = t.Client.Files.Delete(dctx, t.Sandbox, stdinPath, false)
		}()
		if _, err := t.Client.Files.UploadFile(cmdCtx, t.Sandbox, stdinPath, strings.NewReader(*req.Stdin)); err != nil {
			if cmdCtx.Err() != nil {
				return x.stopped(context.Cause(cmdCtx))
			}
			return Result{}, fmt.Errorf("exec: upload stdin: %w", err)
		}
	}
	x.script = buildScript(req.Command, req.Args, req.Cwd, req.Env, stdinPath)
	x.key = r.commandKey(x.script)
	var res Result
	var err error
	if req.BypassSession {
		res, err = x.oneShot()
	} else {
		res, err = x.inSession()
	}
	return res, err
}
