package exec_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	cmdexec "github.com/daytonaworker/daytona-worker/exec"
)

// The tests of this file reach the sandbox only through the toolbox API,
// so `make fidelity` runs them against a real daemon too
// (docs/emulator.md#a-real-daemon-behind-the-emulator).

// TestCommandAfterALostSession: the daemon lost the lease's session (here
// it is deleted behind the runner's back, as a daemon restart loses it);
// the next command still succeeds, in a new session.
func TestCommandAfterALostSession(t *testing.T) {
	e := newDaemonEnv(t)
	_, err := e.runner.Execute(ctxT(t), e.target, bashReq("echo first"), nil)
	require.NoError(t, err)
	sid := e.runner.SessionID(e.target.LeaseKey)
	_, err = e.client.Toolbox.DeleteSession(ctxT(t), e.target.Sandbox, sid)
	require.NoError(t, err)
	res, err := e.runner.Execute(ctxT(t), e.target, bashReq("echo second"), nil)
	require.NoError(t, err)
	assert.Equal(t, "second\n", res.Stdout)
	assert.NotEqual(t, sid, e.runner.SessionID(e.target.LeaseKey))
	require.NoError(t, e.runner.CloseLease(ctxT(t), e.target.LeaseKey))
}

// TestCommandWhoseShellIsKilled: a command kills its session shell (its
// parent) and goes on printing. Its answer comes after the silent-socket
// limit (15 s of real time: run with `make fidelity` against a daemon),
// an error that says the shell died, with the output kept; the next
// command runs.
func TestCommandWhoseShellIsKilled(t *testing.T) {
	if daemonURL == "" {
		t.Skip("real time; TestDeadShellIsNoticed covers the emulator with a fake clock (set DAYTONA_DAEMON_URL, make fidelity)")
	}
	e := newDaemonEnv(t)
	begin := time.Now()
	res, err := e.runner.Execute(ctxT(t), e.target, bashReq("echo before; kill -9 $PPID; echo after"), nil)
	t.Logf("answered after %v", time.Since(begin).Round(time.Millisecond)) // for the record, not a bound
	require.ErrorIs(t, err, cmdexec.ErrShellDied)
	assert.Nil(t, res.ExitCode)
	assert.True(t, strings.HasPrefix(res.Stdout, "before\n"), "%q", res.Stdout)
	res, err = e.runner.Execute(ctxT(t), e.target, bashReq("echo next"), nil)
	require.NoError(t, err)
	assert.Equal(t, "next\n", res.Stdout)
	require.NoError(t, e.runner.CloseLease(ctxT(t), e.target.LeaseKey))
}
