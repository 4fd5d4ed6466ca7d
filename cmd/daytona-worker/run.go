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

	"github.com/daytonaworker/daytona-worker/internal/cli"
	"github.com/daytonaworker/daytona-worker/provider"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// usagef is a command-line or environment mistake; it exits with code 2
// and its message is one line.
func usagef(format string, a ...any) error {
	return cli.Usagef("daytona-worker --help", format, a...)
}

// defaultProfile is the manifest profile `daytona-worker manifest` prints
// without --profile: the one the published host accepts, which is also what
// `make package` builds by default.
const defaultProfile = provider.ProfileCompat2026916

const topUsage = `usage: daytona-worker [serve | version | manifest [--profile P] | doctor | sweep | help [command]]

daytona-worker is the Paperclip sandbox-provider plugin worker for Daytona.
The Paperclip host starts it through the npm package's launcher (worker.mjs);
it is not an interactive program.

Commands:
  serve     speak JSON-RPC 2.0 with the Paperclip host: one JSON object per
            line on stdin, answers on stdout, logs on stderr (the default)
  version   print the worker version
  manifest  print the plugin manifest of a profile as JSON
  doctor    check a Daytona account (URL, key, quota, snapshot) before
            saving it in an environment; --create runs one real lease
  sweep     list (and with --delete, delete) sandboxes this plugin left
            behind, by company, environment, run, age or state

Run "daytona-worker COMMAND --help" for one command.
`

const serveUsage = `usage: daytona-worker [serve]

Speak JSON-RPC 2.0 with the Paperclip host: one JSON object per line on stdin,
answers and notifications on stdout, JSON logs on stderr. Exits when stdin
ends, on SIGTERM/SIGINT/SIGHUP, or when its parent process goes away. serve
takes no arguments; everything else comes from the host's requests.
`

const versionUsage = `usage: daytona-worker version

Print the worker version, the Go version and the platform.
`

const manifestUsage = `usage: daytona-worker manifest [--profile P]

Print the plugin manifest as one line of JSON. Each profile installs on the
hosts it names; a host refuses a driver key it does not know:
  compat-2026.916  (default) the published Paperclip host 2026.916.1 (also
                   installs on the October 2026 hosts); what "make
                   package" builds
  compat-2026.10   the October 2026 hosts (paperclip ce51d868): adds
                   defaultAcquireTimeoutMs
  current          the creation-operation host: adds
                   defaultAcquireTimeoutMs and creationOperationVersion
The profiles carry different versions (see README, Compatibility), so a
host that saved one refreshes it when another is installed.
`

// envHelp lists every environment variable the worker (and its npm launcher)
// reads; each command's help ends with it.
const envHelp = `
Environment:
  DAYTONA_WORKER_LOG_LEVEL   stderr log level: debug, info, warn (default) or
                             error; any other value is an error
  DAYTONA_WORKER_PARENT_PID  set by the npm launcher when it spawns the worker:
                             the worker exits when its parent is no longer
                             this process (default: the parent at start)
  DAYTONA_API_KEY            Daytona API key used when an environment's config
                             has none (the host passes it only to some plugins;
                             prefer the key on the environment)
  DAYTONA_API_URL            doctor and sweep only: the Daytona API URL
  DAYTONA_TARGET             doctor and sweep only: the Daytona region
  GOMEMLIMIT                 Go soft memory limit (default 160MiB)
  DAYTONA_WORKER_LAUNCH      read by the npm launcher, not the binary: "spawn"
                             forces its spawn fallback instead of execve
`

// stdinIsTerminal reports whether the worker's stdin is a terminal; a
// variable so tests can pretend.
var stdinIsTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && isTerminal(f.Fd())
}

// ttyNotice is the one line a person who runs the worker by hand sees: it
// is waiting for protocol frames, not hanging.
const ttyNotice = "daytona-worker: speaking JSON-RPC 2.0 on stdin/stdout (one JSON object per line) for the Paperclip host; not an interactive program (see daytona-worker --help; Ctrl-D ends)"

func isHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "-help" }

