package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// endlessLine yields one line of n bytes of JSON-ish content, then a newline
// and a valid request, without ever holding the line in memory.
type endlessLine struct {
	prefix string
	n      int64
	tail   string
	off    int64
}

func (e *endlessLine) Read(p []byte) (int, error) {
	total := int64(len(e.prefix)) + e.n + int64(len(e.tail))
	if e.off >= total {
		return 0, io.EOF
	}
	i := 0
	for i < len(p) && e.off < total {
		switch {
		case e.off < int64(len(e.prefix)):
			p[i] = e.prefix[e.off]
		case e.off < int64(len(e.prefix))+e.n:
			p[i] = 'x'
		default:
			p[i] = e.tail[e.off-int64(len(e.prefix))-e.n]
		}
		i++
		e.off++
	}
	return i, nil
}

func TestOverLimitLineRejectedWithoutBufferingIt(t *testing.T) {
	const limit = 1 << 20
	in := &endlessLine{
		prefix: `{"jsonrpc":"2.0","id":41,"method":"health","params":{"pad":"`,
		n:      64 << 20,
		tail:   "\"}}\n" + `{"jsonrpc":"2.0","id":42,"method":"health"}` + "\n",
	}
	var out bytes.Buffer
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := newStream(in, &out, limit, slog.New(slog.DiscardHandler))
	var got json.RawMessage
	_ = got
	line, err := s.readLine()
	require.Nil(t, line)
	var tl *errLineTooLong
	require.ErrorAs(t, err, &tl)
	require.Equal(t, `41`, string(tl.id), "the id is sniffed from the prefix")
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8*limit), "over-limit line must not be buffered whole")
	line, err = s.readLine()
	require.NoError(t, err)
	require.Equal(t, `{"jsonrpc":"2.0","id":42,"method":"health"}`, string(line))
}

func TestOverLimitFrameAnsweredThroughServe(t *testing.T) {
	p := startPeer(t, nil, Options{MaxFrame: 4096})
	p.send(`{"jsonrpc":"2.0","id":"big","method":"health","params":{"pad":"` + strings.Repeat("y", 10000) + `"}}`)
	m := p.recv()
	require.Equal(t, "big", m["id"])
	require.Equal(t, CodeInvalidRequest, errCode(t, m))
	p.send(`{"jsonrpc":"2.0","method":"x","params":"` + strings.Repeat("z", 10000) + `"}`) // no id: null
	m = p.recv()
	require.Nil(t, m["id"])
	p.send(`{"jsonrpc":"2.0","id":2,"method":"health"}`)
	require.Equal(t, json.Number("2"), p.recv()["id"])
}

func TestOversizedResultBecomesError(t *testing.T) {
	reg := NewRegistry()
	reg.Register("huge", func(_ context.Context, _ json.RawMessage) (any, error) { return strings.Repeat("a", 8192), nil })
	p := startPeer(t, reg, Options{MaxFrame: 4096})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"huge"}`)
	m := p.recv()
	require.Equal(t, json.Number("1"), m["id"])
	require.Contains(t, m["error"].(map[string]any)["message"], "exceeds the host's")
}

func TestUnencodableResultBecomesError(t *testing.T) {
	reg := NewRegistry()
	reg.Register("nan", func(_ context.Context, _ json.RawMessage) (any, error) { return math.NaN(), nil })
	p := startPeer(t, reg, Options{})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"nan"}`)
	m := p.recv()
	require.Equal(t, json.Number("1"), m["id"])
	require.Equal(t, CodeWorkerError, errCode(t, m))
	require.Equal(t, "could not encode the result", m["error"].(map[string]any)["message"])
}
