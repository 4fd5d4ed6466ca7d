package exec_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	cmdexec "github.com/daytonaworker/daytona-worker/exec"
)

func TestOneStreamCallOneStatusReadOneSnapshot(t *testing.T) {
	e := newEnv(t, withFakeClock) // early status reads never come due
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	ch := e.start(bashReq(streamedScript(g, id)), rec)
	rec.await(t, "stdout", "l2 ok\n")
	g.open(t)
	res, err := e.wait(ch)
	require.NoError(t, err)
	assert.Equal(t, streamedOut, res.Stdout)
	assert.Equal(t, streamedErr, res.Stderr)
	assertLive(t, rec, res)
	assert.Equal(t, "followed", res.Metadata["logStream"])
	assert.Equal(t, 1, e.wsCount(), "one stream call")
	assert.Equal(t, 2, e.count("GET", rLogs), "the stream and one final snapshot")
	assert.Equal(t, 2, e.count("GET", rStatus), "fast-path read and one exit-code read after the stream ended")
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

func TestEarlyStatusReadEndsFollowWithoutWaitingForClose(t *testing.T) {
	// The socket stays silent; the first early status read (25 ms on the
	// fake clock) sees the exit, the final snapshot supplies the output. A
	// real clock would let a loaded machine overrun the reads' 500 ms
	// bound and make further early reads.
	e := newEnv(t, withFakeClock)
	e.srv.Inject(daytonatest.Fault{Route: rLogs, WSSilent: true, Times: 1})
	// The fast-path read is held until the command has exited and then
	// answers "running" (as a read racing the exit would).
	release := make(chan struct{})
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rStatus, Times: 1, Gate: release, Status: 200, Body: `{"id":"c","command":"c"}`})
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	ch := e.start(bashReq(streamedScript(g, id)), rec)
	require.NoError(t, e.srv.AwaitRequests(ctxT(t), "GET", rStatus, 1))
	g.open(t)
	d := e.lastDispatch()
	_, err := e.srv.AwaitCommand(ctxT(t), d.Sandbox, d.Session, d.CommandID)
	require.NoError(t, err)
	close(release)
	require.NoError(t, e.srv.AwaitRequests(ctxT(t), "GET", rLogs, 1), "the follow connects")
	e.awaitTimer(25 * time.Millisecond)
	e.clock.Advance(25 * time.Millisecond)
	res, err := e.wait(ch)
	require.NoError(t, err)
	assert.Equal(t, 0, *res.ExitCode)
	assert.Equal(t, streamedOut, res.Stdout)
	assert.Equal(t, streamedErr, res.Stderr)
	assertLive(t, rec, res)
	assert.Equal(t, 1, e.wsCount())
	assert.Equal(t, 2, e.count("GET", rStatus), "the fast-path read and the first early read")
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

func TestPollFallbackTimeoutKeepsPartialOutput(t *testing.T) {
	e := newEnv(t, withFakeClock)
	e.srv.Inject(daytonatest.Fault{Route: rLogs, WSClose: true, WSCloseAfterBytes: 0, Times: 2})
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	req := bashReq(streamedScript(g, id))
	req.Timeout = time.Minute
	ch := e.start(req, rec)
	e.awaitTimer(cmdexec.PollInterval)
	e.awaitOutput("l2 ok")
	e.clock.Advance(cmdexec.PollInterval)
	rec.await(t, "stdout", "l2 ok\n")
	e.awaitTimer(cmdexec.PollInterval)
	e.clock.Advance(time.Minute)
	res, err := e.wait(ch)
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.Nil(t, res.ExitCode)
	assert.True(t, strings.HasPrefix(res.Stdout, "l1 é🙂\nl2 ok\n"))
	assert.True(t, strings.HasSuffix(res.Stderr, "Command timed out after 60 s.\n"))
	assert.Equal(t, false, res.Metadata["commandExitConfirmed"])
	assert.True(t, strings.HasPrefix(res.Stdout, rec.text("stdout")))
	assert.Equal(t, 1, e.srv.CountDispatches(id))
	assert.Equal(t, 1, e.count("DELETE", rSessionD), "session of the runaway command deleted")
}

func TestFinalSnapshotStallReportsConfirmedExit(t *testing.T) {
	e := newEnv(t, withFakeClock)
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rLogs, Skip: 1, Times: 1, Hang: true})
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	req := bashReq(streamedScript(g, id) + "; exit 5")
	req.Timeout = 10 * time.Minute
	ch := e.start(req, rec)
	rec.await(t, "stdout", "l2 ok\n")
	g.open(t)
	require.NoError(t, e.srv.AwaitRequests(ctxT(t), "GET", rLogs, 2))
	e.clock.Advance(10 * time.Minute)
	res, err := e.wait(ch)
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.Nil(t, res.ExitCode)
	assert.Equal(t, "session_log_observation", res.Metadata["timeoutScope"])
	assert.Equal(t, true, res.Metadata["commandExitConfirmed"])
	assert.Equal(t, 5, res.Metadata["observedExitCode"])
	assert.True(t, strings.HasSuffix(res.Stderr, "Session log observation timed out after 600 s; final output may be incomplete.\n"), res.Stderr)
	assert.True(t, strings.HasPrefix(res.Stdout, rec.text("stdout")))
	assert.Equal(t, 0, e.count("DELETE", rSessionD), "an exited command does not retire its session")
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

