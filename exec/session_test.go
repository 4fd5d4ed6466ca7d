package exec_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	cmdexec "github.com/daytonaworker/daytona-worker/exec"
)

// assertLive checks the live-output contract: every sink call is valid
// UTF-8 without spurious U+FFFD, and per stream the streamed text equals
// the final result (complete) — or is a prefix of it (prefixOnly).
func assertLive(t *testing.T, rec *recorder, res cmdexec.Result) {
	t.Helper()
	for _, c := range rec.all() {
		require.NotEmpty(t, c.text)
		require.Contains(t, []string{"stdout", "stderr"}, c.stream)
	}
	assert.Equal(t, res.Stdout, rec.text("stdout"), "live stdout == result stdout")
	assert.Equal(t, res.Stderr, rec.text("stderr"), "live stderr == result stderr")
}

func tag() string { return "t" + strings.ReplaceAll(uuid.NewString()[:8], "-", "") }

func TestSessionSeparatesStreamsAndReusesOneSession(t *testing.T) {
	e := newEnv(t)
	rec := newRecorder()
	id := tag()
	res, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{
		Command: "bash", Args: []string{"-c", "echo out-$1; echo err-$1 >&2; exit 7", "x", id}, Timeout: time.Hour,
	}, rec.sink)
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode)
	assert.Equal(t, 7, *res.ExitCode)
	assert.False(t, res.TimedOut)
	assert.Equal(t, "out-"+id+"\n", res.Stdout)
	assert.Equal(t, "err-"+id+"\n", res.Stderr)
	assertLive(t, rec, res)
	assert.Equal(t, 1, e.srv.CountDispatches(id), "dispatched exactly once")
	d := e.lastDispatch()
	assert.True(t, d.Async, "runAsync")
	assert.True(t, strings.HasPrefix(d.Command, "( ") && strings.HasSuffix(d.Command, " )"), "subshell wrap: %s", d.Command)
	assert.True(t, strings.HasPrefix(d.Session, "paperclip-"))
	assert.NotContains(t, d.Command, "bwrap")
	assert.Contains(t, res.Metadata, "durationMs")

	// A top-level exit in the command ends only the subshell: the same
	// session runs the next command.
	res2, err := e.runner.Execute(ctxT(t), e.target, bashReq("exit 3"), nil)
	require.NoError(t, err)
	require.NotNil(t, res2.ExitCode)
	assert.Equal(t, 3, *res2.ExitCode)
	res3, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "echo", Args: []string{"still", "alive"}, Timeout: time.Hour}, nil)
	require.NoError(t, err)
	assert.Equal(t, "still alive\n", res3.Stdout)
	assert.Equal(t, 0, *res3.ExitCode)
	assert.Equal(t, 1, e.count("POST", rSession), "one session for the lease")
	for _, d := range e.srv.Dispatches() {
		assert.Equal(t, e.runner.SessionID(e.target.LeaseKey), d.Session)
	}

	// Teardown deletes it and clears the store.
	require.NoError(t, e.runner.CloseLease(ctxT(t), e.target.LeaseKey))
	assert.Equal(t, 1, e.count("DELETE", rSessionD))
	assert.Equal(t, "", e.runner.SessionID(e.target.LeaseKey))
	require.NoError(t, e.runner.CloseLease(ctxT(t), e.target.LeaseKey))
	assert.Equal(t, 1, e.count("DELETE", rSessionD), "a second teardown deletes nothing")
}

