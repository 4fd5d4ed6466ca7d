package exec_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	cmdexec "github.com/daytonaworker/daytona-worker/exec"
	"github.com/daytonaworker/daytona-worker/exec/exectest"
)

// Route templates of the toolbox (relative to <toolboxProxyUrl>/<id>).
const (
	rExec     = "/process/session/{sessionId}/exec"
	rStatus   = "/process/session/{sessionId}/command/{commandId}"
	rLogs     = "/process/session/{sessionId}/command/{commandId}/logs"
	rSession  = "/process/session"
	rSessionD = "/process/session/{sessionId}"
	rExecute  = "/process/execute"
)

// env is one emulator, one started sandbox and a Runner aimed at it.
type env struct {
	t      testing.TB
	srv    *daytonatest.Server
	client *daytona.Client
	sb     *daytona.Sandbox
	info   daytonatest.SandboxInfo
	runner *cmdexec.Runner
	clock  *exectest.FakeClock // nil with the real clock
	target cmdexec.Target
}

type envOpt func(*cmdexec.Options)

func withFakeClock(o *cmdexec.Options) { o.Clock = exectest.NewFakeClock() }

func withCap(n int64) envOpt { return func(o *cmdexec.Options) { o.OutputCap = n } }

func newEnv(t testing.TB, opts ...envOpt) *env {
	t.Helper()
	checkNoLeaks(t)
	srv := daytonatest.NewServer(t)
	c, err := daytona.NewClient(
		daytona.WithAPIURL(srv.URL()),
		daytona.WithAPIKey(srv.APIKey()),
		daytona.WithPollBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(2 * time.Millisecond) }),
		daytona.WithRetryPolicy(daytona.RetryPolicy{MaxRetries: -1}),
	)
	require.NoError(t, err)
	sb, _, err := c.Sandboxes.Create(t.Context(), &daytona.CreateSandboxRequest{Name: "exec-test-" + uuid.NewString()[:8], Snapshot: "base"})
	require.NoError(t, err)
	sb, err = c.Sandboxes.WaitUntilStarted(t.Context(), sb.ID)
	require.NoError(t, err)
	info, ok := srv.Sandbox(sb.ID)
	require.True(t, ok)
	o := cmdexec.Options{StdinDir: filepath.Join(info.Root, "tmp")}
	for _, f := range opts {
		f(&o)
	}
	e := &env{t: t, srv: srv, client: c, sb: sb, info: info, runner: cmdexec.NewRunner(o)}
	if fc, ok := o.Clock.(*exectest.FakeClock); ok {
		e.clock = fc
	}
	e.target = cmdexec.Target{Client: c, Sandbox: sb.Ref(), LeaseKey: "lease-" + sb.ID}
	return e
}

// checkNoLeaks fails the test if, once it ended, a goroutine of package
// exec (or a log follow of the client) is still alive. Goroutines end
// asynchronously after their cancel, so the check polls for a while.
func checkNoLeaks(t testing.TB) {
	t.Cleanup(func() {
		deadline := time.Now().Add(30 * time.Second) // a guard only: returns once none is left
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			leaked := leakedGoroutines()
			if leaked == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("goroutines outlived the test:\n%s", leaked)
				return
			}
			<-tick.C
		}
	})
}

func leakedGoroutines() string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "daytona-worker/exec.(*run)") || strings.Contains(g, "daytona-worker/exec.withBound") ||
			strings.Contains(g, "daytona-worker/exec.sleep") || strings.Contains(g, "FollowSessionCommandLogs") ||
			strings.Contains(g, "daytona-worker/exec.(*Runner)") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// recorder is a Sink that keeps every call.
type recorder struct {
	mu      sync.Mutex
	calls   []sinkCall
	changed chan struct{}
}

type sinkCall struct{ stream, text string }

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) sink(stream, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, sinkCall{stream, text})
	close(r.changed)
	r.changed = make(chan struct{})
	return nil
}

func (r *recorder) text(stream string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, c := range r.calls {
		if c.stream == stream {
			b.WriteString(c.text)
		}
	}
	return b.String()
}

func (r *recorder) all() []sinkCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sinkCall(nil), r.calls...)
}

