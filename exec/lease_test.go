package exec_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	cmdexec "github.com/daytonaworker/daytona-worker/exec"
	"github.com/daytonaworker/daytona-worker/internal/span/spantest"
)

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
	assert.Contains(t, d.Command, "; { ( exec 2>&9 9>&-; unset __paperclip_t0; unset -f __paperclip_end; if [ -f /etc/profile ]", "subshell wrap: %s", d.Command)
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

func TestSessionRecreatedAfterSandboxRestart(t *testing.T) {
	e := newEnv(t)
	res, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "echo", Args: []string{"one"}}, nil)
	require.NoError(t, err)
	assert.Equal(t, "one\n", res.Stdout)
	first := e.runner.SessionID(e.target.LeaseKey)

	require.NoError(t, e.srv.StopSandbox(e.sb.ID))
	e.startAgain()

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

// Titles 92 and 93: session.open and session.close spans, the failed ones
// marked with status code 2 ("!" in Names).
func TestSessionSpans(t *testing.T) {
	e := newEnv(t)
	ctx, rec := spantest.New(ctxT(t))
	// A failed create marks session.open failed; the next command retries.
	e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rSession, Status: 500, Times: 1})
	_, err := e.runner.Execute(ctx, e.target, cmdexec.Request{Command: "true"}, nil)
	require.Error(t, err)
	_, err = e.runner.Execute(ctx, e.target, cmdexec.Request{Command: "true"}, nil)
	require.NoError(t, err)
	require.NoError(t, e.runner.CloseLease(ctx, e.target.LeaseKey))
	assert.Equal(t, []string{"session.open!", "session.open", "session.close"}, rec.Names())
	for _, r := range rec.Records() {
		assert.Equal(t, "daytona", r.Attributes["paperclip.sandbox.startup.provider"], r.Name)
	}
	// Bypass commands open no session, so no span.
	_, err = e.runner.Execute(ctx, e.target, cmdexec.Request{Command: "true", BypassSession: true}, nil)
	require.NoError(t, err)
	assert.Len(t, rec.Records(), 3)
}

func TestCloseLeaseReportsDeleteFailureWithoutPanicking(t *testing.T) {
	e := newEnv(t)
	ctx, rec := spantest.New(ctxT(t))
	_, err := e.runner.Execute(ctx, e.target, cmdexec.Request{Command: "true"}, nil)
	require.NoError(t, err)
	id := e.runner.SessionID(e.target.LeaseKey)
	e.srv.Inject(daytonatest.Fault{Method: "DELETE", Route: rSessionD, Status: 500, Times: 1})
	err = e.runner.CloseLease(ctx, e.target.LeaseKey)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Failed to delete Daytona session "+id+" during teardown")
	assert.Equal(t, "", e.runner.SessionID(e.target.LeaseKey), "cleared first")
	assert.Equal(t, []string{"session.open", "session.close!"}, rec.Names())
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

// goroutinesIn counts goroutines whose stack contains fn.
func goroutinesIn(fn string) int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

func TestTwoFirstCommandsOpenOneSession(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rSession, Times: 1, Gate: release})
	a, b := tag(), tag()
	chA := e.start(cmdexec.Request{Command: "echo", Args: []string{a}}, nil)
	require.NoError(t, e.srv.AwaitRequests(ctxT(t), "POST", rSession, 1))
	chB := e.start(cmdexec.Request{Command: "echo", Args: []string{b}}, nil)
	// B waits on A's in-flight create (both inside acquireSession).
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for goroutinesIn("exec.(*Runner).acquireSession") < 2 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("second execute never waited on the session create")
		}
	}
	close(release)
	resA, err := e.wait(chA)
	require.NoError(t, err)
	resB, err := e.wait(chB)
	require.NoError(t, err)
	assert.Equal(t, a+"\n", resA.Stdout)
	assert.Equal(t, b+"\n", resB.Stdout)
	assert.Equal(t, 1, e.count("POST", rSession), "one create")
	assert.Equal(t, 1, e.srv.CountDispatches(a))
	assert.Equal(t, 1, e.srv.CountDispatches(b))
	require.NoError(t, e.runner.CloseLease(ctxT(t), e.target.LeaseKey))
	assert.Equal(t, 1, e.count("DELETE", rSessionD), "one delete on release")
}

func TestFailedSessionCreateIsRetriedByTheNextCommand(t *testing.T) {
	e := newEnv(t)
	e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rSession, Times: 1, Status: 500})
	_, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "true"}, nil)
	require.Error(t, err)
	assert.Equal(t, 0, e.srv.CountDispatches(""))
	res, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "echo", Args: []string{"ok"}}, nil)
	require.NoError(t, err)
	assert.Equal(t, "ok\n", res.Stdout)
	assert.Equal(t, 2, e.count("POST", rSession))
}

