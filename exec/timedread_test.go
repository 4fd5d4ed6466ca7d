package exec_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	cmdexec "github.com/daytonaworker/daytona-worker/exec"
)

// withTimedFirstRead sets Options.TimeFirstRead (and follow first, so that
// without a learned run time the follow would be the first read).
func withTimedFirstRead(o *cmdexec.Options) {
	o.TimeFirstRead = true
	o.FollowFirstBelow = cmdexec.FollowFirstRTT
}

// learnRunTime runs a first command on the lease, checks that its end
// marker taught the runner its run time, and then sets that run time to
// learned (this machine's speed must not decide the test): the settle is
// learned plus a millisecond.
func (e *env) learnRunTime(learned time.Duration) (settle time.Duration) {
	e.t.Helper()
	res, err := e.runner.Execute(ctxT(e.t), e.target, bashReq("true"), nil)
	require.NoError(e.t, err)
	assert.Equal(e.t, "followed", res.Metadata["logStream"], "nothing learned yet: follow first")
	require.Equal(e.t, 1, cmdexec.LearnedRunTimes(e.runner, e.target.LeaseKey), "the end marker carried the run time")
	cmdexec.SetRunTimes(e.runner, e.target.LeaseKey, learned)
	e.srv.ResetRequests()
	return learned + time.Millisecond
}

// TestTimedFirstReadAfterLearningTheRunTime: the first command on a lease
// is followed at once (dispatch + follow: nothing is known yet); its end
// marker carries its run time. The next command's first read waits for
// that run time (on the runner's clock) and is then a snapshot over a
// pooled connection that finds it finished: two calls, no WebSocket, no
// wait for the daemon's 20 ms log tail, even though the dispatch answered
// at once (which without a learned run time means follow first).
func TestTimedFirstReadAfterLearningTheRunTime(t *testing.T) {
	e := newEnv(t, withFakeClock, withTimedFirstRead)
	settle := e.learnRunTime(20 * time.Millisecond)
	id := tag()
	ch := e.start(bashReq("printf hi; : "+id), nil)
	e.awaitTimer(settle)
	e.awaitExited()
	assert.Equal(t, 0, e.count("GET", rLogs), "no read before the settle")
	e.clock.Advance(settle)
	res, err := e.wait(ch)
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode)
	assert.Equal(t, 0, *res.ExitCode)
	assert.Equal(t, "hi", res.Stdout)
	assert.Equal(t, "fast_path", res.Metadata["logStream"])
	assert.Equal(t, 2, e.commandCalls(), "dispatch and one snapshot")
	assert.Equal(t, 0, e.wsCount(), "no follow")
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

// TestTimedFirstReadTooEarlyFollows: a command that runs longer than the
// learned run time is still running at the timed snapshot, at the second
// read and at the later ones; what they brought goes live, the follow takes over by byte
// offset, and the command ends exactly once with every byte.
func TestTimedFirstReadTooEarlyFollows(t *testing.T) {
	e := newEnv(t, withFakeClock, withTimedFirstRead)
	settle := e.learnRunTime(20 * time.Millisecond)
	s := e.startStreamed(0, "")
	// The timed read at 21 ms; the second as late as the slowest run (the
	// only one) allows, at 23; the later reads at 27, 31, 39, 55 and 87
	// (the next, 151, is past twice the second and LaterReadsLast).
	e.advanceTimers(append([]time.Duration{settle, cmdexec.SecondReadGap}, laterReadGaps...)...)
	res, err := e.finish(t, s)
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode)
	assert.Equal(t, streamedOut, res.Stdout)
	assert.Equal(t, streamedErr, res.Stderr)
	assert.Equal(t, "followed", res.Metadata["logStream"])
	assert.Equal(t, 7, e.count("GET", rLogs)-e.wsCount(), "the timed snapshot, the second read and five later reads")
	assert.Equal(t, 1, e.wsCount(), "then the follow")
	assert.Equal(t, 1, e.srv.CountDispatches(s.id))
	assertLive(t, s.rec, res)
}