func TestFastPathCommandExitedBeforeFirstStatusRead(t *testing.T) {
	// Fake clock: the held read's 500 ms bound must not run out while a
	// loaded machine runs the command (the read would then fail and the
	// follow path would be taken).
	e := newEnv(t, withFakeClock)
	release := make(chan struct{})
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rStatus, Times: 1, Gate: release})
	rec := newRecorder()
	id := tag()
	ch := e.start(bashReq("printf 'a\\nb'; printf 'E' >&2; : "+id), rec)
	// Let the first status read wait until the command has finished.
	ctx := ctxT(t)
	require.NoError(t, e.srv.Await(ctx, func() bool { return e.srv.CountDispatches(id) == 1 }))
	d := e.lastDispatch()
	_, err := e.srv.AwaitCommand(ctx, d.Sandbox, d.Session, d.CommandID)
	require.NoError(t, err)
	close(release)
	res, err := e.wait(ch)
	require.NoError(t, err)
	assert.Equal(t, 0, *res.ExitCode)
	assert.Equal(t, "a\nb\n", res.Stdout, "the daemon terminates a final line")
	assert.Equal(t, "E\n", res.Stderr)
	assert.Equal(t, "fast_path", res.Metadata["logStream"])
	assert.Equal(t, 0, e.wsCount(), "no follow socket")
	assert.Equal(t, 1, e.count("GET", rStatus))
	assert.Equal(t, 1, e.count("GET", rLogs), "one final snapshot")
	assertLive(t, rec, res)
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

// streamedCommand prints multibyte text on both streams, blocks on the
// gate, then prints more.
func streamedScript(g *gate, id string) string {
	return "printf 'l1 é🙂\\n'; printf 'e1 ☃\\n' >&2; printf 'l2 ok\\n'; " + g.shell() + "; printf 'l3 🙂🙂\\n'; printf 'e2\\n' >&2; : " + id
}

const streamedOut = "l1 é🙂\nl2 ok\nl3 🙂🙂\n"
const streamedErr = "e1 ☃\ne2\n"

func TestSocketClosedMidLineMidMarkerMidCharacter(t *testing.T) {
	// Log bytes: 01 01 01 "l1 é🙂\n" (13 bytes) then the next marker and
	// line. Cuts: inside the first marker (1, 2), mid-line (5), inside the
	// emoji (9, 12), inside the second marker (14, 15), inside the second
	// line (17).
	for _, cut := range []int{1, 2, 5, 9, 12, 14, 15, 17} {
		t.Run("", func(t *testing.T) {
			e := newEnv(t)
			e.srv.Inject(daytonatest.Fault{Route: rLogs, WSClose: true, WSCloseAfterBytes: cut, Times: 1})
			g := e.newGate()
			rec := newRecorder()
			id := tag()
			ch := e.start(bashReq(streamedScript(g, id)), rec)
			rec.await(t, "stdout", "l2 ok\n")
			g.open(t)
			res, err := e.wait(ch)
			require.NoError(t, err)
			assert.Equal(t, 0, *res.ExitCode)
			assert.Equal(t, streamedOut, res.Stdout)
			assert.Equal(t, streamedErr, res.Stderr)
			assertLive(t, rec, res)
			assert.Equal(t, 2, e.wsCount(), "one reconnect")
			assert.Equal(t, 1, e.srv.CountDispatches(id))
			for _, c := range rec.all() {
				assert.NotContains(t, c.text, "\uFFFD")
			}
		})
	}
}

func TestCloseBeforeFinalFrameIsReconciledBySnapshot(t *testing.T) {
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
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

func TestSnapshotShorterThanStream(t *testing.T) {
	e := newEnv(t)
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	// The first logs GET is the follow socket; the second (final snapshot)
	// answers a log that is shorter than what was streamed.
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rLogs, Skip: 1, Times: 1, Status: 200,
		Body: `{"output":"","stdout":"l1","stderr":""}`})
	ch := e.start(bashReq(streamedScript(g, id)), rec)
	rec.await(t, "stdout", "l2 ok\n")
	g.open(t)
	res, err := e.wait(ch)
	require.NoError(t, err)
	assert.Equal(t, streamedOut, res.Stdout)
	assert.Equal(t, streamedErr, res.Stderr)
	assertLive(t, rec, res)
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