// noArgs accepts an empty argument list or a lone help flag.
func noArgs(cmd string, args []string, help string, stdout io.Writer) (helped bool, err error) {
	switch {
	case len(args) == 0:
		return false, nil
	case len(args) == 1 && isHelp(args[0]):
		fmt.Fprint(stdout, help+envHelp)
		return true, nil
	default:
		return false, usagef("%s takes no arguments, got %q", cmd, args[0])
	}
}

// Run is the whole program behind main, with explicit I/O so tests can run it
// in-process.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch {
	case cmd == "serve":
		if helped, err := noArgs(cmd, args, serveUsage, stdout); helped || err != nil {
			return err
		}
		level, err := logLevel(os.Getenv(logLevelEnv))
		if err != nil {
			return err
		}
		if stdinIsTerminal(stdin) {
			fmt.Fprintln(stderr, ttyNotice)
		}
		return serve(ctx, stdin, stdout, stderr, serveOptions{watchParent: true, level: level})
	case cmd == "version" || cmd == "--version" || cmd == "-v":
		if helped, err := noArgs(cmd, args, versionUsage, stdout); helped || err != nil {
			return err
		}
		_, err := fmt.Fprintf(stdout, "daytona-worker %s (%s %s/%s)\n", provider.ManifestVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return err
	case cmd == "manifest":
		return manifest(args, stdout)
	case cmd == "doctor":
		return doctor(ctx, args, stdout)
	case cmd == "sweep":
		return sweep(ctx, args, stdout)
	case cmd == "help" || isHelp(cmd):
		help := topUsage
		if len(args) > 0 {
			switch args[0] {
			case "serve":
				help = serveUsage
			case "version":
				help = versionUsage
			case "manifest":
				help = manifestUsage
			case "doctor":
				help = doctorUsage + accountHelp
			case "sweep":
				help = sweepUsage + accountHelp
			default:
				return usagef("no help for unknown command %q", args[0])
			}
			args = args[1:]
		}
		if len(args) > 0 {
			return usagef("%s takes at most one command name, got %q", cmd, args[0])
		}
		_, err := fmt.Fprint(stdout, help+envHelp)
		return err
	default:
		return usagef("unknown command %q", cmd)
	}
}

func manifest(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("manifest", flag.ContinueOnError)
	// The flag package's own messages are several lines and its usage text
	// is not ours: report one line instead.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	profile := fs.String("profile", string(defaultProfile), "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, err = fmt.Fprint(stdout, manifestUsage+envHelp)
			return err
		}
		return usagef("manifest: %v", err)
	}
	if fs.NArg() > 0 {
		return usagef("manifest takes no arguments besides --profile, got %q", fs.Arg(0))
	}
	b, err := provider.ManifestJSON(provider.Profile(*profile))
	if err != nil {
		return usagef("manifest: %v", err)
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}

type serveOptions struct {
	watchParent bool
	// level is the stderr log level (the zero value is info).
	level slog.Level
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
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: o.level}))
	reg, drv := productRegistry(logger)
	if o.register != nil {
		o.register(reg)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done <-chan struct{}
	if o.watchParent {
		done = watchParent(ctx, expectedParent(), 250*time.Millisecond)
	}
	return rpc.Serve(ctx, stdin, stdout, rpc.Options{Registry: reg, Logger: logger, Done: done,
		IdleWork: drv.IdleWork, OnShutdown: drv.CloseChannels})
}

// productRegistry holds every method the worker implements; initialize
// advertises exactly these (plus rpc's built-ins, and the idle-sleep
// methods rpc adds for the driver's IdleWork).
func productRegistry(logger *slog.Logger) (*rpc.Registry, *provider.Driver) {
	reg := rpc.NewRegistry()
	drv := provider.New(provider.Options{Logger: logger})
	drv.Register(reg)
	return reg, drv
}

// logLevelEnv names the stderr log level.
const logLevelEnv = "DAYTONA_WORKER_LOG_LEVEL"

// logLevel parses DAYTONA_WORKER_LOG_LEVEL: debug, info, warn or error, any
// case; empty means warn, because the host logs every stderr line at warn.
// Anything else is refused rather than guessed: a typo would otherwise hide
// the very logs the operator asked for.
func logLevel(v string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "":
		return slog.LevelWarn, nil
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, usagef("%s=%q is not a log level; use debug, info, warn or error", logLevelEnv, truncate(v, 64))
}

// truncate keeps an echoed environment value short.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
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
