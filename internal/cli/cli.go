// Package cli is the frame the repository's commands (cmd/daytona-worker,
// cmd/daytona-sim, cmd/daytona-demo) share around their Run functions:
// command-line mistakes that exit with code 2, and a main that runs under a
// signal-cancelled context, reports an error as one line and exits.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
)

// UsageError is a command-line or environment mistake. Its message is one
// line and the command exits with code 2, so a script can tell a wrong
// invocation from a failure of the work itself (code 1).
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// Usagef returns a UsageError whose message ends with a pointer to the
// command's help: help "daytona-sim -help" adds " (see daytona-sim -help)".
func Usagef(help, format string, a ...any) error {
	return &UsageError{fmt.Sprintf(format, a...) + " (see " + help + ")"}
}

// ExitCode is the process exit code for the error a command's Run returned:
// 0 for nil, 2 for a UsageError anywhere in its chain, 1 for anything else.
func ExitCode(err error) int {
	var ue *UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		return 2
	default:
		return 1
	}
}

// Main is a command's whole main: run gets a context that ends on any of
// signals (the command decides which stop it), a non-nil error is printed on
// stderr as "name: error", and the process exits with ExitCode.
func Main(name string, run func(ctx context.Context) error, signals ...os.Signal) {
	ctx, stop := signal.NotifyContext(context.Background(), signals...)
	err := run(ctx)
	stop()
	os.Exit(report(os.Stderr, name, err))
}

// report prints a non-nil err as one line on stderr and returns the exit
// code for it.
func report(stderr io.Writer, name string, err error) int {
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
	}
	return ExitCode(err)
}
