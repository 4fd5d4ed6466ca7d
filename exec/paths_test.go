package exec_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	cmdexec "github.com/daytonaworker/daytona-worker/exec"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// Routes of the paths (relative to the sandbox's toolbox).
const (
	rBulkDownload = "/files/bulk-download"
	rFileDelete   = "/files"
)

// TestEachPathOfThePlan runs one command down each path the plan can
// choose (docs/exec.md#paths), picked by what the lease remembers of the
// command line and of the network, and checks what the user gets: the
// bytes, the exit code, the path named in the metadata, and the calls it
// took. A path taken wrongly shows in its calls: a sync exec that is
// asynchronous makes a second call, a files command that uses the log
// loses its NUL bytes and makes no download, a followed command opens no
// WebSocket.
func TestEachPathOfThePlan(t *testing.T) {
	// Bytes the daemon's log cannot carry: NUL, its stream labels, a last
	// line without a newline.
	script := `printf 'out\0\001\001\001x'; printf 'err\n' >&2; exit 3`
	const exact, logged = "out\x00\x01\x01\x01x", "outx" // the log drops NUL and the label
	for _, c := range []struct {
		name   string
		rtt    time.Duration
		run    time.Duration
		known  bool
		print  int64
		path   string
		stdout string
		// calls: the toolbox calls for the command (exec, its command
		// routes, downloads); ws: follow connections.
		calls, ws int
	}{
		{name: "sync: one call at a far round trip", rtt: 100 * time.Millisecond, path: "sync", stdout: logged, calls: 1},
		{name: "read: an exec and a log read", known: true, run: time.Millisecond, path: "read", stdout: logged, calls: 2},
		{name: "files: an exec and one download, exact bytes", known: true, run: time.Millisecond, print: cmdexec.FilesFrom,
			path: "files", stdout: exact, calls: 2},
		{name: "followed: a long line is followed at once", known: true, run: time.Minute, path: "followed", stdout: logged, calls: 2, ws: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			warm := cmdexec.Request{Command: "true"}
			_, err := e.runner.Execute(ctxT(t), e.target, warm, nil) // opens the session
			require.NoError(t, err)
			req := bashReq(script)
			if c.known {
				cmdexec.SetLastRun(e.runner, e.target.LeaseKey, req, c.run, c.print)
			}
			cmdexec.SetRTT(e.runner, e.target.LeaseKey, c.rtt)
			e.srv.ResetRequests()
			rec := newRecorder()
			res, err := e.wait(e.start(req, rec))
			require.NoError(t, err)
			require.NotNil(t, res.ExitCode)
			assert.Equal(t, 3, *res.ExitCode)
			if ((c.path == "read" || c.path == "sync") && res.Metadata["logStream"] == "followed") ||
				(c.path == "files" && res.Metadata["logStream"] == "polled") {
				// Still running liveWithin after its dispatch: a machine
				// too loaded to show this path (TestFilesCommandThatRunsLongIsPolled
				// covers a files command that runs long).
				t.Skipf("the command outran its plan on this machine: %v", res.Metadata["logStream"])
			}
			assert.Equal(t, c.path, res.Metadata["logStream"])
			assert.Equal(t, c.stdout, res.Stdout)
			assert.Equal(t, "err\n", res.Stderr)
			calls := e.commandCalls() + e.count("POST", rBulkDownload)
			if c.path == "read" || c.path == "files" {
				// The lease knows only the shell-clock run here: a look
				// may come before the end on a slow machine.
				assert.GreaterOrEqual(t, calls, c.calls, "exec and looks")
				assert.Equal(t, 0, e.count("GET", rStatus), "no status read")
			} else {
				assert.Equal(t, c.calls, calls, "toolbox calls")
			}
			assert.Equal(t, c.ws, e.wsCount(), "follow connections")
			assert.Equal(t, 1, e.count("POST", rExec), "dispatched once")
			assertLive(t, rec, res)
			require.NoError(t, e.runner.CloseLease(ctxT(t), e.target.LeaseKey))
			if c.path == "files" {
				assert.Equal(t, 2, e.count("DELETE", rFileDelete), "both output files removed")
			}
		})
	}
}

