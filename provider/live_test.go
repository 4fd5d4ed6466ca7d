package provider

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/livetest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The live tier (test tier 3) runs these scenarios against real Daytona,
// only with DAYTONA_LIVE=1 (`make live`; see livetest.Require). Every
// sandbox it creates carries paperclip-company-id=liveCompany and
// paperclip-run-id=liveRun, and TestMain sweeps that run's sandboxes after
// the tests (and, shortly before a -timeout would kill the binary, from a
// watchdog), so a failed or hung test leaves nothing billable behind.
const liveCompany = "daytona-worker-live"

// liveRun labels this test binary's live sandboxes.
var liveRun = "live-" + uuid.NewString()

// Bounds of the live sweeper: the whole sweep, the reserve before the
// binary's -timeout at which the watchdog sweeps, and the age beyond which
// an earlier run's leftovers (a binary killed outright) are swept at start.
const (
	liveSweepBound   = 5 * time.Minute
	liveSweepReserve = 3 * time.Minute
	liveLeftoverAge  = 2 * time.Hour
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(liveMain(m.Run, os.Getenv, os.Stderr))
}

// liveMain runs the tests (run) with the live sweeper around them when the
// live tier is on; otherwise it only runs them.
func liveMain(run func() int, getenv func(string) string, log io.Writer) int {
	live, skip, err := livetest.Gate(getenv)
	if err != nil || skip != "" {
		return run() // the live tests themselves skip or fail
	}
	api, err := liveClient(live, nil)
	if err != nil {
		fmt.Fprintln(log, "live sweeper:", err)
		return 1
	}
	sweep := func(why string, f cleanup.SweepFilter) int {
		ctx, cancel := context.WithTimeout(context.Background(), liveSweepBound)
		defer cancel()
		deleted, err := liveSweep(ctx, api.Sandboxes, f)
		if len(deleted) > 0 || err != nil {
			fmt.Fprintf(log, "live sweeper (%s): deleted %v, errors: %v\n", why, deleted, err)
		}
		return len(deleted)
	}
	sweep("earlier runs", cleanup.SweepFilter{CompanyID: liveCompany, OlderThan: liveLeftoverAge})
	var once sync.Once
	final := func() int {
		n := 0
		once.Do(func() { n = sweep("this run", cleanup.SweepFilter{CompanyID: liveCompany, RunID: liveRun}) })
		return n
	}
	if d := testTimeout(); d > liveSweepReserve {
		watchdog := time.AfterFunc(d-liveSweepReserve, func() { final() })
		defer watchdog.Stop()
	}
	code := run()
	if left := final(); left > 0 && code == 0 {
		fmt.Fprintf(log, "live tests left %d sandboxes behind (now swept)\n", left)
		code = 1
	}
	return code
}

// testTimeout is the binary's -test.timeout (0 when none).
func testTimeout() time.Duration {
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil {
			return d
		}
	}
	return 0
}

// liveSweep deletes the sandboxes f selects through cleanup's sweep, which
// re-verifies every ownership label, and returns the ids it deleted.
func liveSweep(ctx context.Context, api cleanup.SandboxAPI, f cleanup.SweepFilter) ([]string, error) {
	found, err := cleanup.FindOrphans(ctx, api, f)
	if err != nil {
		return nil, err
	}
	var deleted []string
	var errs []error
	for _, r := range cleanup.DeleteOrphans(ctx, api, found, f, 0, nil) {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("sweep %s: %w", r.Sandbox.ID, r.Err))
			continue
		}
		deleted = append(deleted, r.Sandbox.ID)
	}
	return deleted, errors.Join(errs...)
}

func liveClient(l livetest.Account, hc *http.Client) (*daytona.Client, error) {
	opts := []daytona.Option{daytona.WithAPIKey(l.APIKey)}
	if l.APIURL != "" {
		opts = append(opts, daytona.WithAPIURL(l.APIURL))
	}
	if hc != nil {
		opts = append(opts, daytona.WithHTTPClient(hc))
	}
	return daytona.NewClient(opts...)
}

// TestLiveSweeperRemovesOnlyThisRun: the sweeper that guards the live tier,
// against the emulator. The listing ignores its label filter, so only the
// sweep's own re-check keeps the other run's, the unlabelled and the
// foreign sandboxes alive; and the tests fail when anything was left.
func TestLiveSweeperRemovesOnlyThisRun(t *testing.T) {
	e := newTestEnv(t, nil)
	mine := e.acquireAs(liveCompany, liveRun)
	other := e.acquireAs(liveCompany, "live-other-run")
	foreign := e.acquireAs("someone-else", liveRun)
	unlabelled := testenv.StartSandbox(t, e.client, nil)
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: "/sandbox", ListIgnoresLabels: true})

	env := map[string]string{livetest.Env: "1", livetest.KeyEnv: e.srv.APIKey(), livetest.URLEnv: e.srv.URL()}
	var log strings.Builder
	code := liveMain(func() int { return 0 }, func(k string) string { return env[k] }, &log)
	assert.Equal(t, 1, code, "a passing run that left a sandbox behind fails")
	assert.Contains(t, log.String(), "left 1 sandboxes behind")
	assert.Equal(t, "gone", e.state(mine))
	for _, id := range []string{other, foreign, unlabelled.ID} {
		assert.Equal(t, "started", e.state(id), "sandbox %s survives", id)
	}

	// Nothing left: the tests' own code stands. Without the tier, the
	// sweeper does not run at all.
	assert.Equal(t, 0, liveMain(func() int { return 0 }, func(k string) string { return env[k] }, io.Discard))
	assert.Equal(t, 7, liveMain(func() int { return 7 }, func(k string) string { return env[k] }, io.Discard))
	assert.Equal(t, 0, liveMain(func() int { return 0 }, func(string) string { return "" }, io.Discard))
	assert.Equal(t, "started", e.state(other))
}

