package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// initialize answers ok with the methods the worker serves, once: a
// second initialize is refused as the SDK refuses it.
func TestInitializeOnce(t *testing.T) {
	reg := NewRegistry()
	reg.Register("environmentProbe", func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	p := startPeer(t, reg, Options{})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"apiVersion":1,"instanceInfo":{"hostVersion":"2026.916.1"}}}`)
	m := p.recv()
	res := m["result"].(map[string]any)
	require.Equal(t, true, res["ok"], "%v", m)
	require.Contains(t, res["supportedMethods"], "environmentProbe")
	require.Contains(t, res["supportedMethods"], "shutdown")

	p.send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"apiVersion":1}}`)
	m = p.recv()
	require.EqualValues(t, CodeWorkerError, errCode(t, m))
	require.Equal(t, "Worker already initialized", m["error"].(map[string]any)["message"])
}

// OnShutdown runs before shutdown is answered: while the hook has not
// returned, nothing is written; once it returns, the answer is null.
func TestShutdownHookRunsBeforeTheAnswer(t *testing.T) {
	called, release := make(chan struct{}), make(chan struct{})
	p := startPeer(t, nil, Options{OnShutdown: func(context.Context) {
		close(called)
		<-release
	}})
	p.send(`{"jsonrpc":"2.0","id":"s","method":"shutdown"}`)
	<-called
	require.Empty(t, p.lines, "answered before the hook returned")
	close(release)
	m := p.recv()
	require.Equal(t, "s", m["id"])
	require.Contains(t, m, "result")
	require.Nil(t, m["result"])
}

// A notification without "jsonrpc":"2.0" is dropped unanswered (it has
// no id to answer); the next request is answered first.
func TestNotificationWithoutVersionIsDropped(t *testing.T) {
	p := startPeer(t, nil, Options{})
	p.send(`{"method":"health"}`)
	p.send(`{"jsonrpc":"1.0","method":"health"}`)
	p.send(`{"jsonrpc":"2.0","id":9,"method":"health"}`)
	m := p.recv()
	require.Equal(t, json.Number("9"), m["id"])
	require.Contains(t, m, "result")
}

// A request refused because an idle hold is granted is done with at
// once: at the end of serving no handler is left to wait for, so Serve
// returns without sitting out its grace (an hour here) or warning. (Sample-7 bug 26: the refusal not
// counted as done.)
func TestARequestRefusedUnderAHoldIsNotLeftInFlight(t *testing.T) {
	var logs testenv.LogBuffer
	reg := NewRegistry()
	reg.Register("echo", func(_ context.Context, p json.RawMessage) (any, error) { return p, nil })
	p := startPeer(t, reg, Options{
		IdleWork:      func() IdleWork { return IdleNone },
		ShutdownGrace: time.Hour, // with a request left in flight, end() gives up
		Logger:        slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	require.Contains(t, p.recv(), "result")
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"prepareIdleSleep","params":{"ownerId":"o","expiresAt":%d}}`,
		time.Now().Add(2*time.Minute).UnixMilli()))
	require.Equal(t, "none", p.recv()["result"].(map[string]any)["backgroundWork"])
	p.send(`{"jsonrpc":"2.0","id":2,"method":"echo","params":{}}`)
	m := p.recv()
	require.Equal(t, "Plugin is held for idle sleep", m["error"].(map[string]any)["message"])
	p.send(`{"jsonrpc":"2.0","id":3,"method":"releaseIdleSleep","params":{"ownerId":"o"}}`)
	require.Contains(t, p.recv(), "result")
	p.end()
	require.NotContains(t, logs.String(), "handlers still running")
}