func TestStatusReadFailsBeforeStreamAndAfterCleanClose(t *testing.T) {
	t.Run("fast path read fails: keeps streaming", func(t *testing.T) {
		e := newEnv(t, withFakeClock) // no early reads: only the fast-path read fails
		e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rStatus, Times: 1, Status: 500})
		g := e.newGate()
		rec := newRecorder()
		id := tag()
		ch := e.start(bashReq(streamedScript(g, id)), rec)
		g.open(t)
		res, err := e.wait(ch)
		require.NoError(t, err)
		assert.Equal(t, 0, *res.ExitCode)
		assert.Equal(t, streamedOut, res.Stdout)
		assertLive(t, rec, res)
		assert.Equal(t, 1, e.srv.CountDispatches(id))
	})
	t.Run("status error after clean close is returned with partial output", func(t *testing.T) {
		e := newEnv(t, withFakeClock)
		e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rStatus, Skip: 1, Status: 500})
		g := e.newGate()
		rec := newRecorder()
		id := tag()
		ch := e.start(bashReq(streamedScript(g, id)), rec)
		g.open(t)
		res, err := e.wait(ch)
		require.Error(t, err)
		assert.Nil(t, res.ExitCode)
		assert.Equal(t, streamedOut, res.Stdout, "streamed output is kept")
		assert.Equal(t, false, res.Metadata["commandExitConfirmed"])
		assert.True(t, strings.HasPrefix(res.Stdout, rec.text("stdout")))
		assert.Equal(t, 1, e.srv.CountDispatches(id))
	})
}

func TestStatusReadHangsIsBounded(t *testing.T) {
	e := newEnv(t, withFakeClock)
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rStatus, Times: 1, Hang: true})
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	ch := e.start(bashReq(streamedScript(g, id)), rec)
	e.awaitTimer(cmdexec.FastPathBound)
	// The hung read must have reached the server, or the fault would catch
	// a later read.
	require.NoError(t, e.srv.AwaitRequests(ctxT(t), "GET", rStatus, 1))
	e.clock.Advance(cmdexec.FastPathBound)
	rec.await(t, "stdout", "l2 ok\n")
	g.open(t)
	res, err := e.wait(ch)
	require.NoError(t, err)
	assert.Equal(t, 0, *res.ExitCode)
	assert.Equal(t, streamedOut, res.Stdout)
	assertLive(t, rec, res)
	assert.Equal(t, 1, e.wsCount())
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

func TestStatusHangAfterCleanCloseTimesOutWithPartialOutput(t *testing.T) {
	e := newEnv(t, withFakeClock)
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rStatus, Skip: 1, Hang: true})
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	req := bashReq(streamedScript(g, id))
	req.Timeout = 10 * time.Minute
	ch := e.start(req, rec)
	// Fake time moves on a little while the command runs, as real time
	// would: the status read's own 10 min bound then ends after the
	// command deadline, not at the same instant (two timers firing
	// together would race, and a loaded machine could pick either).
	e.awaitTimer(25 * time.Millisecond) // following: the command deadline is armed
	e.clock.Advance(10 * time.Millisecond)
	g.open(t)
	// After the clean close the status read hangs; the command deadline
	// (10 min of fake time) ends the observation.
	require.NoError(t, e.srv.AwaitRequests(ctxT(t), "GET", rStatus, 2))
	e.clock.Advance(10*time.Minute - 5*time.Millisecond)
	res, err := e.wait(ch)
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.Nil(t, res.ExitCode)
	assert.Equal(t, streamedOut, res.Stdout)
	assert.Equal(t, streamedErr+"Command timed out after 600 s.\n", res.Stderr)
	assert.Equal(t, false, res.Metadata["commandExitConfirmed"])
	assert.Equal(t, "command", res.Metadata["timeoutScope"])
	assert.True(t, strings.HasPrefix(res.Stderr, rec.text("stderr")))
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