// TestNoTimedReadOnALeaseOfLongCommands: when most recent commands ran
// longer than the longest settle, nothing waits: a dispatch answered at
// once opens the follow at once, as without a learned run time.
func TestNoTimedReadOnALeaseOfLongCommands(t *testing.T) {
	e := newEnv(t, withFakeClock, withTimedFirstRead)
	e.learnRunTime(5 * time.Second)
	res, err := e.runner.Execute(ctxT(t), e.target, bashReq("printf hi"), nil)
	require.NoError(t, err)
	assert.Equal(t, "hi", res.Stdout)
	assert.Equal(t, "followed", res.Metadata["logStream"])
	assert.Equal(t, 2, e.commandCalls(), "dispatch and follow")
	assert.Equal(t, 1, e.wsCount())
}

// TestTimedFirstReadUsesTheCommandsOwnRunTimes: a command line that ran on
// the lease before has its first read timed from its own run times, not
// from the lease's (here a slow setup step's 90 ms); a new one from the
// lease's.
func TestTimedFirstReadUsesTheCommandsOwnRunTimes(t *testing.T) {
	e := newEnv(t, withFakeClock, withTimedFirstRead)
	e.learnRunTime(90 * time.Millisecond)
	known := bashReq("printf known")
	cmdexec.SetCommandRunTimes(e.runner, e.target.LeaseKey, known, 5*time.Millisecond)
	for _, c := range []struct {
		req    cmdexec.Request
		settle time.Duration
		out    string
	}{{known, 6 * time.Millisecond, "known"}, {bashReq("printf new"), 91 * time.Millisecond, "new"}} {
		e.srv.ResetRequests()
		ch := e.start(c.req, nil)
		e.awaitTimer(c.settle)
		e.awaitExited()
		assert.Equal(t, 0, e.count("GET", rLogs), "no read before the settle")
		e.clock.Advance(c.settle)
		res, err := e.wait(ch)
		require.NoError(t, err)
		assert.Equal(t, c.out, res.Stdout)
		assert.Equal(t, "fast_path", res.Metadata["logStream"])
		assert.Equal(t, 2, e.commandCalls(), "dispatch and one snapshot")
	}
}

// TestTimedFirstReadForACommandLineOfLongerRuns: a command line whose own
// runs took 150 ms (a listing, a large file), longer than the lease's
// short commands may run, still has its first read timed from them: two
// calls, no follow replaying its log.
func TestTimedFirstReadForACommandLineOfLongerRuns(t *testing.T) {
	e := newEnv(t, withFakeClock, withTimedFirstRead)
	e.learnRunTime(20 * time.Millisecond)
	req := bashReq("printf listing")
	cmdexec.SetCommandRunTimes(e.runner, e.target.LeaseKey, req, 150*time.Millisecond)
	ch := e.start(req, nil)
	e.awaitTimer(151 * time.Millisecond)
	e.awaitExited()
	assert.Equal(t, 0, e.count("GET", rLogs), "no read before the settle")
	e.clock.Advance(151 * time.Millisecond)
	res, err := e.wait(ch)
	require.NoError(t, err)
	assert.Equal(t, "listing", res.Stdout)
	assert.Equal(t, "fast_path", res.Metadata["logStream"])
	assert.Equal(t, 2, e.commandCalls(), "dispatch and one snapshot")
}

