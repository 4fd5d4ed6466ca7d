package provider

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	cmdexec "github.com/daytonaworker/daytona-worker/exec"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/stretchr/testify/require"
)

// testEnv is a driver wired to a fresh emulator, called through the same
// registry the worker serves.
type testEnv struct {
	t      *testing.T
	srv    *daytonatest.Server
	client *daytona.Client // the test's own client of the emulator
	d      *Driver
	reg    *rpc.Registry
	cfg    map[string]any
}

func newTestEnv(t *testing.T, cfg map[string]any, opts ...daytonatest.Option) *testEnv {
	t.Helper()
	env := testenv.New(t, testenv.WithServer(opts...))
	srv := env.Server
	e := &testEnv{t: t, srv: srv, client: env.Client}
	e.cfg = map[string]any{"apiKey": srv.APIKey(), "apiUrl": srv.URL(), "timeoutMs": 20000}
	maps.Copy(e.cfg, cfg)
	if key, _ := e.cfg["apiKey"].(string); key != "" {
		testKeys.Store(key, true)
		t.Cleanup(func() { testKeys.Delete(key) })
	}
	e.d = e.newDriver()
	e.reg = rpc.NewRegistry()
	e.d.Register(e.reg)
	return e
}

// testKeys are the API keys of the running tests' environments: what no
// error, envelope or log may ever carry (helpers that see only an error
// check against all of them).
var testKeys sync.Map

// requireNoKey fails when s holds any running test's API key.
func requireNoKey(t testing.TB, s, what string) {
	t.Helper()
	testKeys.Range(func(k, _ any) bool {
		require.NotContains(t, s, k.(string), "%s carries an API key", what)
		return true
	})
}

// newDriver is a second, fresh driver (a restarted worker) on the same emulator.
func (e *testEnv) newDriver() *Driver { return e.driverWith(nil) }

// driverWith is a fresh driver like newDriver, with options changed.
func (e *testEnv) driverWith(mod func(*Options)) *Driver {
	retry := daytona.RetryPolicy{MaxRetries: 2, BackOff: testenv.FastBackOff,
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }}
	o := Options{
		Env:         func(string) (string, bool) { return "", false },
		HTTPClient:  &http.Client{},
		PollBackOff: testenv.FastBackOff,
		RetryPolicy: &retry,
	}
	if mod != nil {
		mod(&o)
	}
	return New(o)
}

func (e *testEnv) call(method string, params any) (json.RawMessage, error) {
	e.t.Helper()
	return callOn(e.t, e.reg, method, params)
}

func callOn(t *testing.T, reg *rpc.Registry, method string, params any) (json.RawMessage, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := invoke(t, ctx, reg, method, params)
	return r.raw, r.err
}

// callCtx calls a method under the caller's own deadline (the host's RPC
// timeout), for paths whose provider bound is longer than a test should wait.
func (e *testEnv) callCtx(ctx context.Context, method string, params any) (json.RawMessage, error) {
	e.t.Helper()
	r := invoke(e.t, ctx, e.reg, method, params)
	return r.raw, r.err
}

// result is the outcome of a call.
type result struct {
	raw json.RawMessage
	err error
}

// invoke calls a registered method as the worker's dispatcher would, and
// returns its JSON result or its error. It may run off the test goroutine:
// a missing method or an unencodable value is reported with t.Error.
func invoke(t testing.TB, ctx context.Context, reg *rpc.Registry, method string, params any) result {
	h, ok := reg.Lookup(method)
	if !ok {
		t.Errorf("no method %s", method)
		return result{err: errors.New("no method " + method)}
	}
	res, err := h(ctx, mustJSON(t, params))
	if err != nil {
		return result{err: err}
	}
	return result{raw: mustJSON(t, res)}
}

// mustJSON encodes v; it may run off the test goroutine (t.Error, not
// t.Fatal).
func mustJSON(t testing.TB, v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		t.Errorf("json: %v", err)
	}
	return b
}

func (e *testEnv) base(cfg map[string]any) map[string]any {
	c := maps.Clone(e.cfg)
	maps.Copy(c, cfg)
	return map[string]any{"driverKey": "daytona", "companyId": "company-1", "environmentId": "env-1", "config": c}
}

