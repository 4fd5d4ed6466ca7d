package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/internal/span"
	"github.com/stretchr/testify/require"
)

// idlePeer is a peer of a worker that reports work through IdleWork, on a
// clock the test moves.
type idlePeer struct {
	*peer
	work  atomic.Value // IdleWork
	mu    sync.Mutex
	clock time.Time
	next  int
}

func startIdlePeer(t *testing.T, reg *Registry) *idlePeer {
	ip := &idlePeer{clock: time.UnixMilli(1_800_000_000_000)}
	ip.work.Store(IdleNone)
	ip.peer = startPeer(t, reg, Options{
		IdleWork: func() IdleWork { return ip.work.Load().(IdleWork) },
		now: func() time.Time {
			ip.mu.Lock()
			defer ip.mu.Unlock()
			return ip.clock
		},
	})
	return ip
}

func (ip *idlePeer) advance(d time.Duration) {
	ip.mu.Lock()
	ip.clock = ip.clock.Add(d)
	ip.mu.Unlock()
}

func (ip *idlePeer) nowMs() int64 {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	return ip.clock.UnixMilli()
}

// call sends one request and returns its response (the next frame).
func (ip *idlePeer) call(method, params string) map[string]any {
	ip.t.Helper()
	ip.next++
	ip.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, ip.next, method, params))
	m := ip.recv()
	require.Equal(ip.t, json.Number(fmt.Sprint(ip.next)), m["id"], "%v", m)
	return m
}

// prepare asks for a hold and returns backgroundWork.
func (ip *idlePeer) prepare(owner string, expiresAt int64) string {
	ip.t.Helper()
	m := ip.call("prepareIdleSleep", fmt.Sprintf(`{"ownerId":%q,"expiresAt":%d}`, owner, expiresAt))
	res := m["result"].(map[string]any)
	require.Equal(ip.t, owner, res["ownerId"], "the answer echoes the hold")
	require.Equal(ip.t, json.Number(fmt.Sprint(expiresAt)), res["expiresAt"])
	return res["backgroundWork"].(string)
}

func (ip *idlePeer) initialize() {
	ip.t.Helper()
	m := ip.call("initialize", `{}`)
	methods := m["result"].(map[string]any)["supportedMethods"]
	require.Contains(ip.t, methods, "prepareIdleSleep")
	require.Contains(ip.t, methods, "releaseIdleSleep")
}

// A granted hold seals the worker until its owner releases it: other
// requests are refused, a stale release is ignored, shutdown is not held.
func TestIdleHoldSealsAndReleases(t *testing.T) {
	ip := startIdlePeer(t, nil)
	exp := ip.nowMs() + 30_000
	require.Equal(t, "present", ip.prepare("owner-1", exp), "an uninitialized worker is not idle")
	ip.initialize()
	require.Equal(t, "none", ip.prepare("owner-1", exp))
	m := ip.call("health", `{}`)
	require.Equal(t, CodeWorkerError, errCode(t, m))
	require.Equal(t, "Plugin is held for idle sleep", m["error"].(map[string]any)["message"])
	require.Equal(t, "none", ip.prepare("owner-1", exp), "the same hold asked again")
	require.Equal(t, "unknown", ip.prepare("owner-2", exp), "another owner while held")
	require.Equal(t, "unknown", ip.prepare("owner-1", exp+1000), "the same owner with another expiry while held")
	require.Nil(t, ip.call("releaseIdleSleep", `{"ownerId":"stale"}`)["error"])
	require.NotNil(t, ip.call("health", `{}`)["error"], "a stale release is ignored")
	require.Nil(t, ip.call("releaseIdleSleep", `{"ownerId":"owner-1"}`)["error"])
	require.Equal(t, "ok", ip.call("health", `{}`)["result"].(map[string]any)["status"])

	// releaseIdleSleep is also accepted as a notification.
	require.Equal(t, "none", ip.prepare("owner-3", exp))
	ip.send(`{"jsonrpc":"2.0","method":"releaseIdleSleep","params":{"ownerId":"owner-3"}}`)
	waitFor(t, func() bool {
		return ip.call("health", `{}`)["error"] == nil
	}, "the released worker serves again")

	// shutdown is not held (sent last: it ends the session).
	require.Equal(t, "none", ip.prepare("owner-4", exp))
	m = ip.call("shutdown", `{}`)
	require.Contains(t, m, "result", "shutdown is answered while held: %v", m)
	require.Nil(t, m["error"])
}

