package rpc

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/stretchr/testify/require"
)

// A response from the host to no request of the worker's (any id but the
// worker's span.record ids) is dropped without a reply, and serving goes on.
func TestStrayResponsesDroppedAndServingContinues(t *testing.T) {
	p := startPeer(t, nil, Options{})
	p.send(`{"jsonrpc":"2.0","id":"bogus","result":{}}`)
	p.send(`{"jsonrpc":"2.0","id":1,"result":{"ok":1}}`)
	p.send(`{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no"}}`)
	p.send(`{"jsonrpc":"2.0","id":3,"method":"health"}`)
	m := p.recv()
	require.Equal(t, json.Number("3"), m["id"], "the first frame out answers the health request: %v", m)
	require.Contains(t, m, "result")
}

func TestExecuteLogOrderingSplittingAndAfterAnswer(t *testing.T) {
	late := make(chan error, 1)
	proceed := make(chan struct{})
	reg := NewRegistry()
	big := strings.Repeat("é", MaxLogChunkChars) + "😀tail" // > one chunk; an astral rune counts 2
	reg.Register("execute", func(ctx context.Context, _ json.RawMessage) (any, error) {
		require.Error(t, ExecuteLog(ctx, "stdin", "x"))
		require.NoError(t, ExecuteLog(ctx, Stdout, ""))
		require.NoError(t, ExecuteLog(ctx, Stdout, "one\n"))
		require.NoError(t, ExecuteLog(ctx, Stderr, "two\n"))
		require.NoError(t, ExecuteLog(ctx, Stdout, big))
		go func() { <-proceed; late <- ExecuteLog(ctx, Stdout, "late") }()
		return map[string]any{"exitCode": 0}, nil
	})
	p := startPeer(t, reg, Options{})
	p.send(`{"jsonrpc":"2.0","id":7,"method":"execute","paperclipInvocation":{"id":"inv-7"}}`)
	got, answer := p.logsUntilAnswer("inv-7")
	require.Equal(t, json.Number("7"), answer["id"])
	close(proceed)
	require.ErrorIs(t, <-late, ErrAnswered)
	require.Len(t, got, 4)
	require.Equal(t, map[string]any{"stream": "stdout", "chunk": "one\n"}, got[0])
	require.Equal(t, map[string]any{"stream": "stderr", "chunk": "two\n"}, got[1])
	var rebuilt string
	for _, g := range got[2:] {
		c := g["chunk"].(string)
		require.LessOrEqual(t, len(utf16.Encode([]rune(c))), MaxLogChunkChars)
		rebuilt += c
	}
	require.Equal(t, big, rebuilt)
}

func TestExecuteLogNeedsInvocation(t *testing.T) {
	reg := NewRegistry()
	reg.Register("execute", func(ctx context.Context, _ json.RawMessage) (any, error) {
		return nil, ExecuteLog(ctx, Stdout, "x")
	})
	p := startPeer(t, reg, Options{})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"execute"}`)
	require.Contains(t, p.recv()["error"].(map[string]any)["message"], "paperclipInvocation")
	require.ErrorIs(t, ExecuteLog(context.Background(), Stdout, "x"), ErrNotServing)

	// A server that has no connection (yet, or any more) is not serving;
	// a serving one without a request in the context needs the invocation.
	require.ErrorIs(t, ExecuteLog(context.WithValue(context.Background(), serverKey{}, &server{}), Stdout, "x"), ErrNotServing)
	reg.Register("detached", func(ctx context.Context, _ json.RawMessage) (any, error) {
		detached := context.WithValue(context.Background(), serverKey{}, ctx.Value(serverKey{}))
		return nil, ExecuteLog(detached, Stdout, "x")
	})
	p.send(`{"jsonrpc":"2.0","id":2,"method":"detached"}`)
	require.Contains(t, p.recv()["error"].(map[string]any)["message"], "paperclipInvocation")
}

func TestSplitChars(t *testing.T) {
	for _, c := range []struct {
		in        string
		max       int
		head      string
		headUnits int
	}{
		{"abc", 2, "ab", 2},
		{"aé😀b", 3, "aé", 2},
		{"😀😀", 3, "😀", 2},
		{"😀", 1, "😀", 2}, // always at least one rune
		{"a\xffb", 2, "a\xff", 2},
	} {
		head, units := splitChars(c.in, c.max)
		require.Equal(t, c.head, head, "%q", c.in)
		require.Equal(t, c.headUnits, units, "%q", c.in)
	}
}

// A request already waiting on stdin when Serve starts is dispatched by the
// library's read loop inside NewConn, possibly before Serve has stored the
// connection: its handler must still be able to send execute.log. (CI saw a
// worker→host frame fail with ErrNotServing this way once.) The hook holds
// Serve right after NewConn until the handler has logged, so the handler
// always runs in that window.
func TestExecuteLogFromTheFirstRequestAtStart(t *testing.T) {
	logged := make(chan error, 1)
	reg := NewRegistry()
	reg.Register("execute", func(ctx context.Context, _ json.RawMessage) (any, error) {
		err := ExecuteLog(ctx, Stdout, "early")
		logged <- err
		if err != nil {
			return nil, err
		}
		return "noted", nil
	})
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"execute","paperclipInvocation":{"id":"inv-1"}}` + "\n")
	var out strings.Builder
	opts := Options{Registry: reg, ShutdownGrace: 30 * time.Second}
	opts.connected = func() { require.NoError(t, <-logged) }
	require.NoError(t, Serve(context.Background(), in, &out, opts))
	require.Contains(t, out.String(), `"method":"execute.log"`)
	require.Contains(t, out.String(), `"paperclipInvocationId":"inv-1"`)
	require.Contains(t, out.String(), `"result":"noted"`)
}

// TestExecuteLogBudgetAtTheLimit: an execute call may stream exactly
// MaxLogTotalChars characters; the character one past it is refused with
// ErrLogBudget and sent nowhere. The count is what was sent before, so
// the call starts just under the limit (streaming 128 Mi characters here
// would only cost time).
func TestExecuteLogBudgetAtTheLimit(t *testing.T) {
	errs := make(chan error, 3)
	reg := NewRegistry()
	reg.Register("execute", func(ctx context.Context, _ json.RawMessage) (any, error) {
		r := ctx.Value(requestKey{}).(*request)
		r.mu.Lock()
		r.logChars = MaxLogTotalChars - 4
		r.mu.Unlock()
		errs <- ExecuteLog(ctx, Stdout, "ab")
		errs <- ExecuteLog(ctx, Stdout, "😀") // two characters: exactly the limit
		errs <- ExecuteLog(ctx, Stderr, "x")
		return map[string]any{"exitCode": 0}, nil
	})
	p := startPeer(t, reg, Options{})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"execute","paperclipInvocation":{"id":"inv-1"}}`)
	logs, _ := p.logsUntilAnswer("inv-1")
	var chunks []string
	for _, l := range logs {
		chunks = append(chunks, l["chunk"].(string))
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs, "the limit itself is allowed")
	require.ErrorIs(t, <-errs, ErrLogBudget, "one past the limit")
	require.Equal(t, []string{"ab", "😀"}, chunks)
}