func with(m map[string]any, kv ...any) map[string]any {
	out := maps.Clone(m)
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

type lease struct {
	ProviderLeaseID *string        `json:"providerLeaseId"`
	Metadata        map[string]any `json:"metadata"`
	ExpiresAt       *string        `json:"expiresAt"`
}

func (e *testEnv) acquire(cfg map[string]any, extra ...any) lease {
	e.t.Helper()
	p := with(e.base(cfg), append([]any{"runId", "run-1", "agentId", "agent-1", "executionWorkspaceId", "ws-1", "adapterType", "claude_local"}, extra...)...)
	raw, err := e.call("environmentAcquireLease", p)
	var ce *cleanup.Error
	if errors.As(err, &ce) && ce.Diagnostic != nil {
		// A spent budget says where it went (a loaded machine once spent
		// 20 s of an acquire that takes about one).
		e.t.Fatalf("acquire: %v: phase %s, %d of %d ms: %v", err, ce.Diagnostic.Phase, ce.Diagnostic.ElapsedMs, ce.Diagnostic.BudgetMs, errors.Join(ce.Causes...))
	}
	require.NoError(e.t, err)
	var l lease
	require.NoError(e.t, json.Unmarshal(raw, &l))
	require.NotNil(e.t, l.ProviderLeaseID)
	return l
}

func decode[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(raw, &v))
	return v
}

func (e *testEnv) state(id string) string {
	info, ok := e.srv.Sandbox(id)
	if !ok || info.State == daytonatest.StateDestroyed {
		return "gone"
	}
	return info.State
}

func (e *testEnv) await(id, state string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if state == "gone" {
		require.NoError(e.t, e.srv.AwaitGone(ctx, id))
		return
	}
	require.NoError(e.t, e.srv.AwaitState(ctx, id, state))
}

// Helpers of the lifecycle tests (resume, teardown, state, faults).

// hostTransient is the host's resume retry pattern (docs/host.md#resume): a
// resume error that does not prove a loss must match it.
var hostTransient = regexp.MustCompile(`(?i)\b(timeout|timed out|rate limit|temporar|network|connection reset|service unavailable)\b`)

// Emulator routes the lifecycle calls use.
const (
	rSandbox   = "/sandbox/{sandboxIdOrName}"
	rCreate    = "/sandbox"
	rStart     = "/sandbox/{sandboxIdOrName}/start"
	rStop      = "/sandbox/{sandboxIdOrName}/stop"
	rRecover   = "/sandbox/{sandboxIdOrName}/recover"
	rArchive   = "/sandbox/{sandboxIdOrName}/archive"
	rAutostop  = "/sandbox/{sandboxIdOrName}/autostop/{interval}"
	rAutodel   = "/sandbox/{sandboxIdOrName}/autodelete/{interval}"
	rExecute   = "/process/execute"
	rNewFolder = "/files/folder"
)

// use makes d the driver the test env calls.
func (e *testEnv) use(d *Driver) {
	e.d = d
	e.reg = registryOf(d)
}

// resumeParams are resume params for a lease.
func (e *testEnv) resumeParams(l lease, cfg map[string]any) map[string]any {
	return with(e.base(cfg), "providerLeaseId", *l.ProviderLeaseID, "leaseMetadata", l.Metadata)
}

func (e *testEnv) realizeParams(l lease) map[string]any {
	return with(e.base(nil), "lease", l, "workspace", map[string]any{})
}

// async runs a call in the background.
func (e *testEnv) async(method string, params any) <-chan result {
	ch := make(chan result, 1)
	reg := e.reg
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		ch <- invoke(e.t, ctx, reg, method, params)
	}()
	return ch
}

// wait receives a background call's result, failing the test after 30 s.
func wait(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("call did not return")
		return result{}
	}
}

// awaitRequests waits until the emulator logged n requests of a route.
func (e *testEnv) awaitRequests(method, route string, n int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(e.t, e.srv.AwaitRequests(ctx, method, route, n), "%s %s ×%d", method, route, n)
}

