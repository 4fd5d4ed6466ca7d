package daytonatest

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// As root the emulator stages sandbox processes with sh, mount and
// setpriv; without those programs it re-executes its own binary, whose
// root branch (setgroups, setgid, setuid) nothing else reaches on a
// machine that has them. The probe's command must run as uid 1000 in
// /home/daytona with the sandbox's /tmp through that branch too.
func TestRootStageWithoutShellTools(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the root method needs root")
	}
	old := shellStageTools
	shellStageTools = func() (stageTools, error) { return stageTools{}, errors.New("no shell tools (test)") }
	t.Cleanup(func() { shellStageTools = old })
	require.NoError(t, probeMethod(methodRootNS))
}
