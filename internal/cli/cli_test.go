package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExitCode(t *testing.T) {
	usage := Usagef("cmd --help", "bad %s", "flag")
	require.Equal(t, "bad flag (see cmd --help)", usage.Error())
	require.Equal(t, 0, ExitCode(nil))
	require.Equal(t, 2, ExitCode(usage))
	require.Equal(t, 2, ExitCode(fmt.Errorf("manifest: %w", usage)), "wrapped")
	require.Equal(t, 1, ExitCode(errors.New("boom")))
	require.Equal(t, 1, ExitCode(context.Canceled))
}

func TestReport(t *testing.T) {
	var stderr bytes.Buffer
	require.Equal(t, 0, report(&stderr, "cmd", nil))
	require.Empty(t, stderr.String(), "nothing printed on success")
	require.Equal(t, 2, report(&stderr, "cmd", Usagef("cmd -h", "no")))
	require.Equal(t, "cmd: no (see cmd -h)\n", stderr.String())
}

// mainMode, in the environment of a re-executed test binary, makes
// TestHelperCommand a command built on Main (which exits the process, so
// it cannot run in the test's own).
const mainMode = "_DAYTONA_CLI_TEST_MAIN_MODE"

func TestHelperCommand(t *testing.T) {
	switch os.Getenv(mainMode) {
	case "":
		t.Skip("only in the child process of TestMainRunsAndExits")
	case "signal":
		Main("cli-test", func(ctx context.Context) error {
			fmt.Println("ready") // the handler is installed: the parent may signal
			<-ctx.Done()
			return nil
		}, syscall.SIGTERM)
	case "usage":
		Main("cli-test", func(context.Context) error { return Usagef("cli-test -help", "unknown command %q", "x") })
	case "fail":
		Main("cli-test", func(context.Context) error { return errors.New("boom") })
	}
	os.Exit(99) // Main did not exit
}

// TestMainRunsAndExits runs Main in a child process: it stops on its
// signal, prints an error once as one line, and exits with ExitCode.
func TestMainRunsAndExits(t *testing.T) {
	child := func(mode string) (*osexec.Cmd, *bytes.Buffer) {
		cmd := osexec.Command(os.Args[0], "-test.run=^TestHelperCommand$")
		cmd.Env = append(os.Environ(), mainMode+"="+mode)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		return cmd, &stderr
	}
	exitCode := func(err error) int {
		var ee *osexec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		require.NoError(t, err)
		return 0
	}

	cmd, stderr := child("signal")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, exitCode(cmd.Wait()), "a signal ends the context; run returns nil")
	require.Empty(t, stderr.String())

	for mode, want := range map[string]struct {
		code   int
		stderr string
	}{
		"usage": {2, "cli-test: unknown command \"x\" (see cli-test -help)\n"},
		"fail":  {1, "cli-test: boom\n"},
	} {
		cmd, stderr := child(mode)
		require.Equal(t, want.code, exitCode(cmd.Run()), mode)
		require.Equal(t, want.stderr, stderr.String(), mode)
	}
}
