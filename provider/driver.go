package provider

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/daytonaworker/daytona-worker/channel"
	"github.com/daytonaworker/daytona-worker/daytona"
	cmdexec "github.com/daytonaworker/daytona-worker/exec"
	"github.com/daytonaworker/daytona-worker/provider/config"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// OutputCap bounds each stream of one command result, in host characters.
// Far beyond what an agent reads back, it keeps a worker's memory small
// whatever a command prints (the host's own limit is 128 Mi characters per
// frame); the live stream and the result end with a truncation marker.
const OutputCap = 16 << 20

// defaultStartRetryWait is Options.StartRetryWait's default.
const defaultStartRetryWait = 30 * time.Second

// DriverKey is the environment driver key, the same as the first-party
// plugin's so environments and sandboxes carry over.
const DriverKey = "daytona"

// Options configure a [Driver]. The zero value is a production driver.
type Options struct {
	// Env looks up host environment variables (DAYTONA_API_KEY). Nil means
	// os.LookupEnv.
	Env config.EnvLookup
	// HTTPClient is shared by every Daytona client the driver makes, so
	// connections are reused across leases and accounts. Nil, or a nil
	// Transport, means the Daytona client's tuned transport
	// (daytona.NewTransport: a pool sized for a worker's concurrency,
	// HTTP/2 where offered), made once per driver; no overall timeout
	// (transfers and long commands must not be cut).
	HTTPClient *http.Client
	// Logger receives diagnostics (never secrets). Nil discards.
	Logger *slog.Logger
	// Now is the clock for freshness and expiry arithmetic. Nil means time.Now.
	Now func() time.Time
	// PollBackOff paces waits for sandbox states. Nil uses the client default.
	PollBackOff func() backoff.BackOff
	// RetryPolicy overrides the client's retry policy (tests).
	RetryPolicy *daytona.RetryPolicy
	// runner replaces the command runner (tests record its lease calls);
	// nil means a *cmdexec.Runner.
	runner commandRunner
	// channelClock times duplex route lifetimes (tests); nil is the real clock.
	channelClock cmdexec.Clock
	// StartRetryWait bounds one wait for a transitioning sandbox to settle
	// before a refused start is retried (docs/behavior.md#refused-resume).
	StartRetryWait time.Duration
}

// Driver is the Daytona environment driver: it serves the environment
// methods of docs/host.md#environment-methods from params alone, with in-memory caches that are
// only an optimisation. It is safe for concurrent use; one per worker.
type Driver struct {
	env    config.EnvLookup
	http   *http.Client
	log    *slog.Logger
	now    func() time.Time
	poll   func() backoff.BackOff
	retry  *daytona.RetryPolicy
	retryW time.Duration

	ingress ingressGenerations // runner ingress generations (ingress.go)

	scopes  scopes
	handles handles
	idle    idle
	runner  commandRunner
	leases  leaseTable
	chans   *channel.Hub
}

