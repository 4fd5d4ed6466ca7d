package exec_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	cmdexec "github.com/daytonaworker/daytona-worker/exec"
)

// TestCommandLineReservesWhatItsLastRunKept: a command line's last run
// teaches the lease how much text it kept of each stream, on the session
// path and the one-shot path alike (the two share the command line), so
// its next run reserves that much; the small output of a one-shot command
// line the lease keeps no run times for is not noted, and a command line
// that prints less the next time is noted anew.
func TestCommandLineReservesWhatItsLastRunKept(t *testing.T) {
	e := newEnv(t)
	run := func(req cmdexec.Request) cmdexec.Result {
		t.Helper()
		res, err := e.runner.Execute(t.Context(), e.target, req, nil)
		require.NoError(t, err)
		return res
	}
	kept := func(req cmdexec.Request) [2]int { return cmdexec.Kept(e.runner, e.target.LeaseKey, req) }

	out := bashReq("yes abc | head -c 300000")
	assert.Len(t, run(out).Stdout, 300000)
	assert.Equal(t, [2]int{300000, 0}, kept(out), "session path")

	both := bashReq("yes abc | head -c 200000 >&2; echo done")
	assert.Len(t, run(both).Stderr, 200000)
	assert.Equal(t, [2]int{5, 200000}, kept(both), "stderr")

	oneShot := bashReq("yes abc | head -c 150000")
	oneShot.BypassSession = true
	assert.Len(t, run(oneShot).Stdout, 150000)
	assert.Equal(t, [2]int{150000, 0}, kept(oneShot), "one-shot path")
	oneShot.BypassSession = false
	assert.Equal(t, [2]int{150000, 0}, kept(oneShot), "the session path shares the command line")

	small := bashReq("echo hi")
	small.BypassSession = true
	run(small)
	assert.Zero(t, kept(small), "output under %d bytes", cmdexec.ReserveMin)

	file := bashReq("cat f")
	run(bashReq("yes abc | head -c 100000 > f"))
	assert.Len(t, run(file).Stdout, 100000)
	assert.Equal(t, [2]int{100000, 0}, kept(file))
	run(bashReq("echo short > f"))
	assert.Equal(t, "short\n", run(file).Stdout)
	assert.Equal(t, [2]int{6, 0}, kept(file), "printed less this time")
}
