package provider

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/stretchr/testify/require"
)

// testEnv is a driver wired to a fresh emulator, called through the same
// registry the worker serves.
type testEnv struct {
	t   *testing.T
	srv *daytonatest.Server
	d   *Driver
	reg *rpc.Registry
	cfg map[string]any
}

func newTestEnv(t *testing.T, cfg map[string]any, opts ...daytonatest.Option) *testEnv {
	t.Helper()
	srv := daytonatest.NewServer(t, opts...)
	e := &testEnv{t: t, srv: srv}
	e.cfg = map[string]any{"apiKey": srv.APIKey(), "apiUrl": srv.URL(), "timeoutMs": 20000}
	maps.Copy(e.cfg, cfg)
	e.d = e.newDriver()
	e.reg = rpc.NewRegistry()
	e.d.Register(e.reg)
	return e
}

// newDriver is a second, fresh driver (a restarted worker) on the same emulator.
func (e *testEnv) newDriver() *Driver {
	fast := func() backoff.BackOff { return backoff.NewConstantBackOff(2 * time.Millisecond) }
	retry := daytona.RetryPolicy{MaxRetries: 2, BackOff: fast,
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }}
	return New(Options{
		Env:         func(string) (string, bool) { return "", false },
		HTTPClient:  &http.Client{},
		PollBackOff: fast,
		RetryPolicy: &retry,
	})
}

func (e *testEnv) call(method string, params any) (json.RawMessage, error) {
	e.t.Helper()
	return callOn(e.t, e.reg, method, params)
}

func callOn(t *testing.T, reg *rpc.Registry, method string, params any) (json.RawMessage, error) {
	t.Helper()
	h, ok := reg.Lookup(method)
	require.True(t, ok, method)
	raw, err := json.Marshal(params)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := h(ctx, raw)
	if err != nil {
		return nil, err
	}
	out, merr := json.Marshal(res)
	require.NoError(t, merr)
	return out, nil
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
