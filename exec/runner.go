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
	"github.com/daytonaworker/daytona-worker/internal/span"
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
	// FollowFirstBelow: a dispatch answered within this long means a
	// network so close that a log snapshot right after it would come
	// before bash has run the command, so the follow is opened at once
	// (docs/exec.md#follow-first). 0 = always snapshot first.
	FollowFirstBelow time.Duration
	// TimeFirstRead times a command's first log read for when a short
	// command on the same lease has ended, learned from the run times the
	// end markers carry (docs/exec.md#timed-first-read); false = read at
	// once (the exec tests pin the paths that way, their clock is fake).
	TimeFirstRead bool
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
	// followFirst is Options.FollowFirstBelow.
	followFirst time.Duration
	// timeFirstRead is Options.TimeFirstRead.
	timeFirstRead bool

	mu     stdsync.Mutex
	leases map[string]*lease
	seed   maphash.Seed // of the command lines' hashes (settle.go)
}

// commandKey is the hash under which a command line's run times are kept
// (settle.go): the script without its stdin redirection.
func (r *Runner) commandKey(script commandScript) uint64 {
	return maphash.String(r.seed, script.line())
}

// NewRunner returns a Runner.
func NewRunner(o Options) *Runner {
	r := &Runner{clock: o.Clock, cap: o.OutputCap, log: o.Logger,
		followFirst: o.FollowFirstBelow, timeFirstRead: o.TimeFirstRead, leases: map[string]*lease{}, seed: maphash.MakeSeed()}
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

type lease struct {
	key      string
	ctx      context.Context
	cancel   context.CancelCauseFunc
	inactive bool
	cur      *session
	flight   *flight
	all      map[*session]struct{}
	active   int
	runs     runTimes
}

type session struct {
	id      string
	ref     daytona.SandboxRef
	client  *daytona.Client
	users   int
	retired bool // takes no new command; deleted when unused
	gone    bool // died with its sandbox: nothing to delete
	deleted bool
	// closing is closed when a delete made after its last use ends
	// (releaseSession); nil while no such delete runs.
	closing chan struct{}
}

type flight struct {
	done chan struct{}
	err  error
	// abandoned: the creating execute's own context ended; waiters whose
	// contexts are fine try again instead of failing.
	abandoned bool
}

func (r *Runner) newLeaseLocked(key string) *lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &lease{key: key, ctx: ctx, cancel: cancel, all: map[*session]struct{}{}}
	r.leases[key] = l
	return l
}

// enter admits an execute on a lease, or refuses it after CancelLease.
func (r *Runner) enter(key string) (*lease, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.leases[key]
	if l == nil {
		l = r.newLeaseLocked(key)
	}
	if l.inactive {
		return nil, &LeaseNotActiveError{LeaseKey: key}
	}
	l.active++
	return l, nil
}

func (r *Runner) leave(l *lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.active--
	r.gcLocked(l)
}

// gcLocked drops an idle lease entry that holds nothing worth keeping.
func (r *Runner) gcLocked(l *lease) {
	if l.active == 0 && !l.inactive && l.cur == nil && l.flight == nil && len(l.all) == 0 && r.leases[l.key] == l {
		delete(r.leases, l.key)
		l.cancel(context.Canceled)
	}
}

// CancelLease is releaseLease{cancelActiveWork}: in-flight executes on the
// lease end promptly (with their partial output and an error matching
// ErrLeaseNotActive), and every later Execute on the key fails with that
// error until ReopenLease. The session id is forgotten (the provider is
// stopping the sandbox); CloseLease still tries to delete it.
func (r *Runner) CancelLease(leaseKey string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.leases[leaseKey]
	if l == nil {
		l = r.newLeaseLocked(leaseKey)
	}
	l.inactive = true
	l.cur = nil
	l.cancel(&LeaseNotActiveError{LeaseKey: leaseKey})
}

// ReopenLease clears a CancelLease tombstone (a later acquire or resume
// of the same lease made it active again).
func (r *Runner) ReopenLease(leaseKey string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.leases[leaseKey]
	if l == nil || !l.inactive {
		return
	}
	l.inactive = false
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	r.gcLocked(l)
}

// LeaseActive reports whether Execute would admit a command on the key.
func (r *Runner) LeaseActive(leaseKey string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.leases[leaseKey]
	return l == nil || !l.inactive
}

// ForgetSessions drops the lease's session ids without deleting anything:
// the sandbox was found not started, and a restart destroys sessions
// (docs/behavior.md#sessions). The next command opens a new session.
func (r *Runner) ForgetSessions(leaseKey string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.leases[leaseKey]
	if l == nil {
		return
	}
	for s := range l.all {
		s.gone = true
		s.retired = true
	}
	l.all = map[*session]struct{}{}
	l.cur = nil
	r.gcLocked(l)
}

// SessionID returns the lease's current session id ("" if none).
func (r *Runner) SessionID(leaseKey string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.leases[leaseKey]; l != nil && l.cur != nil {
		return l.cur.id
	}
	return ""
}

