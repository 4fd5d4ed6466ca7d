package provider

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/stretchr/testify/require"
)

// expiringDeadline is a host call context whose deadline passes when the test
// calls expire, not after a wall-clock interval: a hang case then ends at
// the point the test chose (the hang has begun), however slowly a loaded
// machine got there. Its Err is context.DeadlineExceeded, as a real host
// deadline's would be.
type expiringDeadline struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newExpiringDeadline() *expiringDeadline {
	return &expiringDeadline{Context: context.Background(), done: make(chan struct{})}
}

func (c *expiringDeadline) expire() { c.once.Do(func() { close(c.done) }) }

func (c *expiringDeadline) Done() <-chan struct{} { return c.done }

func (c *expiringDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// callExpiringWhen makes a call whose host deadline passes once cond holds
// on the emulator (awaited on its change broadcasts, e.g. a hang fault's
// Hits). A call that returns before cond holds returns as it is.
func (e *testEnv) callExpiringWhen(method string, params any, cond func() bool) (json.RawMessage, error) {
	e.t.Helper()
	h, ok := e.reg.Lookup(method)
	require.True(e.t, ok, method)
	raw, err := json.Marshal(params)
	require.NoError(e.t, err)
	ctx := newExpiringDeadline()
	defer ctx.expire()
	calls := make(chan result, 1)
	go func() {
		res, err := h(ctx, raw)
		if err != nil {
			calls <- result{err: err}
			return
		}
		out, _ := json.Marshal(res)
		calls <- result{raw: out}
	}()
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
	ctx.expire()
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
