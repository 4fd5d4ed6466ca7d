package daytonatest_test

import (
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
