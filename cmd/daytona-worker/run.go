package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/daytonaworker/daytona-worker/provider"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// usageError is a command-line mistake; it exits with code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func exitCode(err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		return 2
	default:
		return 1
	}
}

const usage = `usage: daytona-worker [serve | version | manifest --profile current|compat-2026.916]

  serve     speak JSON-RPC 2.0 over stdio with the Paperclip host (default)
  version   print the worker version
  manifest  print the plugin manifest of a profile as JSON
`

// Run is the whole program behind main, with explicit I/O so tests can run it
// in-process.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		if len(args) > 0 {
			return &usageError{"serve takes no arguments\n" + usage}
		}
		return serve(ctx, stdin, stdout, stderr, serveOptions{watchParent: true})
	case "version", "--version", "-v":
		fmt.Fprintf(stdout, "daytona-worker %s (%s %s/%s)\n", provider.ManifestVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return nil
	case "manifest":
		fs := flag.NewFlagSet("manifest", flag.ContinueOnError)
		fs.SetOutput(stderr)
		profile := fs.String("profile", string(provider.ProfileCurrent), "manifest profile: current or compat-2026.916")
		if err := fs.Parse(args); err != nil {
			return &usageError{err.Error()}
		}
		b, err := provider.ManifestJSON(provider.Profile(*profile))
		if err != nil {
			return &usageError{err.Error()}
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		return &usageError{fmt.Sprintf("unknown command %q\n%s", cmd, usage)}
	}
}

type serveOptions struct {
	watchParent bool
	// register adds methods beyond the product's (tests only).
	register func(*rpc.Registry)
}

// memoryLimit is the worker's soft heap limit unless GOMEMLIMIT says
// otherwise: the live heap is bounded by the output cap, and the limit keeps
// the garbage collector from letting the process grow to twice that.
const memoryLimit = 160 << 20

func serve(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, o serveOptions) error {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: logLevel()}))
	reg := productRegistry(logger)
	if o.register != nil {
		o.register(reg)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done <-chan struct{}
	if o.watchParent {
		done = watchParent(ctx, expectedParent(), 250*time.Millisecond)
	}
	return rpc.Serve(ctx, stdin, stdout, rpc.Options{Registry: reg, Logger: logger, Done: done})
}

// productRegistry holds every method the worker implements; initialize
// advertises exactly these (plus rpc's built-ins).
func productRegistry(logger *slog.Logger) *rpc.Registry {
	reg := rpc.NewRegistry()
	provider.New(provider.Options{Logger: logger}).Register(reg)
	return reg
}

// logLevel reads DAYTONA_WORKER_LOG_LEVEL (debug, info, warn, error). The
// host logs every stderr line at warn, so the default is warn.
func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.TrimSpace(os.Getenv("DAYTONA_WORKER_LOG_LEVEL")))); err != nil {
		return slog.LevelWarn
	}
	return l
}

// parentPIDEnv is set by the npm launcher when it spawns the worker instead of
// exec'ing it: the worker then knows its parent even if that parent died
// before the worker got to read its own parent pid.
const parentPIDEnv = "DAYTONA_WORKER_PARENT_PID"

func expectedParent() int {
	if n, err := strconv.Atoi(os.Getenv(parentPIDEnv)); err == nil && n > 0 {
		return n
	}
	return os.Getppid()
}

// watchParent closes the returned channel when the process's parent changes,
// i.e. the launcher or host died without closing stdin (SIGKILL of the
// launcher in the spawn fallback, docs/host.md#launcher).
func watchParent(ctx context.Context, ppid int, every time.Duration) <-chan struct{} {
	gone := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if os.Getppid() != ppid {
					close(gone)
					return
				}
			}
		}
	}()
	return gone
}
