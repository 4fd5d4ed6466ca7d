// Command daytona-sim serves the Daytona emulator (package
// daytona/daytonatest) standalone on loopback, for `make demo`, the Node
// interop test, out-of-process benchmarks and manual poking: it prints one
// JSON line with the API's URL and key, then serves until SIGINT or SIGTERM
// (see Run for stdin and -stop-on-eof). It is a test tool, never to be linked
// into daytona-worker: sandbox commands run for real on this machine (in a
// mount namespace as uid 1000 where Linux allows, see -help).
package main

import (
	"context"
	"os"
	"syscall"

	"github.com/daytonaworker/daytona-worker/internal/cli"
)

func main() {
	cli.Main("daytona-sim", func(ctx context.Context) error {
		return Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	}, syscall.SIGTERM, syscall.SIGINT)
}
