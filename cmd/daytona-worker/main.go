// Command daytona-worker is the Paperclip plugin worker for Daytona sandboxes.
// Run without arguments (or with "serve") it speaks JSON-RPC 2.0 over stdio
// with the Paperclip host; "version" and "manifest" are for operators and the
// packaging scripts. See README.md.
package main

import (
	"context"
	"os"
	"syscall"

	"github.com/daytonaworker/daytona-worker/internal/cli"
)

func main() {
	cli.Main("daytona-worker", func(ctx context.Context) error {
		// Frames own the real stdout. Anything else that prints to os.Stdout
		// (a dependency, a stray debug line) lands on stderr instead of
		// corrupting the protocol stream.
		frames := os.Stdout
		os.Stdout = os.Stderr
		return Run(ctx, os.Args[1:], os.Stdin, frames, os.Stderr)
	}, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
}