// acquireAs acquires a lease for company and run on the emulator and
// returns the sandbox id.
func (e *testEnv) acquireAs(company, run string) string {
	e.t.Helper()
	p := with(e.base(nil), "companyId", company, "runId", run)
	raw, err := e.call("environmentAcquireLease", p)
	require.NoError(e.t, err)
	return *decode[lease](e.t, raw).ProviderLeaseID
}

// liveEnv is one live test's driver and environment.
type liveEnv struct {
	t   *testing.T
	reg *rpc.Registry
	cfg map[string]any
	env string
}

func newLiveEnv(t *testing.T, hc *http.Client, extra map[string]any) *liveEnv {
	t.Helper()
	l := livetest.Require(t)
	cfg := map[string]any{"apiKey": l.APIKey, "timeoutMs": 300000, "reuseLease": true}
	for k, v := range map[string]string{"apiUrl": l.APIURL, "target": l.Target, "snapshot": l.Snapshot} {
		if v != "" {
			cfg[k] = v
		}
	}
	for k, v := range extra {
		cfg[k] = v
	}
	reg := rpc.NewRegistry()
	New(Options{HTTPClient: hc}).Register(reg)
	return &liveEnv{t: t, reg: reg, cfg: cfg, env: "live-" + uuid.NewString()}
}

func (le *liveEnv) base(cfg map[string]any) map[string]any {
	return map[string]any{"driverKey": "daytona", "companyId": liveCompany, "environmentId": le.env, "config": cfg}
}

func (le *liveEnv) call(method string, params any) json.RawMessage {
	le.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	r := invoke(le.t, ctx, le.reg, method, params)
	require.NoError(le.t, r.err, method)
	return r.raw
}

// acquire takes a lease and destroys it when the test ends.
func (le *liveEnv) acquire() (lease, map[string]any) {
	le.t.Helper()
	l := decode[lease](le.t, le.call("environmentAcquireLease", with(le.base(le.cfg), "runId", liveRun,
		"agentId", "live-agent", "executionWorkspaceId", "live-ws", "adapterType", "claude_local")))
	require.NotNil(le.t, l.ProviderLeaseID)
	leaseCfg := maps2(le.cfg, l.Metadata)
	le.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		r := invoke(le.t, ctx, le.reg, "environmentDestroyLease", with(le.base(leaseCfg), "providerLeaseId", *l.ProviderLeaseID, "leaseMetadata", l.Metadata))
		assert.NoError(le.t, r.err, "destroy %s (the sweeper removes it otherwise)", *l.ProviderLeaseID)
	})
	return l, leaseCfg
}

func (le *liveEnv) execute(l lease, cfg map[string]any, script string) execResult {
	le.t.Helper()
	return decode[execResult](le.t, le.call("environmentExecute", with(le.base(cfg), "lease", l, "command", "sh", "args", []string{"-c", script})))
}

func TestLiveLeaseLifecycle(t *testing.T) {
	le := newLiveEnv(t, nil, nil)
	l, leaseCfg := le.acquire()
	r := le.execute(l, leaseCfg, "echo live-ok")
	require.Equal(t, 0, *r.ExitCode)
	require.Equal(t, "live-ok\n", r.Stdout)
	require.Contains(t, string(le.call("environmentReleaseLease", with(le.base(leaseCfg), "providerLeaseId", *l.ProviderLeaseID,
		"leaseMetadata", l.Metadata))), `"state":"stopped"`)
	res := decode[lease](t, le.call("environmentResumeLease", with(le.base(le.cfg), "providerLeaseId", *l.ProviderLeaseID, "leaseMetadata", l.Metadata)))
	require.NotNil(t, res.ProviderLeaseID)
	require.Contains(t, string(le.call("environmentDestroyLease", with(le.base(maps2(le.cfg, res.Metadata)), "providerLeaseId", *l.ProviderLeaseID,
		"leaseMetadata", res.Metadata))), `"state":"destroyed"`)
}

