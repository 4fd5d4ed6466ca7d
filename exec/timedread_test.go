package exec_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
// learned run time is still running at the timed snapshot and at the
// second read; what they brought goes live, the follow takes over by byte
// offset, and the command ends exactly once with every byte.
func TestTimedFirstReadTooEarlyFollows(t *testing.T) {
	e := newEnv(t, withFakeClock, withTimedFirstRead)
	settle := e.learnRunTime(20 * time.Millisecond)
	s := e.startStreamed(0, "")
	e.awaitTimer(settle)
	e.clock.Advance(settle)
	e.awaitTimer(cmdexec.SecondReadGap) // the second read, as late as the slowest run (the only one) allows
	e.clock.Advance(cmdexec.SecondReadGap)
	res, err := e.finish(t, s)
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode)
	assert.Equal(t, streamedOut, res.Stdout)
	assert.Equal(t, streamedErr, res.Stderr)
	assert.Equal(t, "followed", res.Metadata["logStream"])
	assert.Equal(t, 2, e.count("GET", rLogs)-e.wsCount(), "the timed snapshot and the second read")
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
	g.open(t)
	e.awaitExited()
	e.clock.Advance(cmdexec.SecondReadGap)
	res, err := e.wait(ch)
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode)
	assert.Equal(t, "ab", res.Stdout)
	assert.Equal(t, "fast_path", res.Metadata["logStream"])
	assert.Equal(t, 3, e.commandCalls(), "dispatch and two snapshots")
	assert.Equal(t, 0, e.wsCount(), "no follow")
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}
