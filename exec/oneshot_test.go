package exec_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	cmdexec "github.com/daytonaworker/daytona-worker/exec"
)

func TestOneShotCombinedOutput(t *testing.T) {
	e := newEnv(t)
	id := tag()
	rec := newRecorder()
	res, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{
		Command: "bash", Args: []string{"-c", "echo out; echo err >&2; exit 4", id}, BypassSession: true, Timeout: time.Second,
	}, rec.sink)
	require.NoError(t, err)
	assert.Equal(t, 4, *res.ExitCode)
	assert.Equal(t, "out\nerr\n", res.Stdout)
	assert.Equal(t, "", res.Stderr)
	assertLive(t, rec, res)
	assert.Equal(t, 1, e.srv.CountDispatches(id))
	d := e.lastDispatch()
	assert.Equal(t, "", d.Session)
	assert.NotContains(t, d.Command, "bwrap")
}

func TestOneShotDaemonTimeout(t *testing.T) {
	e := newEnv(t)
	res, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{
		Command: "sleep", Args: []string{"30"}, BypassSession: true, Timeout: time.Second,
	}, nil)
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.Nil(t, res.ExitCode)
	assert.Equal(t, "", res.Stdout)
	assert.Equal(t, "Command timed out after 1 s.\n", res.Stderr)
	assert.Contains(t, res.Metadata, "durationMs")
}

func TestGitNetworkCommandCappedAndExplained(t *testing.T) {
	e := newEnv(t, withFakeClock)
	e.srv.Inject(daytonatest.Fault{Route: rExecute, Hang: true, Times: 1})
	ch := e.start(cmdexec.Request{Command: "/usr/bin/git", Args: []string{"-C", "repo", "fetch", "origin"}, BypassSession: true, Timeout: 3 * time.Hour}, nil)
	// 120 s cap plus the client's 5 s margin over the daemon's own timeout.
	e.awaitTimer(125 * time.Second)
	e.clock.Advance(125 * time.Second)
	res, err := e.wait(ch)
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.Equal(t, "Git network operation timed out after 120 s — the remote may be unreachable or noninteractive credentials are not configured.\n", res.Stderr)
}
