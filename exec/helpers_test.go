package exec_test

import (
	"context"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	cmdexec "github.com/daytonaworker/daytona-worker/exec"
	"github.com/daytonaworker/daytona-worker/exec/exectest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// The session path's timing as the reference fixes it. Tests use these
// values, never the package's constants, so a changed constant fails them
// (TestTimingIsTheReferences checks the constants themselves).
const (
	pollInterval      = time.Second            // status + snapshot at most once per second
	fastPathBound     = 500 * time.Millisecond // the fast-path snapshot
	silentSocketLimit = 15 * time.Second       // a follow socket silent this long is left for polling
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

// fault is an error the emulator injects (short for the tables).
type fault = daytonatest.Fault

type envOpt func(*cmdexec.Options)

func withFakeClock(o *cmdexec.Options) { o.Clock = exectest.NewFakeClock() }

func withCap(n int64) envOpt { return func(o *cmdexec.Options) { o.OutputCap = n } }

func newEnv(t testing.TB, opts ...envOpt) *env {
	t.Helper()
	return newEnvOn(t, "", opts...)
}

// daemonURL is the toolbox daemon that tests written for it run against
// (docs/emulator.md#a-real-daemon-behind-the-emulator): "" = the
// emulator's own toolbox.
var daemonURL = os.Getenv("DAYTONA_DAEMON_URL")

// newDaemonEnv is newEnv whose toolbox is the real daemon at
// DAYTONA_DAEMON_URL when it is set (`make fidelity`). Tests that use it
// reach the sandbox only through the toolbox API.
func newDaemonEnv(t testing.TB, opts ...envOpt) *env {
	t.Helper()
	return newEnvOn(t, daemonURL, opts...)
}

func newEnvOn(t testing.TB, upstream string, opts ...envOpt) *env {
	t.Helper()
	var tops []testenv.Option
	if upstream != "" {
		tops = append(tops, testenv.WithServer(daytonatest.WithToolboxUpstream(upstream)))
	}
	return newEnvWith(t, tops, opts...)
}

// newEnvWith is newEnv with emulator and client options (a network, TLS).
func newEnvWith(t testing.TB, extra []testenv.Option, opts ...envOpt) *env {
	t.Helper()
	checkNoLeaks(t)
	tops := append([]testenv.Option{testenv.WithClient(daytona.WithRetryPolicy(daytona.RetryPolicy{MaxRetries: -1}))}, extra...)
	// No client retries: a fault a test injects reaches the runner as is.
	te := testenv.New(t, tops...)
	sb := te.StartSandbox(t, nil)
	var o cmdexec.Options
	for _, f := range opts {
		f(&o)
	}
	e := &env{t: t, srv: te.Server, client: te.Client, sb: sb.Sandbox, info: sb.Info, runner: cmdexec.NewRunner(o)}
	if fc, ok := o.Clock.(*exectest.FakeClock); ok {
		e.clock = fc
	}
	e.target = cmdexec.Target{Client: te.Client, Sandbox: sb.Ref(), LeaseKey: "lease-" + sb.ID}
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
	ended   chan struct{} // closed when the execute it records returned
	endOnce sync.Once
}

type sinkCall struct{ stream, text string }

func newRecorder() *recorder {
	return &recorder{changed: make(chan struct{}), ended: make(chan struct{})}
}

// end records that the execute returned: no more live output can come.
func (r *recorder) end() { r.endOnce.Do(func() { close(r.ended) }) }

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

// await waits until the stream's live text contains s. It fails as soon
// as the execute has returned without streaming s (nothing more can
// come), so a regression fails at once instead of at the hang guard.
func (r *recorder) await(t *testing.T, stream, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a hang guard only
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
		case <-r.ended:
			if !strings.Contains(r.text(stream), s) {
				t.Fatalf("the execute returned and live %s never contained %q (got %q)", stream, s, r.text(stream))
			}
			return
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
	p := e.info.HostPath(name)
	require.NoError(e.t, syscall.Mkfifo(p, 0o600))
	require.NoError(e.t, e.info.Own(p))
	return &gate{path: p, name: name}
}

// shell is the command fragment that waits for the gate.
func (g *gate) shell() string { return "read _ < " + g.name }

// open releases the waiting command (blocks until it reads).
func (g *gate) open(t testing.TB) {
	t.Helper()
	require.NoError(t, os.WriteFile(g.path, []byte("go\n"), 0o600))
}

type execOut struct {
	res cmdexec.Result
	err error
}

// onBothPaths runs f as a subtest on the session path and one-shot.
func onBothPaths(t *testing.T, f func(t *testing.T, bypass bool)) {
	t.Helper()
	for _, bypass := range []bool{false, true} {
		t.Run(map[bool]string{false: "session", true: "one-shot"}[bypass], func(t *testing.T) { f(t, bypass) })
	}
}

// bashReq runs script with bash -c through the runner.
func bashReq(script string) cmdexec.Request {
	return cmdexec.Request{Command: "bash", Args: []string{"-c", script}, Timeout: time.Hour}
}

// start runs req in the background, its live output going to rec (nil:
// no sink).
func (e *env) start(req cmdexec.Request, rec *recorder) <-chan execOut {
	return e.startCtx(e.t.Context(), req, rec)
}

func (e *env) startCtx(ctx context.Context, req cmdexec.Request, rec *recorder) <-chan execOut {
	ch := make(chan execOut, 1)
	var sink cmdexec.Sink
	if rec != nil {
		sink = rec.sink
	}
	go func() {
		res, err := e.runner.Execute(ctx, e.target, req, sink)
		if rec != nil {
			rec.end()
		}
		ch <- execOut{res, err}
	}()
	return ch
}

// streamedScript prints multibyte text on both streams, blocks on the
// gate, then prints more; id tags it so its dispatches can be counted.
func streamedScript(g *gate, id string) string {
	return "printf 'l1 é🙂\\n'; printf 'e1 ☃\\n' >&2; printf 'l2 ok\\n'; " + g.shell() + "; printf 'l3 🙂🙂\\n'; printf 'e2\\n' >&2; : " + id
}

// What streamedScript prints in all, and before its gate.
const (
	streamedOut   = "l1 é🙂\nl2 ok\nl3 🙂🙂\n"
	streamedErr   = "e1 ☃\ne2\n"
	streamedFirst = "l1 é🙂\nl2 ok\n"
)

// dropFinalFrame makes the follow socket (the second log GET, after the
// fast-path snapshot) close normally without its last frame, which holds
// the end markers: the runner falls back to the status read.
var dropFinalFrame = fault{Route: rLogs, WSDropFinal: true, Times: 1}

// commandCalls counts the toolbox calls made for the last dispatched
// command: its dispatch and every request on its command routes.
func (e *env) commandCalls() int {
	id := e.lastDispatch().CommandID
	n := 0
	for _, r := range e.srv.Requests() {
		if r.Route == rExec || strings.Contains(r.Path, "/command/"+id) {
			n++
		}
	}
	return n
}

// streamed is one running streamedScript.
type streamed struct {
	gate   *gate
	rec    *recorder
	id     string
	ch     <-chan execOut
	cancel context.CancelFunc // cancels the Execute's context
}

// startStreamed starts streamedScript with tail appended and timeout (0:
// bashReq's hour).
func (e *env) startStreamed(timeout time.Duration, tail string) *streamed {
	s := &streamed{gate: e.newGate(), rec: newRecorder(), id: tag()}
	req := bashReq(streamedScript(s.gate, s.id) + tail)
	if timeout > 0 {
		req.Timeout = timeout
	}
	// A gated command is a long one: the plan follows it at once
	// (plan_test.go pins the plan; these tests what the follow gives).
	e.long(req)
	ctx, cancel := context.WithCancel(e.t.Context())
	e.t.Cleanup(cancel)
	s.cancel = cancel
	s.ch = e.startCtx(ctx, req, s.rec)
	return s
}

// awaitFirst waits until the part before the gate has streamed live.
func (s *streamed) awaitFirst(t *testing.T) { s.rec.await(t, "stdout", "l2 ok\n") }

// finish opens the gate once the first part has streamed and waits for
// the result: the plain course of a streamed command.
func (e *env) finish(t *testing.T, s *streamed) (cmdexec.Result, error) {
	s.awaitFirst(t)
	s.gate.open(t)
	return e.wait(s.ch)
}

func tag() string { return "t" + strings.ReplaceAll(uuid.NewString()[:8], "-", "") }

// assertLive checks the live-output contract: every sink call is
// non-empty on a known stream, and per stream the streamed text is a
// prefix of the final result (output that arrived with the command's end
// markers, after it ended, goes to the result only).
func assertLive(t *testing.T, rec *recorder, res cmdexec.Result) {
	t.Helper()
	for _, c := range rec.all() {
		require.NotEmpty(t, c.text)
		require.Contains(t, []string{"stdout", "stderr"}, c.stream)
	}
	assertLivePrefix(t, rec, res)
}

// assertNoLive checks that nothing was streamed live: a one-shot command's
// output reaches the host in the result only.
func assertNoLive(t *testing.T, rec *recorder) {
	t.Helper()
	assert.Empty(t, rec.all(), "a one-shot execute sends no live output")
}

// assertLiveOn is assertLive on the session path and assertNoLive
// one-shot.
func assertLiveOn(t *testing.T, bypass bool, rec *recorder, res cmdexec.Result) {
	t.Helper()
	if bypass {
		assertNoLive(t, rec)
		return
	}
	assertLive(t, rec, res)
}

// assertLivePrefix checks the contract of a result that is not complete:
// per stream the streamed text is a prefix of it.
func assertLivePrefix(t *testing.T, rec *recorder, res cmdexec.Result) {
	t.Helper()
	assert.True(t, strings.HasPrefix(res.Stdout, rec.text("stdout")), "live stdout %q is a prefix of %q", rec.text("stdout"), res.Stdout)
	assert.True(t, strings.HasPrefix(res.Stderr, rec.text("stderr")), "live stderr %q is a prefix of %q", rec.text("stderr"), res.Stderr)
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

// silenceUntilRequests advances the fake clock by the silent-socket limit
// whenever the runner waits on it, until the server has seen n requests
// of method and route (e.g. the poll's snapshot after a silent socket).
func (e *env) silenceUntilRequests(method, route string, n int) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(ctxT(e.t))
	defer cancel()
	reached := make(chan error, 1)
	go func() {
		reached <- e.srv.AwaitRequests(ctx, method, route, n)
		cancel()
	}()
	for {
		if _, err := e.clock.AwaitAnyTimer(ctx, silentSocketLimit); err != nil {
			break
		}
		e.clock.Advance(silentSocketLimit)
	}
	require.NoError(e.t, <-reached)
}

// awaitTimer waits for the runner to arm a timer of d.
func (e *env) awaitTimer(d time.Duration) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 20*time.Second)
	defer cancel()
	require.NoError(e.t, e.clock.AwaitTimer(ctx, d), "timer %v never armed (pending %v)", d, e.clock.Pending())
}

