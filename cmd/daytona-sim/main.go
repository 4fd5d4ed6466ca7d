// Command daytona-sim serves the Daytona emulator (package
// daytona/daytonatest) standalone on loopback, for `make demo`, the Node
// interop test and manual poking. It is a test tool: never link it (or the
// emulator) into daytona-worker.
//
// Usage:
//
//	daytona-sim [-port N] [-api-key KEY] [-dir DIR] [-transition-delay D]
//	            [-disk-bytes N] [-stdin-eof=true|false]
//
// Once listening it prints exactly one JSON line on stdout,
//
//	{"apiUrl":"http://127.0.0.1:PORT/api","apiKey":"...","toolboxProxyUrl":"http://127.0.0.1:PORT/proxy/toolbox","organizationId":"...","dir":"..."}
//
// and serves until SIGINT or SIGTERM, or until its stdin reaches EOF (so a
// parent that spawned it with a stdin pipe stops it by closing the pipe;
// pass -stdin-eof=false when running it in the background with stdin at
// /dev/null). Logs go to stderr. Without -dir the sandbox trees live in a
// temporary directory that is removed on exit.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "daytona-sim:", err)
		os.Exit(exitCode(err))
	}
}
