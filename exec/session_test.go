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
	require.NoError(t, e.srv.Await(ctxT(t), func() bool { return e.srv.CountDispatches(id) == 1 }))
	e.awaitExited()
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
