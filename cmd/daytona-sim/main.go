// Command daytona-sim serves the Daytona emulator (package
// daytona/daytonatest) standalone on loopback, for `make demo`, the Node
// interop test and manual poking. It is a test tool: never link it (or the
// emulator) into daytona-worker. Sandbox commands run for real, as the
// current user, on this machine (see -help).
//
// Once listening it prints exactly one JSON line on stdout,
//
//	{"apiUrl":"http://127.0.0.1:PORT/api","apiKey":"...","toolboxProxyUrl":"http://127.0.0.1:PORT/proxy/toolbox","organizationId":"...","dir":"..."}
//
// and serves until SIGINT or SIGTERM; with -stop-on-eof also until its stdin
// reaches EOF, so a parent that spawned it with a stdin pipe can stop it by
// closing the pipe. Without the flag stdin is ignored, so
// `daytona-sim </dev/null &` keeps serving. Logs go to stderr. Without -dir
// the sandbox trees live in a temporary directory that is removed on exit.
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