// TestSyncCommandStillRunningGoesLive: a synchronous exec not answered
// within liveWithin is looked up in its session and followed, so a long
// command's output goes live; it is dispatched once.
func TestSyncCommandStillRunningGoesLive(t *testing.T) {
	e := newEnv(t)
	cmdexec.SetRTT(e.runner, e.target.LeaseKey, 100*time.Millisecond)
	gate := e.newGate()
	rec := newRecorder()
	ch := e.start(bashReq("echo first; "+gate.shell()+"; echo second"), rec)
	rec.await(t, "stdout", "first\n")
	gate.open(t)
	res, err := e.wait(ch)
	require.NoError(t, err)
	assert.Equal(t, "first\nsecond\n", res.Stdout)
	assert.Equal(t, "followed", res.Metadata["logStream"])
	assert.Equal(t, 1, e.count("POST", rExec), "dispatched once")
	assert.Equal(t, 1, e.count("GET", rSessionD), "looked up once")
	assert.Equal(t, 1, e.wsCount())
	assertLive(t, rec, res)
}

// TestFilesCommandThatRunsLongIsPolled: a files-path command still
// running past its looks is watched by status reads and read once after
// its exit: its output, exact, comes with the result.
func TestFilesCommandThatRunsLongIsPolled(t *testing.T) {
	e := newEnv(t)
	gate := e.newGate()
	req := bashReq(gate.shell() + `; printf 'a\0b'`)
	cmdexec.SetLastRun(e.runner, e.target.LeaseKey, req, time.Millisecond, cmdexec.FilesFrom)
	ch := e.start(req, nil)
	require.NoError(t, e.srv.AwaitRequests(ctxT(t), "GET", rStatus, 1), "polled")
	gate.open(t)
	res, err := e.wait(ch)
	require.NoError(t, err)
	assert.Equal(t, "a\x00b", res.Stdout)
	assert.Equal(t, "polled", res.Metadata["logStream"])
	assert.Equal(t, 0, e.wsCount(), "the files path is never followed")
}

// TestFilesCommandTimedOutKeepsItsOutput: a files-path command that times
// out keeps what it wrote, read from its files.
func TestFilesCommandTimedOutKeepsItsOutput(t *testing.T) {
	e := newEnv(t)
	req := bashReq(`printf 'so far'; exec sleep 60`)
	req.Timeout = 2 * time.Second
	cmdexec.SetLastRun(e.runner, e.target.LeaseKey, req, time.Millisecond, cmdexec.FilesFrom)
	res, err := e.runner.Execute(ctxT(t), e.target, req, nil)
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.Contains(t, res.Stdout, "so far")
}

// TestUncertainDispatchThatArrivedIsObserved: an exec whose answer is
// lost (a 502 after the daemon took it) is found in the session's command
// list by its marker and observed, not dispatched again.
func TestUncertainDispatchThatArrivedIsObserved(t *testing.T) {
	e := newEnv(t)
	_, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "true"}, nil)
	require.NoError(t, err)
	e.srv.Inject(fault{Method: "POST", Route: rExec, Times: 1, Status: 502, Perform: true})
	res, err := e.runner.Execute(ctxT(t), e.target, bashReq("echo once"), nil)
	require.NoError(t, err)
	assert.Equal(t, "once\n", res.Stdout)
	assert.Equal(t, 1, e.count("GET", rSessionD), "looked up")
	ds := e.srv.Dispatches()
	assert.Len(t, ds, 2, "true, then the command once")
}

