package provider

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	cmdexec "github.com/daytonaworker/daytona-worker/exec"
	"github.com/stretchr/testify/require"
)

// Helpers of the lifecycle tests (resume, teardown, state, faults). They
// extend harness_test.go without changing it.

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

// driverWith is a fresh driver like harness newDriver, with options changed.
func (e *testEnv) driverWith(mod func(*Options)) *Driver {
	fast := func() backoff.BackOff { return backoff.NewConstantBackOff(2 * time.Millisecond) }
	retry := daytona.RetryPolicy{MaxRetries: 2, BackOff: fast,
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }}
	o := Options{
		Env:         func(string) (string, bool) { return "", false },
		HTTPClient:  &http.Client{},
		PollBackOff: fast,
		RetryPolicy: &retry,
	}
	if mod != nil {
		mod(&o)
	}
	return New(o)
}

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

// result is the outcome of a call made in the background.
type result struct {
	raw json.RawMessage
	err error
}

// async runs a call in the background.
func (e *testEnv) async(method string, params any) <-chan result {
	ch := make(chan result, 1)
	reg := e.reg
	go func() {
		h, _ := reg.Lookup(method)
		raw, _ := json.Marshal(params)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := h(ctx, raw)
		if err != nil {
			ch <- result{err: err}
			return
		}
		out, _ := json.Marshal(res)
		ch <- result{raw: out}
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

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
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
	c, err := daytona.NewClient(daytona.WithAPIURL(e.srv.URL()), daytona.WithAPIKey(e.srv.APIKey()))
	require.NoError(e.t, err)
	sb, _, err := c.Sandboxes.Get(context.Background(), id)
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

// info is the emulator's view of a sandbox, which must exist.
func (e *testEnv) info(id string) daytonatest.SandboxInfo {
	e.t.Helper()
	info, ok := e.srv.Sandbox(id)
	require.True(e.t, ok, "sandbox %s exists", id)
	return info
}

var expiredJSON = `{"providerLeaseId":null,"metadata":{"expired":true}}`