// lastDispatch returns the emulator's record of the last session dispatch
// of a command (not of a check of the shell, `:`).
func (e *env) lastDispatch() daytonatest.Dispatch {
	ds := e.srv.Dispatches()
	for i := len(ds) - 1; i >= 0; i-- {
		if ds[i].Command != ":" {
			return ds[i]
		}
	}
	require.Fail(e.t, "no command dispatched")
	return daytonatest.Dispatch{}
}

// awaitExited waits until the last dispatched command has exited in the
// emulator.
func (e *env) awaitExited() {
	e.t.Helper()
	d := e.lastDispatch()
	_, err := e.srv.AwaitCommand(ctxT(e.t), d.Sandbox, d.Session, d.CommandID)
	require.NoError(e.t, err)
}

// startAgain waits until the stopped sandbox (its sessions died with it)
// is stopped and starts it again.
func (e *env) startAgain() {
	e.t.Helper()
	require.NoError(e.t, e.srv.AwaitState(ctxT(e.t), e.sb.ID, daytonatest.StateStopped))
	_, _, err := e.client.Sandboxes.Start(ctxT(e.t), e.sb.ID)
	require.NoError(e.t, err)
	_, err = e.client.Sandboxes.WaitUntilStarted(ctxT(e.t), e.sb.ID)
	require.NoError(e.t, err)
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

// commandText is what the emulator logged for a stream of a command, up
// to the worker's end marker (0x1F and the token).
func commandText(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\x1f")
	return s
}

// awaitOutput waits until the last dispatched command has written s to
// stdout in the emulator.
func (e *env) awaitOutput(s string) {
	e.t.Helper()
	require.NoError(e.t, e.srv.Await(ctxT(e.t), func() bool {
		ds := e.srv.Dispatches()
		if len(ds) == 0 {
			return false
		}
		d := e.lastDispatch()
		c, ok := e.srv.Command(d.Sandbox, d.Session, d.CommandID)
		return ok && strings.Contains(string(c.Stdout), s)
	}))
}

// assertDeletes checks that n session deletes were sent. A retired
// session is deleted after the execute answered, so the check waits for
// them to arrive first.
func (e *env) assertDeletes(t *testing.T, n int, msgAndArgs ...any) {
	t.Helper()
	require.NoError(t, e.srv.AwaitRequests(ctxT(t), "DELETE", rSessionD, n), msgAndArgs...)
	assert.Equal(t, n, e.count("DELETE", rSessionD), msgAndArgs...)
}

// holdFollowClose opens the session with a first command, makes the
// emulator keep every follow of it open after its command's exit until the
// test ends, and clears the request log.
func (e *env) holdFollowClose(t *testing.T) {
	t.Helper()
	first := cmdexec.Request{Command: "true"}
	e.long(first)
	_, err := e.runner.Execute(ctxT(t), e.target, first, nil) // opens the session
	require.NoError(t, err)
	release, ok := e.srv.HoldFollowClose(e.sb.ID, e.runner.SessionID(e.target.LeaseKey))
	require.True(t, ok)
	t.Cleanup(release)
	e.srv.ResetRequests()
}

// long makes the lease remember req's command line as a long one, so the
// plan follows it at once: what the follow gives is under test, and no
// look waits on a fake clock (plan_test.go pins the plan itself).
func (e *env) long(req cmdexec.Request) {
	cmdexec.SetLastRun(e.runner, e.target.LeaseKey, req, cmdexec.LiveWithin+time.Second, 10)
}
