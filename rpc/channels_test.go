package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// A notification sent from AfterReply follows the response, and a
// Notifier keeps working after its request was answered.
func TestAfterReplyNotifiesAfterTheResponse(t *testing.T) {
	reg := NewRegistry()
	later := make(chan *Notifier, 1)
	reg.Register("open", func(ctx context.Context, _ json.RawMessage) (any, error) {
		n := NotifierFrom(ctx)
		require.True(t, AfterReply(ctx, func() { _ = n.Notify("chan.data", map[string]string{"chunk": "first"}) }))
		later <- n
		return map[string]string{"workerSessionId": "w1"}, nil
	})
	p := startPeer(t, reg, Options{})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"open","params":{}}`)
	resp := p.recv()
	require.Equal(t, json.Number("1"), resp["id"])
	note := p.recv()
	require.Equal(t, "chan.data", note["method"])
	_, hasID := note["id"]
	require.False(t, hasID, "a notification carries no id")
	n := <-later
	require.NoError(t, n.Notify("chan.exit", map[string]any{"exitCode": 0}))
	require.Equal(t, "chan.exit", p.recv()["method"])
	require.False(t, AfterReply(context.Background(), func() { t.Fatal("ran without a request") }))
	require.Nil(t, NotifierFrom(context.Background()))
}

// Ordered requests are taken in arrival order, whatever order their
// continuations finish in; a failed take answers at once.
func TestRegisterOrderedKeepsArrivalOrder(t *testing.T) {
	reg := NewRegistry()
	var mu sync.Mutex
	var taken []int
	release := make(chan struct{})
	reg.RegisterOrdered("write", TypedOrdered(func(_ context.Context, p struct{ N int }) (Continuation, error) {
		if p.N < 0 {
			return nil, InvalidParams("n must not be negative")
		}
		mu.Lock()
		taken = append(taken, p.N)
		mu.Unlock()
		return func(ctx context.Context) (any, error) {
			<-release
			return p.N, nil
		}, nil
	}))
	p := startPeer(t, reg, Options{})
	const n = 200
	for i := range n {
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"write","params":{"N":%d}}`, i+1, i))
	}
	p.send(`{"jsonrpc":"2.0","id":"bad","method":"write","params":{"N":-1}}`)
	bad := p.recv()
	require.Equal(t, int64(CodeInvalidParams), errCode(t, bad), "the failed take answers before any continuation")
	close(release)
	for range n {
		require.Contains(t, p.recv(), "result")
	}
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, want, taken)
}

// A take that returns no continuation answers null at once; a take that
// fails answers its error at once even when it also returned a
// continuation, which never runs.
func TestRegisterOrderedTakeWithoutAContinuation(t *testing.T) {
	reg := NewRegistry()
	ran := make(chan struct{}, 1)
	reg.RegisterOrdered("take", TypedOrdered(func(_ context.Context, p struct{ Fail bool }) (Continuation, error) {
		if !p.Fail {
			return nil, nil
		}
		return func(context.Context) (any, error) { ran <- struct{}{}; return "ran", nil }, InvalidParams("refused")
	}))
	p := startPeer(t, reg, Options{})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"take","params":{"Fail":false}}`)
	resp := p.recv()
	require.Contains(t, resp, "result")
	require.Nil(t, resp["result"])
	p.send(`{"jsonrpc":"2.0","id":2,"method":"take","params":{"Fail":true}}`)
	require.Equal(t, int64(CodeInvalidParams), errCode(t, p.recv()))
	p.send(`{"jsonrpc":"2.0","id":3,"method":"take","params":{"Fail":false}}`)
	require.Contains(t, p.recv(), "result", "still serving")
	require.Empty(t, ran, "the refused take's continuation never ran")
}