// TestTimedSecondReadCatchesASlowerCommand: a command a little slower
// than the learned run times is still running at the timed first read;
// the second read, when the slowest of them would have ended, finds it
// finished: three calls over pooled connections, no WebSocket.
func TestTimedSecondReadCatchesASlowerCommand(t *testing.T) {
	e := newEnv(t, withFakeClock, withTimedFirstRead)
	settle := e.learnRunTime(20 * time.Millisecond)
	g := e.newGate()
	id := tag()
	ch := e.start(bashReq("printf a; "+g.shell()+"; printf b; : "+id), nil)
	e.awaitTimer(settle)
	e.clock.Advance(settle)
	e.awaitTimer(cmdexec.SecondReadGap)
	require.Equal(t, 1, e.count("GET", rLogs), "the first read came too early")
	res := e.releaseAtTimer(g, cmdexec.SecondReadGap, ch)
	assert.Equal(t, "ab", res.Stdout)
	assert.Equal(t, 3, e.commandCalls(), "dispatch and two snapshots")
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

// laterReadGaps are the waits between the reads after the second one
// (at second + 4, 8, 16, 32 and 64 ms).
var laterReadGaps = []time.Duration{cmdexec.LaterReadGap, cmdexec.LaterReadGap, 2 * cmdexec.LaterReadGap, 4 * cmdexec.LaterReadGap, 8 * cmdexec.LaterReadGap}

// advanceTimers waits for each timer of ds in turn and fires it.
func (e *env) advanceTimers(ds ...time.Duration) {
	e.t.Helper()
	for _, d := range ds {
		e.awaitTimer(d)
		e.clock.Advance(d)
	}
}

// releaseAtTimer opens g while the runner waits on its timer of d, waits
// for the command's exit, fires the timer and returns the result of ch,
// which the read at that timer must have found: an exit code, the fast
// path, no follow.
func (e *env) releaseAtTimer(g *gate, d time.Duration, ch <-chan execOut) cmdexec.Result {
	e.t.Helper()
	g.open(e.t)
	e.awaitExited()
	e.clock.Advance(d)
	res, err := e.wait(ch)
	require.NoError(e.t, err)
	require.NotNil(e.t, res.ExitCode)
	assert.Equal(e.t, "fast_path", res.Metadata["logStream"])
	assert.Equal(e.t, 0, e.wsCount(), "no follow")
	return res
}

// TestLaterReadsCatchACommandSlowerThanItsRuns: a command still running
// at the timed read, at the second read and at the first later read ends
// before the next later read, which finds it finished: five calls over
// pooled connections and no WebSocket, where a follow would have cost a
// new connection and the daemon's log tail. The reads' text went live.
func TestLaterReadsCatchACommandSlowerThanItsRuns(t *testing.T) {
	e, id, rec, res := catchAtLaterRead(t, 1)
	assert.Equal(t, "a\nb", res.Stdout)
	assert.Equal(t, 5, e.commandCalls(), "dispatch and four snapshots")
	assert.Equal(t, 1, e.srv.CountDispatches(id))
	assert.Equal(t, "a\n", rec.text("stdout"), "what the early reads brought went live")
	assertLive(t, rec, res)
}

// TestLaterReadsGoOnPastTwiceTheSlowestRun: a command line whose runs took
// 20 ms (an echo on daytona-sim) and that runs more than twice as long
// this time (a loaded sandbox) is found finished by a later read at
// 55 ms, within LaterReadsLast: seven calls over pooled connections,
// where twice the slowest run (46 ms) would have ended the reads and
// opened a WebSocket for a command that ended a few milliseconds later.
func TestLaterReadsGoOnPastTwiceTheSlowestRun(t *testing.T) {
	second := 21*time.Millisecond + cmdexec.SecondReadGap
	at := second + laterReadGaps[0] + laterReadGaps[1] + laterReadGaps[2] + laterReadGaps[3]
	require.Greater(t, at, 2*second, "the read at 55 ms comes after twice the second")
	require.LessOrEqual(t, at, cmdexec.LaterReadsLast, "and within the least the later reads go on")
	e, id, _, res := catchAtLaterRead(t, 3)
	assert.Equal(t, "a\nb", res.Stdout)
	assert.Equal(t, 7, e.commandCalls(), "dispatch and six snapshots")
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

// catchAtLaterRead runs, on a lease that learned a 20 ms run time (timed
// read at 21 ms, second at 23, later reads at 27, 31, 39, 55 …), a
// command that prints "a\n", waits on a gate and prints "b"; the gate
// opens while the runner waits for later read n (0-based), which must
// find the command finished: reads 2+n came too early.
func catchAtLaterRead(t *testing.T, n int) (e *env, id string, rec *recorder, res cmdexec.Result) {
	t.Helper()
	e = newEnv(t, withFakeClock, withTimedFirstRead)
	settle := e.learnRunTime(20 * time.Millisecond)
	g := e.newGate()
	id = tag()
	rec = newRecorder()
	ch := e.start(bashReq(`printf 'a\n'; `+g.shell()+"; printf b; : "+id), rec)
	e.awaitStdout(id, func(stdout []byte) bool { return string(stdout) == "a\n" })
	e.advanceTimers(append([]time.Duration{settle, cmdexec.SecondReadGap}, laterReadGaps[:n]...)...)
	e.awaitTimer(laterReadGaps[n])
	require.Equal(t, 2+n, e.count("GET", rLogs), "the reads before it came too early")
	return e, id, rec, e.releaseAtTimer(g, laterReadGaps[n], ch)
}

// largeLogRun is a command started by startLargeLog.
type largeLogRun struct {
	settle time.Duration // its timed first read, after the dispatch
	g      *gate         // holds it after LargeLog bytes; open to end it
	id     string
	rec    *recorder
	ch     <-chan execOut
}

// largeLogStdout is what a command started by startLargeLog prints.
var largeLogStdout = strings.Repeat("a\n", cmdexec.LargeLog/2) + "b"

// startLargeLog starts, on a lease that learned a 20 ms run time (with a
// fake clock, first reads timed), a command that prints LargeLog bytes and
// then waits on a gate before it prints "b" and ends; it returns once
// those bytes are in the log.
func startLargeLog(t *testing.T) (*env, largeLogRun) {
	t.Helper()
	e := newEnv(t, withFakeClock, withTimedFirstRead)
	r := largeLogRun{settle: e.learnRunTime(20 * time.Millisecond), g: e.newGate(), id: tag(), rec: newRecorder()}
	r.ch = e.start(bashReq(fmt.Sprintf("yes a | head -c %d; %s; printf b; : %s", cmdexec.LargeLog, r.g.shell(), r.id)), r.rec)
	e.awaitStdout(r.id, func(stdout []byte) bool { return len(stdout) == cmdexec.LargeLog })
	return e, r
}

// TestLargeLogIsReadAgainOnlyAfterTheExit: when the timed read brought
// LargeLog bytes of a command that had not ended, the reads after it are
// status reads (each snapshot would carry the whole log again), and once
// one shows the exit a single snapshot brings the rest: no WebSocket, and
// the log is read twice in all.
func TestLargeLogIsReadAgainOnlyAfterTheExit(t *testing.T) {
	e, r := startLargeLog(t)
	e.advanceTimers(r.settle, cmdexec.SecondReadGap)
	e.awaitTimer(laterReadGaps[0])
	assert.Equal(t, 1, e.count("GET", rLogs), "the timed snapshot only")
	assert.Equal(t, 1, e.count("GET", rStatus), "the second read was a status read")
	res := e.releaseAtTimer(r.g, laterReadGaps[0], r.ch)
	assert.Equal(t, 0, *res.ExitCode)
	assert.True(t, largeLogStdout == res.Stdout, "exact bytes")
	assert.Equal(t, 2, e.count("GET", rStatus), "the exit was read")
	assert.Equal(t, 2, e.count("GET", rLogs), "and then the log, once")
	assert.Equal(t, 1, e.srv.CountDispatches(r.id))
	assertLive(t, r.rec, res)
}

// TestBulkCommandLineIsWatchedWithStatusReads: a command line whose last
// run left a large log is not read whole at a timed snapshot: status reads
// watch its exit from when its fastest run would have ended, and one
// snapshot after the exit brings the output. Nothing goes live (the host
// gets those bytes once, in the result), and no WebSocket is opened.
func TestBulkCommandLineIsWatchedWithStatusReads(t *testing.T) {
	e := newEnv(t, withFakeClock, withTimedFirstRead)
	e.learnRunTime(20 * time.Millisecond)
	g := e.newGate()
	n := cmdexec.LargeLog
	req := bashReq(fmt.Sprintf("yes a | head -c %d; %s; printf b", n, g.shell()))
	cmdexec.SetCommandRunTimes(e.runner, e.target.LeaseKey, req, 20*time.Millisecond, 30*time.Millisecond)
	cmdexec.MarkLargeLog(e.runner, e.target.LeaseKey, req)
	rec := newRecorder()
	ch := e.start(req, rec)
	// From the fastest run (21 ms with the margin) every 4 ms until the
	// slowest (31 ms), then at doubling gaps.
	e.advanceTimers(21*time.Millisecond, cmdexec.BulkWatchGap, cmdexec.BulkWatchGap)
	e.awaitTimer(cmdexec.BulkWatchGap)
	assert.Equal(t, 3, e.count("GET", rStatus), "three status reads")
	assert.Equal(t, 0, e.count("GET", rLogs), "no snapshot of the running command")
	res := e.releaseAtTimer(g, cmdexec.BulkWatchGap, ch)
	assert.True(t, largeLogStdout == res.Stdout, "exact bytes")
	assert.Equal(t, 4, e.count("GET", rStatus))
	assert.Equal(t, 1, e.count("GET", rLogs), "one snapshot, after the exit")
	assert.Empty(t, rec.all(), "nothing went live")
}

// TestLargeLogIsLearned: a run that leaves LargeLog bytes of log marks its
// command line as one that prints a lot; a short one does not.
func TestLargeLogIsLearned(t *testing.T) {
	e := newEnv(t, withTimedFirstRead)
	bulk := bashReq(fmt.Sprintf("yes a | head -c %d", cmdexec.LargeLog))
	short := bashReq("printf hi")
	for _, req := range []cmdexec.Request{bulk, short} {
		_, err := e.runner.Execute(ctxT(t), e.target, req, nil)
		require.NoError(t, err)
	}
	assert.True(t, cmdexec.LargeLogLearned(e.runner, e.target.LeaseKey, bulk))
	assert.False(t, cmdexec.LargeLogLearned(e.runner, e.target.LeaseKey, short))
}

// TestFailedSnapshotAfterTheExitIsReadAgain: when the snapshot after a
// status read that showed the exit fails, the command is not reported
// failed: the next watch read sees the exit again and its snapshot brings
// the output.
func TestFailedSnapshotAfterTheExitIsReadAgain(t *testing.T) {
	e := newEnv(t, withFakeClock, withTimedFirstRead)
	e.learnRunTime(20 * time.Millisecond)
	n := cmdexec.LargeLog
	id := tag()
	req := bashReq(fmt.Sprintf("yes a | head -c %d; : %s", n, id))
	cmdexec.SetCommandRunTimes(e.runner, e.target.LeaseKey, req, 20*time.Millisecond)
	cmdexec.MarkLargeLog(e.runner, e.target.LeaseKey, req)
	e.srv.Inject(daytonatest.Fault{Route: rLogs, Times: 1, Status: 503})
	ch := e.start(req, nil)
	require.NoError(t, e.srv.Await(ctxT(t), func() bool { return e.srv.CountDispatches(id) == 1 }))
	e.awaitExited()
	e.advanceTimers(21*time.Millisecond, cmdexec.BulkWatchGap)
	res, err := e.wait(ch)
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode)
	assert.Equal(t, 0, *res.ExitCode)
	assert.True(t, strings.Repeat("a\n", n/2) == res.Stdout, "exact bytes")
	assert.Equal(t, "fast_path", res.Metadata["logStream"])
	assert.Equal(t, 2, e.count("GET", rStatus))
	assert.Equal(t, 2, e.count("GET", rLogs), "the refused snapshot and the next")
	assert.Equal(t, 0, e.wsCount())
}

// TestLargeLogIsWatchedBeforeItIsFollowed: a command whose timed read
// brought LargeLog bytes and which is still running after its later reads
// is not followed at once: status reads at the catch-up read's gaps
// (ExitWatch, doubling) watch its exit, and one snapshot after the exit
// brings the rest. No WebSocket, whose follow would replay the whole log
// from its start in 1 KiB frames.
func TestLargeLogIsWatchedBeforeItIsFollowed(t *testing.T) {
	e, r := startLargeLog(t)
	e.advanceTimers(append([]time.Duration{r.settle, cmdexec.SecondReadGap}, laterReadGaps...)...)
	e.advanceTimers(cmdexec.ExitWatch)
	e.awaitTimer(2 * cmdexec.ExitWatch)
	assert.Equal(t, 1, e.count("GET", rLogs), "the timed snapshot only")
	assert.Equal(t, 1+len(laterReadGaps)+1, e.count("GET", rStatus), "the second read, the later reads and the first watch read")
	res := e.releaseAtTimer(r.g, 2*cmdexec.ExitWatch, r.ch)
	assert.True(t, largeLogStdout == res.Stdout, "exact bytes")
	assert.Equal(t, 2+len(laterReadGaps)+1, e.count("GET", rStatus), "the exit was read")
	assert.Equal(t, 2, e.count("GET", rLogs), "and then the log, once")
	assert.Equal(t, 1, e.srv.CountDispatches(r.id))
	assertLive(t, r.rec, res)
}

// TestLongCommandWithALargeLogIsFollowedAfterTheWatch: a command with a
// large log still running when the watch of its exit ends (ExitWatchMax)
// is a long one, and the follow carries it to its end.
func TestLongCommandWithALargeLogIsFollowedAfterTheWatch(t *testing.T) {
	e, r := startLargeLog(t)
	e.advanceTimers(append([]time.Duration{r.settle, cmdexec.SecondReadGap}, laterReadGaps...)...)
	e.advanceTimers(exitWatches()...)
	require.NoError(t, e.srv.AwaitRequests(ctxT(t), "GET", rLogs, 2), "the follow")
	assert.Equal(t, 1, e.wsCount())
	assert.Equal(t, 1+len(laterReadGaps)+len(exitWatches()), e.count("GET", rStatus), "the watch ended")
	r.g.open(t)
	res, err := e.driveWatch(r.ch)
	require.NoError(t, err)
	assert.Equal(t, "followed", res.Metadata["logStream"])
	assert.True(t, largeLogStdout == res.Stdout, "exact bytes")
	assert.Equal(t, 1, e.srv.CountDispatches(r.id))
	assertLive(t, r.rec, res)
}

// newFarLease is an env on a far network (first reads timed, no follow
// first, so no exit watch of a bulk command line) whose lease and session
// a first command has opened.
func newFarLease(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, withFakeClock, func(o *cmdexec.Options) { o.TimeFirstRead = true })
	_, err := e.runner.Execute(ctxT(t), e.target, bashReq("true"), nil)
	require.NoError(t, err)
	return e
}

