package rpc

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
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