// CloseLease tears down the lease's sessions (release, stop, destroy,
// interactive cancel): the ids are cleared first, so a late answer cannot
// clear a newer session, then each is deleted. Failures are returned
// joined, each as "Failed to delete Daytona session <id> during teardown:
// <msg>", and logged; callers log them and carry on (never fatal). A
// CancelLease tombstone survives CloseLease.
func (r *Runner) CloseLease(ctx context.Context, leaseKey string) error {
	r.mu.Lock()
	l := r.leases[leaseKey]
	if l == nil {
		r.mu.Unlock()
		return nil
	}
	var todo []*session
	var closing []chan struct{}
	for s := range l.all {
		if !s.deleted && !s.gone {
			s.deleted = true
			todo = append(todo, s)
		}
		if s.closing != nil {
			closing = append(closing, s.closing)
		}
		s.retired = true
	}
	l.all = map[*session]struct{}{}
	l.cur = nil
	r.gcLocked(l)
	r.mu.Unlock()

	var errs []error
	for _, s := range todo {
		if err := r.deleteSession(ctx, s); err != nil {
			errs = append(errs, err)
		}
	}
	// A retired session's delete still under way is part of the teardown.
	for _, c := range closing {
		select {
		case <-c:
		case <-ctx.Done():
			return errors.Join(append(errs, context.Cause(ctx))...)
		}
	}
	return errors.Join(errs...)
}

func (r *Runner) deleteSession(ctx context.Context, s *session) error {
	sp := span.Start(ctx, "session.close")
	_, err := s.client.Toolbox.DeleteSession(ctx, s.ref, s.id)
	if errors.Is(err, daytona.ErrNotFound) {
		err = nil // already gone: the goal of the delete holds
	}
	sp.End(err)
	if err != nil {
		r.log.Error("Failed to delete Daytona session during teardown", "sessionId", s.id, "error", err.Error())
		return fmt.Errorf("Failed to delete Daytona session %s during teardown: %w", s.id, err)
	}
	return nil
}

// acquireSession returns the lease's session for this sandbox, creating it
// once even when several first commands arrive together (single-flight).
// A failed create is not remembered: the next command retries.
func (r *Runner) acquireSession(ctx context.Context, l *lease, t Target) (*session, error) {
	for {
		r.mu.Lock()
		if l.inactive {
			r.mu.Unlock()
			return nil, &LeaseNotActiveError{LeaseKey: l.key}
		}
		if s := l.cur; s != nil {
			if s.ref.ID == t.Sandbox.ID {
				s.users++
				r.mu.Unlock()
				return s, nil
			}
			// A different sandbox under the same key: never reuse.
			s.retired = true
			l.cur = nil
		}
		if f := l.flight; f != nil {
			r.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
			if f.err != nil {
				if f.abandoned && ctx.Err() == nil {
					continue // the creator gave up, not us
				}
				return nil, f.err
			}
			continue
		}
		f := &flight{done: make(chan struct{})}
		l.flight = f
		r.mu.Unlock()

		id := sessionIDPrefix + uuid.NewString()
		sp := span.Start(ctx, "session.open") // a failed create marks it failed
		_, err := t.Client.Toolbox.CreateSession(ctx, t.Sandbox, id)
		sp.End(err)
		abandoned := false
		if err != nil && ctx.Err() != nil {
			err = context.Cause(ctx)
			abandoned = true
		}
		r.mu.Lock()
		l.flight = nil
		f.abandoned = abandoned
		if err == nil {
			s := &session{id: id, ref: t.Sandbox, client: t.Client}
			l.all[s] = struct{}{}
			if l.inactive {
				s.retired = true // CloseLease deletes it
				err = &LeaseNotActiveError{LeaseKey: l.key}
			} else {
				l.cur = s
			}
		}
		f.err = err
		close(f.done)
		r.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("exec: open session: %w", err)
		}
	}
}

// releaseSession ends one command's use of s. retire takes s out of
// service (a command that may still run in it timed out): it is deleted —
// which kills that command — once no other execute uses it. The delete
// runs after the execute has answered: the daemon gives a command that
// ignores SIGTERM 5 s before SIGKILL, and a timed-out command's answer
// must not wait for that (docs/exec.md#timeouts-and-cancellation). CloseLease waits for it.
func (r *Runner) releaseSession(ctx context.Context, l *lease, s *session, retire bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.users--
	if retire {
		s.retired = true
		if l.cur == s {
			l.cur = nil
		}
	}
	if !s.retired || s.users != 0 || s.gone || s.deleted || l.inactive {
		return
	}
	s.deleted = true
	s.closing = make(chan struct{})
	go func() {
		dctx, cancel := withBound(context.WithoutCancel(ctx), r.clock, cleanupBound, context.DeadlineExceeded)
		defer cancel()
		_ = r.deleteSession(dctx, s)
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(l.all, s)
		close(s.closing)
		r.gcLocked(l)
	}()
}

// sessionGone forgets a session the toolbox no longer knows (the sandbox
// restarted): nothing to delete, the next command opens a new one.
func (r *Runner) sessionGone(l *lease, s *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.gone = true
	s.retired = true
	if l.cur == s {
		l.cur = nil
	}
	delete(l.all, s)
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
	x.out.reserve(r.keptFor(x.lease, x.key))
	var res Result
	var err error
	if req.BypassSession {
		res, err = x.oneShot()
	} else {
		res, err = x.inSession()
	}
	if err == nil && !res.TimedOut {
		r.noteKept(x.lease, x.key, x.out.kept())
	}
	return res, err
}