func TestSilentSocketSwitchesToPollingAfter15s(t *testing.T) {
	for _, fault := range []daytonatest.Fault{
		{Route: rLogs, WSSilent: true, Times: 1},            // connected, never sends
		{Method: "GET", Route: rLogs, Hang: true, Times: 1}, // never connects
	} {
		t.Run("", func(t *testing.T) {
			e := newEnv(t, withFakeClock)
			e.srv.Inject(fault)
			g := e.newGate()
			rec := newRecorder()
			id := tag()
			ch := e.start(bashReq(streamedScript(g, id)), rec)
			e.awaitTimer(cmdexec.SilentSocketLimit)
			require.NoError(t, e.srv.AwaitRequests(ctxT(t), "GET", rLogs, 1))
			// Output written while the socket is silent arrives by polling.
			e.awaitOutput("l2 ok")
			e.clock.Advance(cmdexec.SilentSocketLimit)
			rec.await(t, "stdout", "l2 ok\n")
			assert.Empty(t, rec.text("stdout")[len("l1 é🙂\nl2 ok\n"):])
			g.open(t)
			res, err := e.drive(ch, cmdexec.PollInterval)
			require.NoError(t, err)
			assert.Equal(t, 0, *res.ExitCode)
			assert.Equal(t, streamedOut, res.Stdout)
			assert.Equal(t, streamedErr, res.Stderr)
			assert.Equal(t, "polled", res.Metadata["logStream"])
			assertLive(t, rec, res)
			assert.Equal(t, 1, e.wsCount(), "no second socket after the silent one")
			assert.Equal(t, 1, e.srv.CountDispatches(id))
		})
	}
}

func TestTwoHourCommandWithInjectedClock(t *testing.T) {
	e := newEnv(t, withFakeClock)
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	req := bashReq(streamedScript(g, id))
	req.Timeout = 3 * time.Hour
	ch := e.start(req, rec)
	rec.await(t, "stdout", "l2 ok\n")
	e.advanceUntil(cmdexec.PollInterval, cmdexec.SilentSocketLimit) // silent → polling
	for elapsed := time.Duration(0); elapsed < 2*time.Hour; elapsed += 10 * time.Minute {
		e.awaitTimer(cmdexec.PollInterval)
		e.clock.Advance(10 * time.Minute)
	}
	g.open(t)
	res, err := e.drive(ch, cmdexec.PollInterval)
	require.NoError(t, err)
	assert.False(t, res.TimedOut)
	assert.Equal(t, 0, *res.ExitCode)
	assert.Equal(t, streamedOut, res.Stdout)
	assertLive(t, rec, res)
	assert.GreaterOrEqual(t, res.Metadata["durationMs"], int64(2*time.Hour/time.Millisecond))
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

func TestCommandDeadlineRetiresSessionAndKillsCommand(t *testing.T) {
	e := newEnv(t, withFakeClock)
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	req := bashReq(streamedScript(g, id))
	req.Timeout = 2 * time.Hour
	ch := e.start(req, rec)
	rec.await(t, "stdout", "l2 ok\n")
	rec.await(t, "stderr", "e1 ☃\n")
	first := e.runner.SessionID(e.target.LeaseKey)
	require.NoError(t, e.clock.AwaitTimer(ctxT(t), 2*time.Hour))
	e.clock.Advance(2 * time.Hour)
	res, err := e.wait(ch)
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.Nil(t, res.ExitCode)
	assert.Equal(t, "l1 é🙂\nl2 ok\n", res.Stdout, "partial output")
	assert.Equal(t, "e1 ☃\nCommand timed out after 7200 s.\n", res.Stderr)
	assert.Equal(t, false, res.Metadata["commandExitConfirmed"])
	assert.Equal(t, "command", res.Metadata["timeoutScope"])
	assert.True(t, strings.HasPrefix(res.Stdout, rec.text("stdout")))
	assert.Equal(t, 1, e.count("DELETE", rSessionD), "timed-out command's session deleted")
	// The next command gets a fresh session and does not queue behind it.
	res2, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "echo", Args: []string{"next"}, Timeout: time.Hour}, nil)
	require.NoError(t, err)
	assert.Equal(t, "next\n", res2.Stdout)
	assert.NotEqual(t, first, e.runner.SessionID(e.target.LeaseKey))
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

