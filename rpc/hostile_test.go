package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestErrorsQuoteABoundedSliceOfHostileInput: a 1 MiB method name, a 1 MiB
// number and a handler error quoting 10 MB all become short messages. (The
// frames stay at 1 MiB: parsing larger ones under the race detector only
// measures the machine.)
func TestErrorsQuoteABoundedSliceOfHostileInput(t *testing.T) {
	reg, _ := testRegistry()
	huge := strings.Repeat("Q", 10<<20)
	reg.Register("huge", func(context.Context, json.RawMessage) (any, error) {
		return nil, errors.New("handler quoted " + huge)
	})
	p := startPeer(t, reg, Options{})
	for i, c := range []struct {
		line string
		code int64
		max  int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"` + huge[:1<<20] + `"}`, CodeMethodNotFound, 1024},
		{`{"jsonrpc":"2.0","id":2,"method":"typed","params":{"timeoutMs":1` + strings.Repeat("0", 1<<20) + `}}`, CodeInvalidParams, 1024},
		{`{"jsonrpc":"2.0","id":3,"method":"huge"}`, CodeWorkerError, MaxErrorMessage + len("…")},
	} {
		p.send(c.line)
		m := p.recv()
		require.Equal(t, c.code, errCode(t, m), "case %d", i)
		msg := m["error"].(map[string]any)["message"].(string)
		require.LessOrEqual(t, len(msg), c.max, "case %d: %.200q", i, msg)
	}
	p.send(`{"jsonrpc":"2.0","id":"after","method":"health"}`)
	require.Equal(t, "after", p.recv()["id"])
}