// New returns a Driver.
func New(o Options) *Driver {
	d := &Driver{env: o.Env, http: o.HTTPClient, log: o.Logger, now: o.Now, poll: o.PollBackOff,
		retry: o.RetryPolicy, retryW: o.StartRetryWait}
	if d.env == nil {
		d.env = os.LookupEnv
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.now == nil {
		d.now = time.Now
	}
	d.runner = o.runner
	if d.runner == nil {
		d.runner = cmdexec.NewRunner(cmdexec.Options{Logger: d.log, OutputCap: OutputCap})
	}
	if d.retryW <= 0 {
		d.retryW = defaultStartRetryWait
	}
	var base http.RoundTripper
	if d.http != nil && d.http.Transport != nil {
		base = d.http.Transport
	} else {
		base = daytona.NewTransport()
	}
	hc := &http.Client{Transport: countingTransport{base: base, idle: &d.idle}}
	if d.http != nil {
		hc.CheckRedirect, hc.Jar = d.http.CheckRedirect, d.http.Jar
	}
	d.http = hc
	d.handles.now = d.now
	d.chans = channel.New(channel.Options{Resolve: d.channelLease, Logger: d.log, Clock: o.channelClock,
		Wrap: func(h rpc.Handler) rpc.Handler {
			return func(ctx context.Context, raw json.RawMessage) (any, error) {
				d.idle.hooks.Add(1)
				defer d.idle.hooks.Add(-1)
				return h(ctx, raw)
			}
		}})
	return d
}

// Register adds the environment methods this driver implements, and health.
func (d *Driver) Register(reg *rpc.Registry) {
	reg.Register("environmentValidateConfig", hook(d, d.validateConfig))
	reg.Register("environmentProbe", hook(d, d.probe))
	reg.Register("environmentAcquireLease", hook(d, d.acquire))
	reg.Register("environmentResumeLease", hook(d, d.resume))
	reg.Register("environmentReleaseLease", hook(d, d.release))
	reg.Register("environmentDestroyLease", hook(d, d.destroy))
	reg.Register("environmentStopLease", hook(d, d.stop))
	d.registerInteractive(reg)
	reg.Register("environmentRealizeWorkspace", hook(d, d.realize))
	reg.Register("environmentExecute", hook(d, d.execute))
	reg.Register("environmentSyncIn", hook(d, d.syncIn))
	reg.Register("environmentSyncOut", hook(d, d.syncOut))
	d.chans.Register(reg)
	reg.RegisterInline("health", func(context.Context, json.RawMessage) (any, error) { return d.Health(), nil })
}

// hook wraps a typed method: pending-hook evidence and lenient params.
func hook[P, R any](d *Driver, f func(context.Context, P) (R, error)) rpc.Handler {
	return rpc.Typed(func(ctx context.Context, p P) (R, error) {
		d.idle.hooks.Add(1)
		defer d.idle.hooks.Add(-1)
		return f(ctx, p)
	})
}

// Health is the health result: ok, with the idle-sleep evidence.
func (d *Driver) Health() rpc.HealthResult {
	return rpc.HealthResult{
		Status:  "ok",
		Message: "Daytona sandbox provider plugin healthy",
		Details: map[string]any{"idle": d.idle.report()},
	}
}

// countingTransport counts in-flight provider requests as idle evidence: a
// request counts until its response body is closed, so streamed downloads
// and log-follow sockets count for as long as they are open.
type countingTransport struct {
	base http.RoundTripper
	idle *idle
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.idle.requests.Add(1)
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp == nil || resp.Body == nil {
		t.idle.requests.Add(-1)
		return resp, err
	}
	done := sync.OnceFunc(func() { t.idle.requests.Add(-1) })
	if rwc, ok := resp.Body.(io.ReadWriteCloser); ok {
		// A WebSocket upgrade: the body is the connection, keep it writable.
		if isTerminal(r) {
			// A connected terminal is an open terminal, not a request,
			// until the connection closes. Counted as a terminal before
			// it stops counting as a request: health reads without a lock
			// (idle).
			t.idle.terminals.Add(1)
			done()
			done = sync.OnceFunc(func() { t.idle.terminals.Add(-1) })
		}
		resp.Body = countedConn{rwc, done}
	} else {
		resp.Body = countedBody{resp.Body, done}
	}
	return resp, nil
}

// isTerminal reports a request connecting to a sandbox pseudo-terminal
// (the toolbox's /process/pty/{sessionId}/connect, under whatever proxy
// prefix the sandbox's toolbox URL has).
func isTerminal(r *http.Request) bool {
	p := r.URL.Path
	i := strings.LastIndex(p, "/process/pty/")
	return i >= 0 && strings.HasSuffix(p, "/connect") && strings.Count(p[i+len("/process/pty/"):], "/") == 1
}

type countedBody struct {
	io.ReadCloser
	done func()
}

func (b countedBody) Close() error { defer b.done(); return b.ReadCloser.Close() }

type countedConn struct {
	io.ReadWriteCloser
	done func()
}

func (c countedConn) Close() error { defer c.done(); return c.ReadWriteCloser.Close() }
