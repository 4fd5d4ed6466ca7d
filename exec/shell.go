package exec

import (
	"errors"
	"fmt"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
)

// ErrShellDied matches the error of a session command whose session shell
// died while it ran (docs/exec.md#dead-shell): killed, by the OOM killer
// or a command that killed its parent. The daemon then never records the
// command's exit code and never closes its follow, so without a check
// the command would wait out its whole timeout.
var ErrShellDied = errors.New("exec: the session shell died")

// ShellDiedError is the concrete error. It carries the tail of the output
// received so far (the host has already been sent it live) as error.data.
type ShellDiedError struct {
	Stdout, Stderr string
}

// Error implements error.
func (e *ShellDiedError) Error() string {
	return "The sandbox's command shell died while the command was running (killed by a signal or the out-of-memory killer?); " +
		"the command's exit code is unknown and it may have been cut short. The next command runs in a fresh shell."
}

// Is matches ErrShellDied.
func (e *ShellDiedError) Is(target error) bool { return target == ErrShellDied }

// shellDiedTail bounds the output an error carries.
const shellDiedTail = 64 << 10

// RPCData is the error.data sent to the host: the output's tail.
func (e *ShellDiedError) RPCData() any {
	return map[string]any{"sessionShellDied": true, "stdout": tail(e.Stdout), "stderr": tail(e.Stderr)}
}

func tail(s string) string {
	if len(s) <= shellDiedTail {
		return s
	}
	s = s[len(s)-shellDiedTail:]
	for i := 0; i < len(s) && i < 4; i++ { // start on a character boundary
		if s[i]&0xC0 != 0x80 {
			return s[i:]
		}
	}
	return s
}

// probeEveryMax is the longest silence between two checks of a command
// that prints nothing: each check queues a no-op in a live shell.
const probeEveryMax = 5 * time.Minute

// shellAlive checks the command's session shell with one cheap exec of
// `:`. A live shell takes it (it runs after the command, a no-op); a dead
// one cannot: the daemon answers that the session ended or that the write
// met a broken pipe (daytona.ErrSessionEnded), or the session is gone
// (404/410). Any other failure proves nothing and counts as alive.
func (x *run) shellAlive() bool {
	ctx, cancel := withBound(x.cmdCtx, x.r.clock, cleanupBound, errObservationBound)
	defer cancel()
	_, _, err := x.t.Client.Toolbox.ExecuteSessionCommand(ctx, x.t.Sandbox, x.sess.id,
		&daytona.SessionExecuteRequest{Command: ":", RunAsync: true})
	if err == nil || errors.Is(err, daytona.ErrContainerMissing) {
		return true
	}
	return !errors.Is(err, daytona.ErrSessionEnded) && !sessionLost(err)
}

// shellDied ends a command whose shell died: its session is retired (and
// deleted, which ends what it left running) and the error keeps the
// output so far.
func (x *run) shellDied() (Result, error) {
	x.retire = true
	res := x.result(nil)
	res.Metadata["commandExitConfirmed"] = false
	res.Metadata["sessionShellDied"] = true
	return res, fmt.Errorf("%w", &ShellDiedError{Stdout: res.Stdout, Stderr: res.Stderr})
}