// bulkLineRuns are the recent run times the far-network tests give a
// command line: its slowest is 50 ms, its second slowest 40.
var bulkLineRuns = []time.Duration{20 * time.Millisecond, 30 * time.Millisecond, 40 * time.Millisecond, 50 * time.Millisecond}

// TestBulkCommandLineIsWatchedWhenItsFirstReadBroughtLittle: on a far
// network, a command line whose last run left a large log (a `cat`) and
// whose timed snapshot came early, with less than LargeLog bytes, has
// its exit watched with status reads: every later snapshot would carry
// the growing log again, and a follow would replay it from its first
// byte in 1 KiB frames behind a new connection. After the exit one
// snapshot brings the rest.
func TestBulkCommandLineIsWatchedWhenItsFirstReadBroughtLittle(t *testing.T) {
	e := newFarLease(t)
	g := e.newGate()
	id := tag()
	req := bashReq(`printf 'a\n'; ` + g.shell() + "; printf b; : " + id)
	cmdexec.SetCommandRunTimes(e.runner, e.target.LeaseKey, req, bulkLineRuns...)
	cmdexec.MarkLargeLog(e.runner, e.target.LeaseKey, req)
	e.srv.ResetRequests()
	rec := newRecorder()
	ch := e.start(req, rec)
	e.awaitStdout(id, func(stdout []byte) bool { return string(stdout) == "a\n" })
	// The timed snapshot at the slowest run (51 ms), the second read at
	// 53, later reads at 57, 61, 69 and 85; then the exit watch.
	e.advanceTimers(append([]time.Duration{51 * time.Millisecond, cmdexec.SecondReadGap}, laterReadGaps[:4]...)...)
	e.awaitTimer(cmdexec.ExitWatch)
	assert.Equal(t, 1, e.count("GET", rLogs), "the timed snapshot only")
	assert.Equal(t, 5, e.count("GET", rStatus), "the second and the later reads")
	res := e.releaseAtTimer(g, cmdexec.ExitWatch, ch)
	assert.Equal(t, "a\nb", res.Stdout)
	assert.Equal(t, 2, e.count("GET", rLogs), "the log once more, after the exit")
	assert.Equal(t, 1, e.srv.CountDispatches(id))
	assertLive(t, rec, res)
}