func TestReconnectOnceThenPoll(t *testing.T) {
	e := newEnv(t, withFakeClock)
	// Both connections break after a few bytes: reconnect once, then poll.
	e.srv.Inject(daytonatest.Fault{Route: rLogs, WSClose: true, WSCloseAfterBytes: 6, Times: 2})
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	ch := e.start(bashReq(streamedScript(g, id)), rec)
	e.awaitTimer(cmdexec.PollInterval) // polling after two failed connections
	e.awaitOutput("l2 ok")
	e.clock.Advance(cmdexec.PollInterval)
	rec.await(t, "stdout", "l2 ok\n")
	g.open(t)
	res, err := e.drive(ch, cmdexec.PollInterval)
	require.NoError(t, err)
	assert.Equal(t, 0, *res.ExitCode)
	assert.Equal(t, streamedOut, res.Stdout)
	assert.Equal(t, streamedErr, res.Stderr)
	assertLive(t, rec, res)
	assert.Equal(t, 2, e.wsCount())
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

func TestCancelLeaseEndsInFlightAndRefusesLaterCalls(t *testing.T) {
	e := newEnv(t)
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	ch := e.start(bashReq(streamedScript(g, id)), rec)
	rec.await(t, "stdout", "l2 ok\n")
	e.runner.CancelLease(e.target.LeaseKey)
	res, err := e.wait(ch)
	require.Error(t, err)
	assert.ErrorIs(t, err, cmdexec.ErrLeaseNotActive)
	assert.Nil(t, res.ExitCode)
	assert.Equal(t, "l1 é🙂\nl2 ok\n", res.Stdout, "honest partial output")
	assert.False(t, e.runner.LeaseActive(e.target.LeaseKey))

	before := len(e.srv.Requests())
	_, err = e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "true"}, nil)
	assert.ErrorIs(t, err, cmdexec.ErrLeaseNotActive)
	_, err = e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "true", BypassSession: true}, nil)
	assert.ErrorIs(t, err, cmdexec.ErrLeaseNotActive)
	assert.Equal(t, before, len(e.srv.Requests()), "refused before any provider call")
	var lerr *cmdexec.LeaseNotActiveError
	assert.True(t, errors.As(err, &lerr))

	// Teardown still deletes the session; the tombstone stays.
	require.NoError(t, e.runner.CloseLease(ctxT(t), e.target.LeaseKey))
	assert.Equal(t, 1, e.count("DELETE", rSessionD))
	assert.False(t, e.runner.LeaseActive(e.target.LeaseKey))
	e.runner.ReopenLease(e.target.LeaseKey)
	res, err = e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "echo", Args: []string{"back"}}, nil)
	require.NoError(t, err)
	assert.Equal(t, "back\n", res.Stdout)
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

func TestSessionRecreatedAfterSandboxRestart(t *testing.T) {
	e := newEnv(t)
	res, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "echo", Args: []string{"one"}}, nil)
	require.NoError(t, err)
	assert.Equal(t, "one\n", res.Stdout)
	first := e.runner.SessionID(e.target.LeaseKey)

	require.NoError(t, e.srv.StopSandbox(e.sb.ID))
	require.NoError(t, e.srv.AwaitState(ctxT(t), e.sb.ID, daytonatest.StateStopped))
	_, _, err = e.client.Sandboxes.Start(ctxT(t), e.sb.ID)
	require.NoError(t, err)
	_, err = e.client.Sandboxes.WaitUntilStarted(ctxT(t), e.sb.ID)
	require.NoError(t, err)

	id := tag()
	rec := newRecorder()
	res, err = e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "echo", Args: []string{"two", id}}, rec.sink)
	require.NoError(t, err)
	assert.Equal(t, "two "+id+"\n", res.Stdout)
	assertLive(t, rec, res)
	assert.Equal(t, 1, e.srv.CountDispatches(id), "never re-dispatched")
	assert.Equal(t, 2, e.count("POST", rSession), "session recreated once")
	assert.NotEqual(t, first, e.runner.SessionID(e.target.LeaseKey))
}

func TestForgetSessionsAfterRestartSeenByProvider(t *testing.T) {
	e := newEnv(t)
	_, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "true"}, nil)
	require.NoError(t, err)
	e.runner.ForgetSessions(e.target.LeaseKey)
	assert.Equal(t, "", e.runner.SessionID(e.target.LeaseKey))
	_, err = e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "true"}, nil)
	require.NoError(t, err)
	assert.Equal(t, 2, e.count("POST", rSession))
	require.NoError(t, e.runner.CloseLease(ctxT(t), e.target.LeaseKey))
	assert.Equal(t, 1, e.count("DELETE", rSessionD), "a forgotten session is not deleted")
}