// awaitScope waits until cond holds for the lease's scope state, on the
// scope's change broadcasts (no polling).
func awaitScope(t *testing.T, d *Driver, k scopeKey, cond func(*scopeState) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		d.scopes.mu.Lock()
		st := d.scopes.state(k)
		ok := cond(st)
		ch := st.changed
		d.scopes.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("scope condition not reached")
		}
	}
}

// scopeOf is the scope key the driver uses for a lease of the default test
// company and environment.
func (e *testEnv) scopeOf(id string) scopeKey {
	c, err := e.d.resolveAccount(mustJSON(e.t, e.cfg))
	require.NoError(e.t, err)
	return makeScopeKey(DriverKey, "company-1", "env-1", id, c.fingerprint)
}

// expectLive asserts the emulator holds exactly these live sandboxes: no
// leak, and nothing deleted that the test expected to survive.
func (e *testEnv) expectLive(ids ...string) {
	e.t.Helper()
	var got []string
	for _, sb := range e.live() {
		got = append(got, sb.ID)
	}
	slices.Sort(got)
	want := slices.Clone(ids)
	slices.Sort(want)
	require.Equal(e.t, want, got, "live sandboxes")
}

// dto is the sandbox's current wire DTO with changes applied, for faults
// that answer with a crafted (stale or foreign) sandbox record.
func (e *testEnv) dto(id string, change func(*daytona.Sandbox)) string {
	e.t.Helper()
	sb, _, err := e.client.Sandboxes.Get(context.Background(), id)
	require.NoError(e.t, err)
	if change != nil {
		change(sb)
	}
	b, err := json.Marshal(sb)
	require.NoError(e.t, err)
	return string(b)
}

// recordingWork is a command runner that records which teardown calls the
// driver made for which scope. It is the one test double here (the exec
// runner is another package's): commands and reopening run on a real
// runner, while cancel, close and forget are only recorded, never decided.
type recordingWork struct {
	*cmdexec.Runner
	mu    sync.Mutex
	calls []string // "cancel", "close", "forget"
	keys  []string
}

func (w *recordingWork) rec(call, key string) {
	w.mu.Lock()
	w.calls = append(w.calls, call)
	w.keys = append(w.keys, key)
	w.mu.Unlock()
}

// leasedRecording is leased on a driver whose runner records.
func leasedRecording(t *testing.T, cfg map[string]any) (*testEnv, lease, string, *recordingWork) {
	t.Helper()
	e := newTestEnv(t, cfg)
	w := e.recordWork()
	l := e.acquire(nil)
	return e, l, *l.ProviderLeaseID, w
}

// recordWork makes the env's driver a fresh one whose runner records.
func (e *testEnv) recordWork() *recordingWork {
	w := newRecordingWork()
	e.use(e.driverWith(func(o *Options) { o.runner = w }))
	return w
}

func newRecordingWork() *recordingWork {
	return &recordingWork{Runner: cmdexec.NewRunner(cmdexec.Options{OutputCap: OutputCap})}
}

func (w *recordingWork) CancelLease(key string) { w.rec("cancel", key) }
func (w *recordingWork) CloseLease(_ context.Context, key string) error {
	w.rec("close", key)
	return nil
}
func (w *recordingWork) ForgetSessions(key string) { w.rec("forget", key) }

func (w *recordingWork) count(call string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.calls {
		if c == call {
			n++
		}
	}
	return n
}

// fakeClock is an injected clock the test advances.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// hostPath is where the emulator keeps path p of the lease's sandbox on
// the host (in Daytona's layout the sandbox names it /home/daytona/...,
// and /tmp is its own).
func (e *testEnv) hostPath(l lease, p string) string {
	e.t.Helper()
	if h := e.info(*l.ProviderLeaseID).HostPath(p); h != "" {
		return h
	}
	return p // the host layout: the sandbox's /tmp is the host's
}

// info is the emulator's view of a sandbox, which must exist.
func (e *testEnv) info(id string) daytonatest.SandboxInfo {
	e.t.Helper()
	info, ok := e.srv.Sandbox(id)
	require.True(e.t, ok, "sandbox %s exists", id)
	return info
}