// TestLiveExecute: a short command, 8 MiB of output, and a command whose
// log-follow socket is cut mid-stream, which must still return every line.
func TestLiveExecute(t *testing.T) {
	cut := &cutFirstSocket{base: http.DefaultTransport, after: 16}
	le := newLiveEnv(t, &http.Client{Transport: cut}, nil)
	l, cfg := le.acquire()
	r := le.execute(l, cfg, "echo short")
	require.Equal(t, "short\n", r.Stdout)
	r = le.execute(l, cfg, "head -c 8388608 /dev/zero | tr '\\0' a")
	require.Equal(t, 0, *r.ExitCode)
	// The result ends with a newline when the output did not (as the
	// reference does); the length alone keeps a failure message short.
	out := strings.TrimSuffix(r.Stdout, "\n")
	require.Equal(t, 8<<20, len(out), "8 MiB of output")
	require.Equal(t, 8<<20, strings.Count(out, "a"), "nothing but the output")
	r = le.execute(l, cfg, "for i in 1 2 3 4 5; do echo line$i; sleep 1; done")
	require.Equal(t, "line1\nline2\nline3\nline4\nline5\n", r.Stdout)
	require.True(t, cut.done.Load(), "a log-follow socket was cut")
}

// cutFirstSocket closes the first WebSocket (a log follow) after a few
// bytes, as a network drop would.
type cutFirstSocket struct {
	base  http.RoundTripper
	after int
	done  atomic.Bool
}

func (c *cutFirstSocket) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	if rwc, ok := resp.Body.(io.ReadWriteCloser); ok && strings.Contains(r.URL.Path, "/logs") && c.done.CompareAndSwap(false, true) {
		resp.Body = &cutConn{ReadWriteCloser: rwc, left: c.after}
	}
	return resp, nil
}

type cutConn struct {
	io.ReadWriteCloser
	left int
}

func (c *cutConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		_ = c.Close()
		return 0, io.ErrUnexpectedEOF
	}
	n, err := c.ReadWriteCloser.Read(p[:min(len(p), c.left)])
	c.left -= n
	return n, err
}

// TestLiveSync pushes a small tree in and pulls it back out.
func TestLiveSync(t *testing.T) {
	le := newLiveEnv(t, nil, nil)
	l, cfg := le.acquire()
	src, dst := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(src, "nested"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "hello.txt"), []byte("hello\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "nested", "data.bin"), []byte{0, 1, 2, 255}, 0o600))
	remote := fmt.Sprint(l.Metadata["remoteCwd"]) + "/live-sync"
	op := func(id, from, to string) []any {
		return []any{map[string]any{"operationId": id, "files": []any{map[string]any{"sourcePath": from, "targetPath": to, "kind": "directory"}}}}
	}
	le.call("environmentSyncIn", with(le.base(cfg), "lease", l, "operations", op("in", src, remote)))
	out := filepath.Join(dst, "tree")
	le.call("environmentSyncOut", with(le.base(cfg), "lease", l, "operations", op("out", remote, out)))
	got, err := os.ReadFile(filepath.Join(out, "nested", "data.bin"))
	require.NoError(t, err)
	require.Equal(t, []byte{0, 1, 2, 255}, got)
	got, err = os.ReadFile(filepath.Join(out, "hello.txt"))
	require.NoError(t, err)
	require.Equal(t, "hello\n", string(got))
}

// TestLiveStopLease stops a lease and keeps its sandbox.
func TestLiveStopLease(t *testing.T) {
	le := newLiveEnv(t, nil, nil)
	l, cfg := le.acquire()
	require.Contains(t, string(le.call("environmentStopLease", with(le.base(cfg), "providerLeaseId", *l.ProviderLeaseID,
		"leaseMetadata", l.Metadata))), `"state":"stopped"`)
}

// TestLiveCapacity is the capacity regression: N leases acquired at once
// (DAYTONA_LIVE_CAPACITY, default 3) all succeed and all run a command.
func TestLiveCapacity(t *testing.T) {
	le := newLiveEnv(t, nil, map[string]any{"reuseLease": false})
	n, err := livetest.Capacity(os.Getenv)
	require.NoError(t, err)
	type got struct {
		l   lease
		cfg map[string]any
	}
	leases := make([]got, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := invoke(t, t.Context(), le.reg, "environmentAcquireLease", with(le.base(le.cfg), "runId", liveRun,
				"agentId", fmt.Sprintf("live-agent-%d", i), "executionWorkspaceId", "live-ws", "adapterType", "claude_local"))
			if assert.NoError(t, r.err, "acquire %d of %d", i+1, n) {
				var l lease
				if assert.NoError(t, json.Unmarshal(r.raw, &l)) && assert.NotNil(t, l.ProviderLeaseID) {
					leases[i] = got{l, maps2(le.cfg, l.Metadata)}
				}
			}
		})
	}
	wg.Wait()
	for i, g := range leases {
		if g.l.ProviderLeaseID == nil {
			continue
		}
		r := le.execute(g.l, g.cfg, "echo capacity")
		assert.Equal(t, "capacity\n", r.Stdout, "lease %d", i)
		le.call("environmentDestroyLease", with(le.base(g.cfg), "providerLeaseId", *g.l.ProviderLeaseID, "leaseMetadata", g.l.Metadata))
	}
	require.Equal(t, n, countNonNil(leases, func(g got) bool { return g.l.ProviderLeaseID != nil }))
}

func countNonNil[T any](xs []T, ok func(T) bool) int {
	n := 0
	for _, x := range xs {
		if ok(x) {
			n++
		}
	}
	return n
}