// TestEchoOverAFarNetwork: behind a 100 ms round trip over TLS, with
// every connection charged its handshakes, `echo hi` after the first
// command takes the synchronous path: one call, and no new connection.
// Before each measured run the line's history is pinned to a 1 ms run
// (SetLastRun): the plan's choice is plan_test's subject, and a loaded
// machine's slow echo must not move this test off the path it checks.
// (A machine so loaded that the echo outruns liveWithin itself takes the
// follow instead; that run proves nothing and is skipped.)
func TestEchoOverAFarNetwork(t *testing.T) {
	const rtt = 100 * time.Millisecond
	e := newEnvWith(t, []testenv.Option{testenv.WithServer(daytonatest.WithNetwork(daytonatest.Network{RTT: rtt}), daytonatest.WithTLS())})
	echo := cmdexec.Request{Command: "echo", Args: []string{"hi"}, Timeout: time.Minute}
	for i := 0; i < 2; i++ { // warm-up: the session, the round trip, the line's last run
		_, err := e.runner.Execute(ctxT(t), e.target, echo, nil)
		require.NoError(t, err)
	}
	conns := e.srv.Connections()
	for i := 0; i < 3; i++ {
		cmdexec.SetRTT(e.runner, e.target.LeaseKey, rtt)
		cmdexec.SetLastRun(e.runner, e.target.LeaseKey, echo, time.Millisecond, 3)
		e.srv.ResetRequests()
		res, err := e.runner.Execute(ctxT(t), e.target, echo, nil)
		require.NoError(t, err)
		assert.Equal(t, "hi\n", res.Stdout)
		if res.Metadata["logStream"] == "followed" {
			t.Skip("the machine outran liveWithin")
		}
		assert.Equal(t, "sync", res.Metadata["logStream"])
		assert.Equal(t, 1, len(e.srv.Requests()), "one call")
	}
	assert.Equal(t, conns, e.srv.Connections(), "no new connection after warm-up")
}

// TestStopDuringALookWait: a command waiting for its next look (the fake
// clock holds it there) ends at once when its lease is cancelled, with an
// error matching ErrLeaseNotActive and no further read.
func TestStopDuringALookWait(t *testing.T) {
	e := newEnv(t, withFakeClock)
	gate := e.newGate()
	req := bashReq("echo started; " + gate.shell())
	ch := e.start(req, nil)
	require.NoError(t, e.clock.AwaitTimer(ctxT(t), cmdexec.MarkMargin), "waiting for the first look")
	reads := e.count("GET", rLogs)
	e.runner.CancelLease(e.target.LeaseKey)
	res, err := e.wait(ch)
	require.ErrorIs(t, err, cmdexec.ErrLeaseNotActive)
	assert.Nil(t, res.ExitCode)
	assert.Equal(t, false, res.Metadata["commandExitConfirmed"])
	assert.Equal(t, reads, e.count("GET", rLogs), "no read after the stop")
	gate.open(t)
	require.NoError(t, e.runner.CloseLease(ctxT(t), e.target.LeaseKey))
}

// TestLabelBytesTakeTheFilesPathNextTime: output whose unfinished last
// line holds the daemon's label runs sends the end marker to the other
// stream's log; the command still ends at its markers (no wait for the
// follow's close), and the line's next run takes the files path, whose
// bytes are exact.
func TestLabelBytesTakeTheFilesPathNextTime(t *testing.T) {
	e := newEnv(t)
	req := bashReq(`printf 'x\0y\n\001\001\001out\n\002\002\002err\n\001\001\001\002\002\002'`)
	res, err := e.runner.Execute(ctxT(t), e.target, req, nil)
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode)
	assert.Equal(t, 0, e.count("GET", rStatus), "ended by its markers, not by a status read")
	// The files path is "files", or "polled" when a loaded machine ran the
	// command past its looks; either way it is never followed, and only
	// the files bring these bytes back exact.
	ws := e.wsCount()
	for _, why := range []string{"the log garbled the last run", "the files showed what the log cannot carry: it stays"} {
		res, err = e.runner.Execute(ctxT(t), e.target, req, nil)
		require.NoError(t, err)
		assert.Contains(t, []string{"files", "polled"}, res.Metadata["logStream"], why)
		assert.Equal(t, "x\x00y\n\x01\x01\x01out\n\x02\x02\x02err\n\x01\x01\x01\x02\x02\x02", res.Stdout, why)
		assert.Equal(t, "", res.Stderr, why)
	}
	assert.Equal(t, ws, e.wsCount(), "the files path is never followed")
}