var expiredJSON = `{"providerLeaseId":null,"metadata":{"expired":true}}`

// callExpiringWhen makes a call whose host deadline passes once cond holds
// on the emulator (awaited on its change broadcasts, e.g. a hang fault's
// Hits). A call that returns before cond holds returns as it is.
func (e *testEnv) callExpiringWhen(method string, params any, cond func() bool) (json.RawMessage, error) {
	e.t.Helper()
	ctx := testenv.NewDeadline(context.Background())
	defer ctx.Expire()
	calls := make(chan result, 1)
	go func() { calls <- invoke(e.t, ctx, e.reg, method, params) }()
	// Only a guard against a hang of the test itself.
	guard, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held := make(chan error, 1)
	go func() { held <- e.srv.Await(guard, cond) }()
	select {
	case r := <-calls:
		return r.raw, r.err
	case err := <-held:
		require.NoError(e.t, err, "the condition for the host deadline never held")
	}
	ctx.Expire()
	r := wait(e.t, calls)
	return r.raw, r.err
}

// acquireExpiringWhen is acquireErr with a host deadline that passes once
// cond holds (see callExpiringWhen).
func (e *testEnv) acquireExpiringWhen(cond func() bool, extra ...any) error {
	e.t.Helper()
	p := with(e.base(nil), append([]any{"runId", "run-1", "agentId", "agent-1", "executionWorkspaceId", "ws-1"}, extra...)...)
	_, err := e.callExpiringWhen("environmentAcquireLease", p, cond)
	require.Error(e.t, err)
	return err
}

// allocated holds once the emulator has n live sandboxes, all started: a
// create that allocates and then hangs has done its allocating.
func (e *testEnv) allocated(n int) func() bool {
	return func() bool {
		live := e.live()
		for _, sb := range live {
			if sb.State != "started" {
				return false
			}
		}
		return len(live) == n
	}
}

// leased is a fresh env (config cfg, emulator opts) with one acquired lease
// and its sandbox id.
func leased(t *testing.T, cfg map[string]any, opts ...daytonatest.Option) (*testEnv, lease, string) {
	t.Helper()
	e := newTestEnv(t, cfg, opts...)
	l := e.acquire(nil)
	return e, l, *l.ProviderLeaseID
}

// realizeHeld starts a realize of l whose folder creation Daytona holds
// until gate closes, and returns once that request is in flight.
func (e *testEnv) realizeHeld(l lease, gate chan struct{}) <-chan result {
	e.t.Helper()
	e.srv.Inject(daytonatest.Fault{Route: rNewFolder, Gate: gate, Times: 1})
	done := e.async("environmentRealizeWorkspace", e.realizeParams(l))
	e.awaitRequests("POST", rNewFolder, 1)
	return done
}

// requireReceipt asserts a teardown answered the receipt of id in state.
func (e *testEnv) requireReceipt(raw json.RawMessage, err error, id, state string) {
	e.t.Helper()
	require.NoError(e.t, err)
	require.JSONEq(e.t, receiptJSON(id, state), string(raw))
}

func receiptJSON(id, state string) string {
	return `{"providerLeaseId":"` + id + `","state":"` + state + `"}`
}

// teardownCall is the method and params of a teardown of l by name, where
// "cancelActiveWork" is the Stop button: a release with cancelActiveWork.
func (e *testEnv) teardownCall(l lease, name string) (string, map[string]any) {
	if name == "cancelActiveWork" {
		return "environmentReleaseLease", e.leaseParams(l, nil, "cancelActiveWork", true)
	}
	return name, e.leaseParams(l, nil)
}

// eachReuse runs f as parallel subtests for an ephemeral and a reusable
// lease.
func eachReuse(t *testing.T, f func(t *testing.T, reuse bool)) {
	for _, reuse := range []bool{false, true} {
		t.Run(map[bool]string{false: "ephemeral", true: "reusable"}[reuse], func(t *testing.T) {
			t.Parallel()
			f(t, reuse)
		})
	}
}

// eachName runs f as a parallel subtest per name (a method, a case).
func eachName(t *testing.T, names []string, f func(t *testing.T, name string)) {
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, name)
		})
	}
}