func TestCallerContextCancelledEndsPromptly(t *testing.T) {
	e := newEnv(t)
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	ctx, cancel := context.WithCancel(t.Context())
	ch := make(chan execOut, 1)
	go func() {
		res, err := e.runner.Execute(ctx, e.target, bashReq(streamedScript(g, id)), rec.sink)
		ch <- execOut{res, err}
	}()
	rec.await(t, "stdout", "l2 ok\n")
	cancel()
	res, err := e.wait(ch)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, "l1 é🙂\nl2 ok\n", res.Stdout)
	assert.Equal(t, 1, e.count("DELETE", rSessionD), "the abandoned command's session is retired")
	assert.True(t, e.runner.LeaseActive(e.target.LeaseKey))
}

func TestCloseLeaseReportsDeleteFailureWithoutPanicking(t *testing.T) {
	var mu sync.Mutex
	var spans []string
	e := newEnv(t, func(o *cmdexec.Options) {
		o.Span = func(_ context.Context, name, id string, start, end time.Time, err error) {
			mu.Lock()
			defer mu.Unlock()
			spans = append(spans, name+"/"+map[bool]string{true: "ok", false: "failed"}[err == nil])
		}
	})
	_, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "true"}, nil)
	require.NoError(t, err)
	id := e.runner.SessionID(e.target.LeaseKey)
	e.srv.Inject(daytonatest.Fault{Method: "DELETE", Route: rSessionD, Status: 500, Times: 1})
	err = e.runner.CloseLease(ctxT(t), e.target.LeaseKey)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Failed to delete Daytona session "+id+" during teardown")
	assert.Equal(t, "", e.runner.SessionID(e.target.LeaseKey), "cleared first")
	mu.Lock()
	assert.Equal(t, []string{"session.open/ok", "session.close/failed"}, spans)
	mu.Unlock()
}

func TestRequestValidation(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		t   cmdexec.Target
		req cmdexec.Request
	}{
		{cmdexec.Target{Sandbox: e.target.Sandbox, LeaseKey: "k"}, cmdexec.Request{Command: "true"}},
		{cmdexec.Target{Client: e.client, LeaseKey: "k"}, cmdexec.Request{Command: "true"}},
		{e.target, cmdexec.Request{Command: " "}},
		{cmdexec.Target{Client: e.client, Sandbox: e.target.Sandbox}, cmdexec.Request{Command: "true"}},
	} {
		_, err := e.runner.Execute(ctxT(t), c.t, c.req, nil)
		assert.ErrorIs(t, err, cmdexec.ErrInvalidRequest)
	}
	// Without a lease key, bypass commands still run.
	res, err := e.runner.Execute(ctxT(t), cmdexec.Target{Client: e.client, Sandbox: e.target.Sandbox}, cmdexec.Request{Command: "echo", Args: []string{"x"}, BypassSession: true}, nil)
	require.NoError(t, err)
	assert.Equal(t, "x\n", res.Stdout)
}

// TestLostFinalFrameReconciledByStreamedSnapshot: the final frame never
// arrives; the final snapshot, read as the raw log streamed (bounded memory
// whatever its size), fills it in by byte offset without a second socket.
func TestLostFinalFrameReconciledByStreamedSnapshot(t *testing.T) {
	e := newEnv(t)
	e.srv.Inject(daytonatest.Fault{Route: rLogs, WSDropFinal: true, Times: 1})
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	ch := e.start(bashReq(streamedScript(g, id)), rec)
	g.open(t)
	res, err := e.wait(ch)
	require.NoError(t, err)
	assert.Equal(t, 0, *res.ExitCode)
	assert.Equal(t, streamedOut, res.Stdout)
	assert.Equal(t, streamedErr, res.Stderr)
	assertLive(t, rec, res)
	assert.NotContains(t, res.Metadata, "finalSnapshotSkipped")
	assert.Equal(t, 1, e.wsCount(), "one follow socket; the snapshot is plain HTTP")
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

func TestSandboxStoppedMidCommandEndsWithHonestError(t *testing.T) {
	e := newEnv(t)
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	ch := e.start(bashReq(streamedScript(g, id)), rec)
	rec.await(t, "stdout", "l2 ok\n")
	require.NoError(t, e.srv.StopSandbox(e.sb.ID))
	res, err := e.wait(ch)
	require.Error(t, err, "no exit code was recorded: not a completed result")
	t.Logf("error: %v; metadata %v", err, res.Metadata)
	assert.Nil(t, res.ExitCode)
	assert.Equal(t, "l1 é🙂\nl2 ok\n", res.Stdout)
	assert.Equal(t, false, res.Metadata["commandExitConfirmed"])
	assert.True(t, strings.HasPrefix(res.Stdout, rec.text("stdout")))
	assert.Equal(t, 1, e.srv.CountDispatches(id))

	require.NoError(t, e.srv.AwaitState(ctxT(t), e.sb.ID, daytonatest.StateStopped))
	_, _, err = e.client.Sandboxes.Start(ctxT(t), e.sb.ID)
	require.NoError(t, err)
	_, err = e.client.Sandboxes.WaitUntilStarted(ctxT(t), e.sb.ID)
	require.NoError(t, err)
	res, err = e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "echo", Args: []string{"again"}}, nil)
	require.NoError(t, err)
	assert.Equal(t, "again\n", res.Stdout)
	assert.Equal(t, 2, e.count("POST", rSession))
}
