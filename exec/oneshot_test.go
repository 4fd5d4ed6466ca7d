package exec_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
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

// TestOneShotBeyondTheAnswerLimit: a one-shot command printing 34 MiB (more
// than the 32 MiB a buffered JSON answer may have) is not an error after
// the fact: its exit code comes back with the output truncated at the
// per-stream cap (1 MiB here, to keep the test light; the answer is read
// through whatever the cap), the marker and metadata.outputTruncated, and
// the live output is the same prefix.
func TestOneShotBeyondTheAnswerLimit(t *testing.T) {
	const limit = 1 << 20
	e := newEnv(t, withCap(limit))
	rec := newRecorder()
	req := bashReq(`head -c 35651584 /dev/zero | tr '\0' a; exit 3`)
	req.BypassSession = true
	// No deadline: 34 MiB through the emulator under the race detector on
	// a loaded machine takes what it takes; the test checks the outcome.
	res, err := e.runner.Execute(t.Context(), e.target, req, rec.sink)
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode)
	assert.Equal(t, 3, *res.ExitCode)
	assert.Equal(t, true, res.Metadata["outputTruncated"])
	marker := "\n[daytona-worker: stdout truncated after 1048576 characters; further output was discarded]\n"
	assert.Equal(t, strings.Repeat("a", limit)+marker, res.Stdout)
	assertLive(t, rec, res)
}

// TestOneShotAnswerCutShort: a one-shot answer lost part way is an error
// (never a result with a made-up exit code); the output that arrived is
// returned with it.
func TestOneShotAnswerCutShort(t *testing.T) {
	e := newEnv(t)
	e.srv.Inject(daytonatest.Fault{Route: rExecute, Status: 200, Body: `{"exitCode":0,"result":"partial out`, Times: 1})
	req := bashReq(`echo never`)
	req.BypassSession = true
	res, err := e.runner.Execute(ctxT(t), e.target, req, nil)
	require.ErrorIs(t, err, daytona.ErrMalformedResponse)
	assert.Nil(t, res.ExitCode)
	assert.Equal(t, "partial out", res.Stdout)
}
