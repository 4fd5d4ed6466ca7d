// Package testenv starts what most tests of this module need: the Daytona
// emulator (in process, or out of process as cmd/daytona-sim for
// benchmarks that measure the worker side alone), a client aimed at it with
// fast polling and retries that do not really sleep, and started sandboxes.
// It is the one copy of that set-up; packages keep only the helpers that are
// about their own subject.
package testenv

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
)

// FastBackOff is the poll and retry back-off of tests: 2 ms between tries,
// so waiting on the emulator's 5 ms transitions costs little.
func FastBackOff() backoff.BackOff { return backoff.NewConstantBackOff(2 * time.Millisecond) }

// ShortSleep honours a Retry-After wait for at most 5 ms: the emulator asks
// for whole seconds, the tests only need the order of events.
func ShortSleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(min(d, 5*time.Millisecond)):
		return nil
	}
}

// Env is one emulator and a client for it.
type Env struct {
	Server *daytonatest.Server
	Client *daytona.Client
}

type config struct {
	server []daytonatest.Option
	client []daytona.Option
}

// Option configures New.
type Option func(*config)

// WithServer passes options to the emulator.
func WithServer(opts ...daytonatest.Option) Option {
	return func(c *config) { c.server = append(c.server, opts...) }
}

// WithLatency makes the emulator hold every request and WebSocket upgrade
// for d (daytonatest.WithLatency), so a test sees the round trips a real
// network costs.
func WithLatency(d time.Duration) Option { return WithServer(daytonatest.WithLatency(d)) }

// WithNetwork charges the emulator's connections a network
// (daytonatest.WithNetwork): round trips per direction, the handshakes of
// new connections, a bandwidth.
func WithNetwork(n daytonatest.Network) Option { return WithServer(daytonatest.WithNetwork(n)) }

// WithClient passes options to the client; they are applied after the
// defaults (URL, key, FastBackOff polling, fast retries), so they win.
func WithClient(opts ...daytona.Option) Option {
	return func(c *config) { c.client = append(c.client, opts...) }
}

// New starts an emulator that stops when the test ends and a client for it.
func New(tb testing.TB, opts ...Option) *Env {
	tb.Helper()
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	srv := Server(tb, cfg.server...)
	if pem := srv.CertPEM(); pem != nil {
		// daytonatest.WithTLS: the client trusts the emulator's certificate.
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		tr := daytona.NewTransport()
		tr.TLSClientConfig.RootCAs = roots
		cfg.client = append([]daytona.Option{daytona.WithHTTPClient(&http.Client{Transport: tr})}, cfg.client...)
	}
	return &Env{Server: srv, Client: Client(tb, srv.URL(), srv.APIKey(), cfg.client...)}
}

// Server starts the emulator on 127.0.0.1 with its sandbox trees in a
// temp dir of the test, and closes it when the test ends. It lives here,
// not in daytonatest, because it needs a testing.TB: daytonatest is also
// linked into cmd/daytona-sim, where a test-only constructor is dead code.
func Server(tb testing.TB, opts ...daytonatest.Option) *daytonatest.Server {
	tb.Helper()
	srv := daytonatest.New(append([]daytonatest.Option{daytonatest.WithDir(tb.TempDir())}, opts...)...)
	tb.Cleanup(srv.Close)
	_, err := srv.Start("")
	require.NoError(tb, err)
	return srv
}

// Client is a client for apiURL with the test defaults, then opts.
func Client(tb testing.TB, apiURL, apiKey string, opts ...daytona.Option) *daytona.Client {
	tb.Helper()
	base := []daytona.Option{
		daytona.WithAPIURL(apiURL),
		daytona.WithAPIKey(apiKey),
		daytona.WithPollBackOff(FastBackOff),
		daytona.WithRetryPolicy(daytona.RetryPolicy{BackOff: FastBackOff, Sleep: ShortSleep}),
	}
	c, err := daytona.NewClient(append(base, opts...)...)
	require.NoError(tb, err)
	return c
}

