package provider

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/rpc"
)

// Titles 92/93 at the wire: an execute the host traced (its
// paperclipInvocation carries a traceparent) sends the session.open span it
// really emits as a span.record request, echoing the invocation id, before
// the execute's response; the same execute untraced sends none.
func TestTracedExecuteSendsSessionSpanBeforeTheResult(t *testing.T) {
	e, l, id := leased(t, nil)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- rpc.Serve(context.Background(), inR, outW, rpc.Options{Registry: e.reg}); outW.Close() }()
	defer func() { inW.Close(); require.NoError(t, <-done) }()
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 16<<20)

	// exchange sends one execute and returns the span.record params seen
	// before its response.
	exchange := func(id int, invocation map[string]any) []map[string]any {
		p := with(e.base(l.Metadata), "lease", l, "command", "true")
		frame, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "environmentExecute", "params": p, "paperclipInvocation": invocation})
		_, err := inW.Write(append(frame, '\n'))
		require.NoError(t, err)
		var spans []map[string]any
		for sc.Scan() {
			var m struct {
				ID                    json.RawMessage `json:"id"`
				Method                string          `json:"method"`
				Params                map[string]any  `json:"params"`
				Error                 json.RawMessage `json:"error"`
				PaperclipInvocationID string          `json:"paperclipInvocationId"`
			}
			require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
			if m.Method == "" {
				require.Nil(t, m.Error, "%s", m.Error)
				require.JSONEq(t, string(mustJSON(t, id)), string(m.ID))
				return spans
			}
			if m.Method == "span.record" {
				assert.Equal(t, invocation["id"], m.PaperclipInvocationID)
				spans = append(spans, m.Params)
			}
		}
		t.Fatal("worker output ended")
		return nil
	}

	// Untraced: the first command opens the session, and no span is sent.
	untraced := exchange(1, map[string]any{"id": "inv-1", "scope": map[string]any{"companyId": "company-1"}})
	assert.Empty(t, untraced)

	// Forget the session (as after a restart) so the next command opens
	// one again, this time traced.
	e.d.runner.ForgetSessions(string(e.scopeOf(id)))
	traced := exchange(2, map[string]any{"id": "inv-2", "scope": map[string]any{"companyId": "company-1"},
		"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
	require.Len(t, traced, 1, "%v", traced)
	assert.Equal(t, "session.open", traced[0]["name"])
	assert.Equal(t, map[string]any{"paperclip.sandbox.startup.provider": "daytona"}, traced[0]["attributes"])
	assert.NotContains(t, traced[0], "status")
}