// TestTimedReadOfABulkCommandLineWaitsForItsSlowestRun: on a far network
// (no follow first, so no exit watch of a bulk command line), a command
// line whose last run left a large log has its first read timed at the
// slowest of its recent runs, where another command line's waits for the
// second slowest: a snapshot before the end would carry the large log
// twice.
func TestTimedReadOfABulkCommandLineWaitsForItsSlowestRun(t *testing.T) {
	e := newFarLease(t)
	for _, large := range []bool{false, true} {
		id := tag()
		req := bashReq("printf x; : " + id)
		cmdexec.SetCommandRunTimes(e.runner, e.target.LeaseKey, req, bulkLineRuns...)
		want := 40*time.Millisecond + time.Millisecond // the second slowest and the margin
		if large {
			cmdexec.MarkLargeLog(e.runner, e.target.LeaseKey, req)
			want = 50*time.Millisecond + time.Millisecond
		}
		ch := e.start(req, nil)
		require.NoError(t, e.srv.Await(ctxT(t), func() bool { return e.srv.CountDispatches(id) == 1 }))
		e.awaitExited()
		e.advanceTimers(want)
		res, err := e.wait(ch)
		require.NoError(t, err)
		assert.Equal(t, "x", res.Stdout)
		assert.Equal(t, "fast_path", res.Metadata["logStream"], "large %v", large)
	}
}
