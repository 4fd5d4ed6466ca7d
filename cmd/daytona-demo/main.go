// Command daytona-demo runs one full lease lifecycle through the worker
// binary, speaking to it over stdio exactly as the Paperclip host does, and
// prints every step with its timing, a progress line for a step over a
// second and a closing summary (-v adds each raw JSON result). Against the
// built-in emulator (cmd/daytona-sim) by default; against real Daytona when
// DAYTONA_API_KEY is set (DAYTONA_API_URL and DAYTONA_TARGET are honoured
// too), where an uncertain create is cleaned up as the host would. It is
// what `make demo` runs.
package main

import (
	"context"
	"os"
	"syscall"

	"github.com/daytonaworker/daytona-worker/internal/cli"
)

func main() {
	cli.Main("daytona-demo", func(ctx context.Context) error {
		return Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}, syscall.SIGINT, syscall.SIGTERM)
}
