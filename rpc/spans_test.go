package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/internal/span"
)

// A request the host traced (paperclipInvocation with a traceparent) has
// its spans sent as span.record requests echoing the invocation id, before
// its response; an untraced one sends none; a span ending after the answer
// is dropped; the host's answers to span.record get no reply.
func TestSpanRecordForTracedRequestsOnly(t *testing.T) {
	proceed := make(chan struct{})
	late := make(chan struct{})
	var once sync.Once
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, _ json.RawMessage) (any, error) {
		sp := span.Start(ctx, "transfer")
		sp.SetAttr(span.AttrTransferGuardCount, 1)
		sp.End(nil)
		span.Start(ctx, "session.open").End(errors.New("create failed"))
		once.Do(func() {
			after := span.Start(ctx, "promote")
			go func() { <-proceed; after.End(nil); close(late) }()
		})
		return "done", nil
	})
	p := startPeer(t, reg, Options{})
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	p.send(`{"jsonrpc":"2.0","id":1,"method":"work","paperclipInvocation":{"id":"inv-1","scope":{"companyId":"c"},"traceparent":"` + tp + `"}}`)
	var spans []map[string]any
	for {
		m := p.recv()
		if m["method"] == nil {
			require.Equal(t, json.Number("1"), m["id"], "the response comes last: %v", m)
			break
		}
		require.Equal(t, "span.record", m["method"])
		require.Equal(t, "inv-1", m["paperclipInvocationId"], "the host finds the trace by the invocation id")
		id, _ := m["id"].(string)
		require.True(t, strings.HasPrefix(id, "span-"), "a request with the worker's own id: %v", m)
		// The host answers; the worker must not reply to the answer.
		p.send(`{"jsonrpc":"2.0","id":"` + id + `","result":null}`)
		spans = append(spans, m["params"].(map[string]any))
	}
	close(proceed)
	<-late
	require.Len(t, spans, 2)
	assert.Equal(t, "transfer", spans[0]["name"])
	assert.Equal(t, map[string]any{"paperclip.sandbox.startup.provider": "daytona", "paperclip.sandbox.startup.transfer.guard.count": json.Number("1")}, spans[0]["attributes"])
	assert.NotContains(t, spans[0], "status")
	for _, s := range spans {
		start, err := s["startTimeMs"].(json.Number).Int64()
		require.NoError(t, err)
		end, err := s["endTimeMs"].(json.Number).Int64()
		require.NoError(t, err)
		assert.Positive(t, start)
		assert.LessOrEqual(t, start, end)
	}
	assert.Equal(t, "session.open", spans[1]["name"])
	assert.Equal(t, map[string]any{"code": json.Number("2"), "message": "create failed"}, spans[1]["status"])

	// Untraced: no traceparent, or a traceparent without an invocation id
	// to echo. The late span of the first request is not sent either: the
	// first frame out is each response.
	// A traceparent in another member is not the invocation's.
	for i, inv := range []string{`"paperclipInvocation":{"id":"inv-2"}`, `"paperclipInvocation":{"traceparent":"` + tp + `"}`,
		`"other":{"traceparent":"` + tp + `"},"paperclipInvocation":{"id":"inv-4"}`,
		`"paperclipInvocation":{"id":"inv-5"},"zother":{"traceparent":"` + tp + `"}`} {
		id := json.Number(string(rune('2' + i)))
		p.send(`{"jsonrpc":"2.0","id":` + id.String() + `,"method":"work",` + inv + `}`)
		m := p.recv()
		require.Equal(t, id, m["id"], "no span.record before the response: %v", m)
	}
}
