package exec_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	cmdexec "github.com/daytonaworker/daytona-worker/exec"
)

// withFollowFirst sets Options.FollowFirstBelow.
func withFollowFirst(d time.Duration) envOpt {
	return func(o *cmdexec.Options) { o.FollowFirstBelow = d }
}

// holdFollowClose opens the session with a first command, makes the
// emulator keep every follow of it open after its command's exit until the
// test ends, and clears the request log.
func (e *env) holdFollowClose(t *testing.T) {
	t.Helper()
	_, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "true"}, nil) // opens the session
	require.NoError(t, err)
	release, ok := e.srv.HoldFollowClose(e.sb.ID, e.runner.SessionID(e.target.LeaseKey))
	require.True(t, ok)
	t.Cleanup(release)
	e.srv.ResetRequests()
}

// TestFollowFirstAfterAnInstantDispatch: a dispatch answered within
// FollowFirstBelow (the fake clock stands still, so here it always is)
// means a network so close that a snapshot would come before bash ran
// the command: the follow is opened at once, and a command that ends is
// done in two calls, dispatch and follow, without a status read, without
// a snapshot and without waiting for the socket's close (held open here).
func TestFollowFirstAfterAnInstantDispatch(t *testing.T) {
	e := newEnv(t, withFakeClock, withFollowFirst(cmdexec.FollowFirstRTT))
	e.holdFollowClose(t)
	rec := newRecorder()
	id := tag()
	res, err := e.wait(e.start(bashReq("printf 'a\\nb'; printf E >&2; : "+id+"; exit 3"), rec))
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode)
	assert.Equal(t, 3, *res.ExitCode)
	assert.Equal(t, "a\nb", res.Stdout, "exact bytes")
	assert.Equal(t, "E", res.Stderr)
	assert.Equal(t, "followed", res.Metadata["logStream"])
	assert.Equal(t, 2, e.commandCalls(), "dispatch and follow")
	assert.Equal(t, 1, e.wsCount(), "the follow, left before its close")
	assert.Equal(t, 1, e.count("GET", rLogs), "no snapshot besides the follow")
	assert.Equal(t, 0, e.count("GET", rStatus), "no status read")
	assert.Equal(t, 1, e.srv.CountDispatches(id))
	assertLive(t, rec, res)
}

// TestFollowFirstKeepsLiveOutputAndReconnect: with the follow opened
// first, output of a running command still goes live, and a follow that
// is refused is opened once more (reconnect), the command dispatched once.
func TestFollowFirstKeepsLiveOutputAndReconnect(t *testing.T) {
	e := newEnv(t, withFakeClock, withFollowFirst(cmdexec.FollowFirstRTT))
	e.srv.Inject(fault{Method: "GET", Route: rLogs, Times: 1, Status: 502})
	s := e.startStreamed(0, "")
	res, err := e.finish(t, s)
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode)
	assert.Equal(t, 0, *res.ExitCode)
	assert.Equal(t, streamedOut, res.Stdout)
	assert.Equal(t, streamedErr, res.Stderr)
	assert.Equal(t, "followed", res.Metadata["logStream"])
	assert.Equal(t, 2, e.wsCount(), "the refused follow and the reconnect")
	assert.Equal(t, 2, e.count("GET", rLogs), "no snapshot")
	assert.Equal(t, 0, e.count("GET", rStatus), "no status read")
	assert.Equal(t, 1, e.srv.CountDispatches(s.id))
	assert.Equal(t, streamedFirst, s.rec.text("stdout")[:len(streamedFirst)], "the part before the gate went live")
	assertLive(t, s.rec, res)
}

// TestSnapshotFirstAfterASlowDispatch: a dispatch that took longer than
// FollowFirstBelow (a network round trip) keeps the snapshot first: it
// reuses the dispatch's connection where a follow opens a new one.
func TestSnapshotFirstAfterASlowDispatch(t *testing.T) {
	e := newEnv(t, withFollowFirst(cmdexec.FollowFirstRTT))
	e.srv.Inject(fault{Method: "POST", Route: rExec, Times: 1, Delay: 2 * cmdexec.FollowFirstRTT})
	id := tag()
	res, err := e.runner.Execute(ctxT(t), e.target, bashReq("echo hi; : "+id), nil)
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode)
	assert.Equal(t, "hi\n", res.Stdout)
	assert.Equal(t, 1, e.count("GET", rLogs)-e.wsCount(), "one snapshot")
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}