func TestControlCommandBesideLongCommand(t *testing.T) {
	e := newEnv(t)
	g := e.newGate()
	rec := newRecorder()
	long, ctl, queued := tag(), tag(), tag()
	chLong := e.start(bashReq(streamedScript(g, long)), rec)
	rec.await(t, "stdout", "l2 ok\n")

	// A control command (bypassSession, as the host sends them) runs
	// one-shot beside the long command and does not wait for it.
	ctlRec := newRecorder()
	res, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "echo", Args: []string{ctl}, BypassSession: true, Timeout: time.Minute}, ctlRec.sink)
	require.NoError(t, err)
	assert.Equal(t, ctl+"\n", res.Stdout)
	assert.Equal(t, "one_shot", res.Metadata["logStream"])
	assertNoLive(t, ctlRec)
	select {
	case <-chLong:
		t.Fatal("the long command ended early")
	default:
	}

	// A second in-session command queues in the session shell (the daemon
	// serialises a session) and completes after the long one, each
	// dispatched once.
	chQueued := e.start(cmdexec.Request{Command: "echo", Args: []string{queued}, Timeout: time.Hour}, nil)
	require.NoError(t, e.srv.Await(ctxT(t), func() bool { return e.srv.CountDispatches(queued) == 1 }))
	g.open(t)
	resLong, err := e.wait(chLong)
	require.NoError(t, err)
	assert.Equal(t, streamedOut, resLong.Stdout)
	assertLive(t, rec, resLong)
	resQ, err := e.wait(chQueued)
	require.NoError(t, err)
	assert.Equal(t, queued+"\n", resQ.Stdout)
	assert.Equal(t, 1, e.srv.CountDispatches(long))
	assert.Equal(t, 1, e.srv.CountDispatches(ctl))
	assert.Equal(t, 1, e.count("POST", rSession), "bypass commands never open the session")
}

func TestBypassCommandLeavesSessionClosed(t *testing.T) {
	e := newEnv(t)
	res, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "echo", Args: []string{"hi"}, BypassSession: true}, nil)
	require.NoError(t, err)
	assert.Equal(t, "hi\n", res.Stdout)
	assert.Equal(t, 0, e.count("POST", rSession))
	assert.Equal(t, "", e.runner.SessionID(e.target.LeaseKey))
	_, err = e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "true"}, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, e.count("POST", rSession), "opened on the first in-run command")
}

func TestManyConcurrentExecutesOnOneLease(t *testing.T) {
	e := newEnv(t)
	const n = 12
	type out struct {
		id     string
		ch     <-chan execOut
		rec    *recorder
		bypass bool
	}
	var outs []out
	for i := range n {
		id := tag()
		rec := newRecorder()
		req := bashReq("printf '%s\\n' " + id + "; printf 'e%s\\n' " + id + " >&2")
		req.BypassSession = i%3 == 0
		outs = append(outs, out{id, e.start(req, rec), rec, req.BypassSession})
	}
	for _, o := range outs {
		res, err := e.wait(o.ch)
		require.NoError(t, err)
		assert.Equal(t, 0, *res.ExitCode)
		assert.Contains(t, res.Stdout, o.id+"\n")
		assertLiveOn(t, o.bypass, o.rec, res)
		assert.Equal(t, 1, e.srv.CountDispatches(o.id))
	}
	assert.Equal(t, 1, e.count("POST", rSession))
}

// TestLeaseOutlivesACommandThatEndsBesideARunningOne: one-shot commands
// hold no session, so a lease entry that nothing holds is dropped when
// its last execute leaves. One that ends while another still runs must
// not drop it: the cancel that follows still reaches the running command,
// and the lease stays refused until it is reopened, also once the last
// execute has left.
func TestLeaseOutlivesACommandThatEndsBesideARunningOne(t *testing.T) {
	e := newEnv(t)
	gate := e.newGate()
	id := tag()
	long := e.start(cmdexec.Request{Command: "bash", Args: []string{"-c", gate.shell() + "; : " + id}, BypassSession: true, Timeout: time.Minute}, nil)
	require.NoError(t, e.srv.Await(ctxT(t), func() bool { return e.srv.CountDispatches(id) == 1 }))
	_, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "true", BypassSession: true}, nil)
	require.NoError(t, err)
	e.runner.CancelLease(e.target.LeaseKey)
	_, err = e.wait(long)
	require.ErrorIs(t, err, cmdexec.ErrLeaseNotActive, "the cancel reached the running command")
	gate.open(t)
	_, err = e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "true", BypassSession: true}, nil)
	require.ErrorIs(t, err, cmdexec.ErrLeaseNotActive, "still refused after the last execute left")
	e.runner.ReopenLease(e.target.LeaseKey)
	_, err = e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "true", BypassSession: true}, nil)
	require.NoError(t, err)
}