// await waits until the stream's live text contains s.
func (r *recorder) await(t *testing.T, stream, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if strings.Contains(r.text(stream), s) {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("live %s never contained %q (got %q)", stream, s, r.text(stream))
		}
	}
}

// gate is a FIFO in the sandbox home: a command blocks in `read _ < gate`
// until the test opens it.
type gate struct {
	path string
	name string
}

func (e *env) newGate() *gate {
	name := "gate-" + uuid.NewString()[:8]
	p := filepath.Join(e.info.HomeDir, name)
	require.NoError(e.t, syscall.Mkfifo(p, 0o600))
	return &gate{path: p, name: name}
}

// shell is the command fragment that waits for the gate.
func (g *gate) shell() string { return "read _ < " + g.name }

// open releases the waiting command (blocks until it reads).
func (g *gate) open(t *testing.T) {
	t.Helper()
	require.NoError(t, os.WriteFile(g.path, []byte("go\n"), 0o600))
}

type execOut struct {
	res cmdexec.Result
	err error
}

// bash runs script with bash -c through the runner.
func bashReq(script string) cmdexec.Request {
	return cmdexec.Request{Command: "bash", Args: []string{"-c", script}, Timeout: time.Hour}
}

func (e *env) start(req cmdexec.Request, rec *recorder) <-chan execOut {
	ch := make(chan execOut, 1)
	var sink cmdexec.Sink
	if rec != nil {
		sink = rec.sink
	}
	go func() {
		res, err := e.runner.Execute(e.t.Context(), e.target, req, sink)
		ch <- execOut{res, err}
	}()
	return ch
}

func (e *env) wait(ch <-chan execOut) (cmdexec.Result, error) {
	e.t.Helper()
	select {
	case o := <-ch:
		return o.res, o.err
	case <-time.After(60 * time.Second):
		e.t.Fatal("execute did not return")
	}
	return cmdexec.Result{}, nil
}

// drive advances the fake clock by step each time a timer of exactly step
// is armed, until ch delivers.
func (e *env) drive(ch <-chan execOut, step time.Duration) (cmdexec.Result, error) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.t.Context())
	defer cancel()
	got := make(chan execOut, 1)
	go func() {
		o := <-ch
		got <- o
		cancel()
	}()
	for {
		if err := e.clock.AwaitTimer(ctx, step); err != nil {
			break
		}
		e.clock.Advance(step)
	}
	o := <-got
	return o.res, o.err
}

// advanceUntil advances the clock by step whenever a step timer is armed,
// until a timer of target is armed (e.g. re-armed silence timers until
// the runner polls).
func (e *env) advanceUntil(target, step time.Duration) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 20*time.Second)
	defer cancel()
	for {
		d, err := e.clock.AwaitAnyTimer(ctx, target, step)
		require.NoError(e.t, err, "pending %v", e.clock.Pending())
		if d == target {
			return
		}
		e.clock.Advance(step)
	}
}

// awaitTimer waits for the runner to arm a timer of d.
func (e *env) awaitTimer(d time.Duration) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 20*time.Second)
	defer cancel()
	require.NoError(e.t, e.clock.AwaitTimer(ctx, d), "timer %v never armed (pending %v)", d, e.clock.Pending())
}

// lastCommand returns the emulator's record of the last session dispatch.
func (e *env) lastDispatch() daytonatest.Dispatch {
	ds := e.srv.Dispatches()
	require.NotEmpty(e.t, ds)
	return ds[len(ds)-1]
}

// wsCount counts follow connections (log GETs with follow=true).
func (e *env) wsCount() int {
	n := 0
	for _, r := range e.srv.Requests() {
		// Counted on arrival (the WebSocket flag is only set when the
		// server's handler has returned, which may be after Execute).
		if r.Route == rLogs && strings.Contains(r.Query, "follow=true") {
			n++
		}
	}
	return n
}

func (e *env) count(method, route string) int { return e.srv.CountRequests(method, route) }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// awaitOutput waits until the last dispatched command has written s to
// stdout in the emulator.
func (e *env) awaitOutput(s string) {
	e.t.Helper()
	d := e.lastDispatch()
	require.NoError(e.t, e.srv.Await(ctxT(e.t), func() bool {
		c, ok := e.srv.Command(d.Sandbox, d.Session, d.CommandID)
		return ok && strings.Contains(string(c.Stdout), s)
	}))
}
