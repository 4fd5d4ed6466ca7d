package daytonatest_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// TestFollowClosesAboutASecondAfterTheExit: like the daemon, the emulator
// tails a command's log every 20 ms and closes the follow only after 50
// reads in a row found nothing new, so a follow of a command that ends at
// once stays open for at least a second (a lower bound: a loaded machine
// can only make it later) and still delivers all the output first. Until
// HoldFollowClose is released it does not close at all.
func TestFollowClosesAboutASecondAfterTheExit(t *testing.T) {
	const closeDelay = 50 * 20 * time.Millisecond
	e := testenv.New(t)
	sb := e.StartSandbox(t, nil)
	tb := e.Client.Toolbox
	_, err := tb.CreateSession(ctxT(t), sb.Ref(), "s1")
	require.NoError(t, err)
	follow := func(cmd string) (string, time.Duration) {
		resp, _, err := tb.ExecuteSessionCommand(ctxT(t), sb.Ref(), "s1", &daytona.SessionExecuteRequest{Command: cmd, RunAsync: true})
		require.NoError(t, err)
		var out []byte
		start := time.Now()
		err = tb.FollowSessionCommandLogs(ctxT(t), sb.Ref(), "s1", resp.CmdID, nil, func(c daytona.LogChunk) error {
			out = append(out, c.Data...)
			return nil
		})
		require.NoError(t, err, "a normal close")
		return string(out), time.Since(start)
	}
	out, took := follow("echo hi")
	assert.Equal(t, "hi\n", out)
	assert.GreaterOrEqual(t, took, closeDelay, "closed before the daemon would")

	release, ok := e.Server.HoldFollowClose(sb.ID, "s1")
	require.True(t, ok)
	done := make(chan string, 1)
	go func() {
		out, _ := follow("echo held")
		done <- out
	}()
	require.NoError(t, e.Server.Await(ctxT(t), func() bool {
		for _, d := range e.Server.Dispatches() {
			if d.Command == "echo held" {
				c, ok := e.Server.Command(sb.ID, "s1", d.CommandID)
				return ok && c.ExitCode != nil
			}
		}
		return false
	}))
	release()
	assert.Equal(t, "held\n", <-done)
	_, ok = e.Server.HoldFollowClose(sb.ID, "nope")
	assert.False(t, ok, "unknown session")
}

// TestLabelingAllocatesLittlePerByte: the labeler of a session's output
// reuses one buffer for the whole stream, and AwaitCommand reads the log
// once, after the exit, so labeling 8 MiB of output and waiting for its
// end cost the emulator a small fraction of that in allocations (in
// benchmarks it shares the machine with the worker and the host). Before,
// the labeler's buffer, resliced and appended to, allocated about twice
// the output, and the wait read the whole log at every batch of lines.
// The wait's one read of the log is measured again on its own and taken
// off.
func TestLabelingAllocatesLittlePerByte(t *testing.T) {
	e := testenv.New(t)
	sb := e.StartSandbox(t, nil)
	tb := e.Client.Toolbox
	_, err := tb.CreateSession(ctxT(t), sb.Ref(), "s1")
	require.NoError(t, err)
	run := func(cmd string) string {
		t.Helper()
		resp, _, err := tb.ExecuteSessionCommand(ctxT(t), sb.Ref(), "s1", &daytona.SessionExecuteRequest{Command: cmd, RunAsync: true})
		require.NoError(t, err)
		_, err = e.Server.AwaitCommand(ctxT(t), sb.ID, "s1", resp.CmdID)
		require.NoError(t, err)
		return resp.CmdID
	}
	run("true") // the session's shell and its labelers are running
	var m0, m1, m2 runtime.MemStats
	runtime.ReadMemStats(&m0)
	id := run("head -c 8388608 /dev/zero | tr '\\0' a | fold -w 1023")
	runtime.ReadMemStats(&m1)
	res, ok := e.Server.Command(sb.ID, "s1", id)
	runtime.ReadMemStats(&m2)
	require.True(t, ok)
	require.GreaterOrEqual(t, len(res.Stdout), 8388608)
	labeling := int64(m1.TotalAlloc-m0.TotalAlloc) - int64(m2.TotalAlloc-m1.TotalAlloc)
	assert.Less(t, labeling, int64(1<<20), "bytes allocated while 8 MiB were labeled and waited for")
}