// A hold ends by itself at its expiry; holds the SDK would refuse are
// "unknown" and grant nothing.
func TestIdleHoldExpiresAndBadHoldsAreUnknown(t *testing.T) {
	ip := startIdlePeer(t, nil)
	ip.initialize()
	now := ip.nowMs()
	for _, params := range []string{
		`{"ownerId":"","expiresAt":` + fmt.Sprint(now+1000) + `}`,
		`{"ownerId":"o","expiresAt":` + fmt.Sprint(now) + `}`,
		`{"ownerId":"o","expiresAt":` + fmt.Sprint(now+300_001) + `}`,
		`{"ownerId":"o","expiresAt":"soon"}`,
		`{"ownerId":7,"expiresAt":` + fmt.Sprint(now+1000) + `}`,
		`[1]`,
	} {
		res := ip.call("prepareIdleSleep", params)["result"].(map[string]any)
		require.Equal(t, "unknown", res["backgroundWork"], params)
	}
	require.Nil(t, ip.call("health", `{}`)["error"], "nothing was granted")
	require.Equal(t, "none", ip.prepare("o", now+300_000), "five minutes is the longest hold")
	ip.advance(299 * time.Second)
	require.NotNil(t, ip.call("health", `{}`)["error"])
	ip.advance(time.Second)
	require.Nil(t, ip.call("health", `{}`)["error"], "the hold expired")
}

// Work in flight, an unanswered worker-to-host request, or the worker's
// own evidence keep it awake: "present", and no hold.
func TestIdleWorkPresentGrantsNothing(t *testing.T) {
	reg := NewRegistry()
	started, release := make(chan struct{}), make(chan struct{})
	reg.Register("block", func(context.Context, json.RawMessage) (any, error) {
		close(started)
		<-release
		return "released", nil
	})
	reg.Register("traced", func(ctx context.Context, _ json.RawMessage) (any, error) {
		span.Start(ctx, "transfer").End(nil)
		return "done", nil
	})
	ip := startIdlePeer(t, reg)
	ip.initialize()
	exp := ip.nowMs() + 30_000

	ip.send(`{"jsonrpc":"2.0","id":"b","method":"block"}`)
	<-started
	require.Equal(t, "present", ip.prepare("o", exp), "a request in flight")
	close(release)
	require.Equal(t, "released", ip.recv()["result"])
	waitFor(t, func() bool { return ip.prepare("o", exp) == "none" }, "idle once the request is answered")
	ip.call("releaseIdleSleep", `{"ownerId":"o"}`)

	ip.work.Store(IdlePresent)
	require.Equal(t, "present", ip.prepare("o", exp), "the worker's own evidence")
	ip.work.Store(IdleUnknown)
	require.Equal(t, "unknown", ip.prepare("o", exp))
	require.Nil(t, ip.call("health", `{}`)["error"], "nothing was granted")
	ip.work.Store(IdleNone)

	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ip.send(`{"jsonrpc":"2.0","id":"t","method":"traced","paperclipInvocation":{"id":"inv-1","traceparent":"` + tp + `"}}`)
	spanReq := ip.recv()
	require.Equal(t, "span.record", spanReq["method"])
	require.Equal(t, "done", ip.recv()["result"])
	waitFor(t, func() bool { return ip.prepare("o", exp) == "present" }, "the request is over, its span unanswered")
	ip.send(`{"jsonrpc":"2.0","id":"` + spanReq["id"].(string) + `","result":null}`)
	waitFor(t, func() bool { return ip.prepare("o", exp) == "none" }, "the host answered the span")
}

// Without IdleWork the methods are neither advertised nor served.
func TestIdleMethodsOnlyWithIdleWork(t *testing.T) {
	p := startPeer(t, nil, Options{})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	m := p.recv()
	require.NotContains(t, m["result"].(map[string]any)["supportedMethods"], "prepareIdleSleep")
	p.send(`{"jsonrpc":"2.0","id":2,"method":"prepareIdleSleep","params":{}}`)
	require.Equal(t, CodeMethodNotFound, errCode(t, p.recv()))
	require.False(t, strings.Contains(fmt.Sprint(m), "releaseIdleSleep"))
}

// prepare on its own: an expiry the wire cannot carry (NaN, ±Inf) is
// "unknown", a worker that cannot inspect its work is "present", and a
// release with no hold granted is a no-op.
func TestIdlePrepareEdges(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	d := &idleDrain{now: func() time.Time { return now }}
	nowMs := float64(now.UnixMilli())
	none := func() IdleWork { return IdleNone }
	for _, exp := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		require.Equal(t, IdleUnknown, d.prepare(idleParams{OwnerID: "o", ExpiresAt: exp}, true, none), "%v", exp)
	}
	require.Nil(t, d.hold)
	require.Equal(t, IdlePresent, d.prepare(idleParams{OwnerID: "o", ExpiresAt: nowMs + 1000}, true, nil))
	require.Equal(t, IdlePresent, d.prepare(idleParams{OwnerID: "o", ExpiresAt: nowMs + 1000}, false, none))
	require.Nil(t, d.hold)
	d.release("o")
	require.Nil(t, d.hold)
	require.Equal(t, IdleNone, d.prepare(idleParams{OwnerID: "o", ExpiresAt: nowMs + 1000}, true, none))
	require.NotNil(t, d.hold)
}