// Sandbox is a started sandbox and what the emulator knows of it.
type Sandbox struct {
	*daytona.Sandbox
	// Info is the emulator's view at start: Root, HomeDir and WorkDir are
	// real host paths.
	Info daytonatest.SandboxInfo
}

// StartSandbox creates a sandbox from the "base" snapshot and waits until it
// is started. req may be nil; an empty name gets a unique one.
func (e *Env) StartSandbox(tb testing.TB, req *daytona.CreateSandboxRequest) *Sandbox {
	tb.Helper()
	sb := StartSandbox(tb, e.Client, req)
	info, ok := e.Server.Sandbox(sb.ID)
	require.True(tb, ok, "the emulator knows sandbox %s", sb.ID)
	return &Sandbox{Sandbox: sb, Info: info}
}

// StartSandbox creates and starts a sandbox through any client (an
// out-of-process emulator has no in-process view).
func StartSandbox(tb testing.TB, c *daytona.Client, req *daytona.CreateSandboxRequest) *daytona.Sandbox {
	tb.Helper()
	r := daytona.CreateSandboxRequest{}
	if req != nil {
		r = *req
	}
	if r.Name == "" {
		r.Name = "test-" + uuid.NewString()[:8]
	}
	if r.Snapshot == "" && r.Image == "" {
		r.Snapshot = "base"
	}
	ctx := context.Background()
	sb, _, err := c.Sandboxes.Create(ctx, &r)
	require.NoError(tb, err)
	sb, err = c.Sandboxes.WaitUntilStarted(ctx, sb.ID)
	require.NoError(tb, err)
	return sb
}

// Sim is cmd/daytona-sim running as a child process, so a benchmark's own
// peak RSS is the worker side's alone.
type Sim struct {
	APIURL, APIKey string
	// Client is a plain client (production defaults) for the child.
	Client *daytona.Client
}

// Requests reads the child's request log, without the first since
// entries it ever logged: a benchmark counts the calls and the new
// connections of what it ran since its last read.
func (s *Sim) Requests(tb testing.TB, since int) []daytonatest.SimRequest {
	tb.Helper()
	req, err := http.NewRequestWithContext(tb.Context(), "GET",
		s.APIURL+daytonatest.SimRequestsPath+"?since="+strconv.Itoa(since), nil)
	require.NoError(tb, err)
	req.Header.Set("Authorization", "Bearer "+s.APIKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(tb, err)
	defer resp.Body.Close()
	require.Equal(tb, http.StatusOK, resp.StatusCode)
	var out []daytonatest.SimRequest
	require.NoError(tb, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

// StartSim builds cmd/daytona-sim, starts it with -stop-on-eof and args, and
// stops it when the test ends.
func StartSim(tb testing.TB, args ...string) *Sim {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "daytona-sim")
	build := osexec.Command("go", "build", "-o", bin, "github.com/daytonaworker/daytona-worker/cmd/daytona-sim")
	build.Stderr = os.Stderr
	require.NoError(tb, build.Run())
	cmd := osexec.Command(bin, append([]string{"-stop-on-eof", "-dir", tb.TempDir()}, args...)...)
	stdin, err := cmd.StdinPipe()
	require.NoError(tb, err)
	out, err := cmd.StdoutPipe()
	require.NoError(tb, err)
	cmd.Stderr = os.Stderr
	require.NoError(tb, cmd.Start())
	tb.Cleanup(func() {
		_ = stdin.Close() // -stop-on-eof: the child stops and removes its tree
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(tb, err)
	var info struct {
		APIURL string `json:"apiUrl"`
		APIKey string `json:"apiKey"`
	}
	require.NoError(tb, json.Unmarshal([]byte(line), &info))
	c, err := daytona.NewClient(daytona.WithAPIURL(info.APIURL), daytona.WithAPIKey(info.APIKey))
	require.NoError(tb, err)
	return &Sim{APIURL: info.APIURL, APIKey: info.APIKey, Client: c}
}
