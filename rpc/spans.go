package rpc

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/daytonaworker/daytona-worker/internal/span"
)

// Provider spans (docs/host.md#spans). The host traces a request only inside
// a measured start-up step, and then puts a W3C traceparent in the
// request's paperclipInvocation. For such a request the worker reports each
// finished span as a span.record request to the host, echoing the
// invocation id: the host finds the trace parent from that id (it never
// takes one from the worker) and accepts no spans for an untraced request.
// Like the SDK's tracer, the worker never waits for the answer: a span must
// not slow or fail the work it measures.

// spanIDPrefix marks the ids of the worker's span.record requests, so the
// host's answers to them are recognised and dropped quietly.
const spanIDPrefix = "span-"

// spanSeq numbers span.record requests; ids only need to be unique among
// the worker's own requests in flight.
var spanSeq atomic.Uint64

type spanRequest struct {
	JSONRPC      string      `json:"jsonrpc"`
	ID           string      `json:"id"`
	Method       string      `json:"method"`
	Params       span.Record `json:"params"`
	InvocationID string      `json:"paperclipInvocationId"`
}

// requestContext is the context a host request is served under: it carries
// the request and, when the host traced it, a span recorder.
func (s *server) requestContext(r *request, req *jsonrpc2.Request) context.Context {
	ctx := context.WithValue(s.base, requestKey{}, r)
	if r.invocationID == "" || traceparent(req) == "" {
		return ctx
	}
	return span.WithRecorder(ctx, func(rec span.Record) { s.sendSpan(r, rec) })
}

// sendSpan writes rec as a span.record request before the response of r:
// once r is answered the host has forgotten the invocation, and with it the
// trace, so a later span is dropped here.
func (s *server) sendSpan(r *request, rec span.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.answered {
		return
	}
	id := spanIDPrefix + strconv.FormatUint(spanSeq.Add(1), 10)
	// Unanswered, the span is a host write that may still be going on: it
	// counts against idle sleep until the host's answer arrives.
	s.idle.callSent(strconv.Quote(id))
	err := s.stream.writeFrame(spanRequest{JSONRPC: "2.0", ID: id, Method: "span.record", Params: rec, InvocationID: r.invocationID})
	if err != nil {
		s.idle.callAnswered(strconv.Quote(id))
		s.log.Debug("could not send a span", "span", rec.Name, "err", err)
	}
}

// traceparent extracts paperclipInvocation.traceparent.
func traceparent(req *jsonrpc2.Request) string {
	for _, f := range req.ExtraFields {
		if m, ok := f.Value.(map[string]any); ok && f.Name == "paperclipInvocation" {
			tp, _ := m["traceparent"].(string)
			return strings.TrimSpace(tp)
		}
	}
	return ""
}

// isSpanAnswer reports whether a response frame's id is one of the worker's
// span.record ids.
func isSpanAnswer(id []byte) bool {
	return strings.HasPrefix(string(id), `"`+spanIDPrefix)
}