// TestSyncAnswerMeasuresTheRoundTripWithoutItsTick: a synchronous answer
// comes a round trip plus the run rounded up to the daemon's tick; the
// round trip the lease keeps from it leaves the tick out (at least one
// tick less than the call took), so the next plan compares like with
// like. The lease starts out believing in a 1 s round trip, which the
// answer must replace.
func TestSyncAnswerMeasuresTheRoundTripWithoutItsTick(t *testing.T) {
	const rtt = 100 * time.Millisecond
	e := newEnvWith(t, []testenv.Option{testenv.WithServer(daytonatest.WithNetwork(daytonatest.Network{RTT: rtt}))})
	echo := cmdexec.Request{Command: "echo", Args: []string{"hi"}, Timeout: time.Minute}
	_, err := e.runner.Execute(ctxT(t), e.target, echo, nil) // the session
	require.NoError(t, err)
	cmdexec.SetRTT(e.runner, e.target.LeaseKey, time.Second)
	cmdexec.SetLastRun(e.runner, e.target.LeaseKey, echo, time.Millisecond, 3)
	start := time.Now()
	res, err := e.runner.Execute(ctxT(t), e.target, echo, nil)
	took := time.Since(start)
	require.NoError(t, err)
	if res.Metadata["logStream"] == "followed" {
		t.Skip("the machine outran liveWithin")
	}
	require.Equal(t, "sync", res.Metadata["logStream"])
	got := cmdexec.RTT(e.runner, e.target.LeaseKey)
	assert.LessOrEqual(t, got, took-cmdexec.DaemonExitTick, "the tick is not part of the round trip")
	// The network alone took rtt; a run that the margin pushed past a
	// tick takes at most one tick more off.
	assert.GreaterOrEqual(t, got, rtt-cmdexec.DaemonExitTick)
}

// TestSessionLostOnEveryDispatchGivesUpAfterTwo: a dispatch whose answer
// proves the session is gone recreates the session and dispatches once
// more, and only once: a second such answer ends the command with an
// error that says so.
func TestSessionLostOnEveryDispatchGivesUpAfterTwo(t *testing.T) {
	e := newEnv(t)
	e.srv.Inject(fault{Method: "POST", Route: rExec, Status: 500,
		Body: `{"statusCode":500,"message":"failed to execute command: not found: session not found","timestamp":"0001-01-01T00:00:00Z","path":""}`})
	_, err := e.runner.Execute(ctxT(t), e.target, bashReq("echo never"), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "session lost twice")
	assert.NotErrorIs(t, err, cmdexec.ErrDispatchUncertain, "the answers proved the shell never took it")
	assert.Equal(t, 2, e.count("POST", rExec), "dispatched twice, no more")
	assert.Equal(t, 2, e.count("POST", rSession), "each time on a new session")
}

// TestStopDuringADispatchIsTheStop: a lease cancelled while the exec is
// in flight (held by the daemon before it took the command) ends the
// command as uncertain, with the stop as the cause, not the transport's
// "context canceled".
func TestStopDuringADispatchIsTheStop(t *testing.T) {
	e := newEnv(t)
	_, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "true"}, nil)
	require.NoError(t, err)
	cmdexec.SetRTT(e.runner, e.target.LeaseKey, 0) // an asynchronous exec
	hold := make(chan struct{})
	defer close(hold)
	e.srv.Inject(fault{Method: "POST", Route: rExec, Times: 1, Gate: hold})
	e.srv.ResetRequests()
	ch := e.start(bashReq("echo never"), nil)
	require.NoError(t, e.srv.AwaitRequests(ctxT(t), "POST", rExec, 1))
	e.runner.CancelLease(e.target.LeaseKey)
	_, err = e.wait(ch)
	require.ErrorIs(t, err, cmdexec.ErrDispatchUncertain)
	assert.ErrorIs(t, err, cmdexec.ErrLeaseNotActive)
	assert.Equal(t, 1, e.count("POST", rExec), "never dispatched again")
}
