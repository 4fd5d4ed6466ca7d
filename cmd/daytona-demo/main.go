// Command daytona-demo runs one full lease lifecycle through the worker
// binary, speaking to it over stdio exactly as the Paperclip host does, and
// prints every step with its timing. Against the built-in emulator
// (cmd/daytona-sim) by default; against real Daytona when DAYTONA_API_KEY is
// set (DAYTONA_API_URL and DAYTONA_TARGET are honoured too). It is what
// `make demo` runs.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "daytona-demo:", err)
		os.Exit(1)
	}
}
