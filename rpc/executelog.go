package rpc

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf16"
)

// Host limits on execute.log (docs/host.md#execute).
const (
	// MaxLogChunkChars is the largest execute.log chunk, in JavaScript
	// characters (UTF-16 code units).
	MaxLogChunkChars = 1_000_000
	// MaxLogTotalChars is what the host accepts per execute call.
	MaxLogTotalChars = 128 << 20
)

var (
	// ErrNotServing is returned when ctx carries no serving session.
	ErrNotServing = errors.New("rpc: no connection to the host in this context")
	// ErrAnswered is returned by execute.log once its request was answered:
	// the host would drop the chunk.
	ErrAnswered = errors.New("rpc: the request was already answered")
	// ErrLogBudget is returned once an execute call streamed
	// MaxLogTotalChars characters; the host drops anything beyond.
	ErrLogBudget = errors.New("rpc: execute.log budget for this call is spent")
)

// LogStream names an execute.log stream.
type LogStream string

// The two streams the host accepts.
const (
	Stdout LogStream = "stdout"
	Stderr LogStream = "stderr"
)

// ExecuteLog sends live command output for the request ctx serves as
// execute.log notifications (docs/host.md#execute): stream must be stdout or
// stderr; empty text sends nothing; text over MaxLogChunkChars is split on
// UTF-8 boundaries. Each call writes its frames before it returns, so output
// always precedes the request's response; once the response is out it
// returns ErrAnswered. Text should be cut on rune boundaries by the caller,
// or the host sees replacement characters.
func ExecuteLog(ctx context.Context, stream LogStream, text string) error {
	if stream != Stdout && stream != Stderr {
		return fmt.Errorf("rpc: execute.log stream must be stdout or stderr, not %q", stream)
	}
	if text == "" {
		return nil
	}
	srv, _ := ctx.Value(serverKey{}).(*server)
	if srv == nil || srv.conn.Load() == nil {
		return ErrNotServing
	}
	r, _ := ctx.Value(requestKey{}).(*request)
	if r == nil || r.invocationID == "" {
		return errors.New("rpc: execute.log needs the paperclipInvocation of an execute request")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for text != "" {
		if r.answered {
			return ErrAnswered
		}
		chunk, units := splitChars(text, MaxLogChunkChars)
		if r.logChars+int64(units) > MaxLogTotalChars {
			return ErrLogBudget
		}
		if err := srv.stream.writeLogFrame(r.invocationID, stream, chunk); err != nil {
			return err
		}
		r.logChars += int64(units)
		text = text[len(chunk):]
	}
	return nil
}

// writeLogFrame writes one execute.log notification. The frame is built
// by hand into a pooled buffer (see resultjson.go): through the library's
// Notify a chunk of up to a million characters was encoded four times
// over (params, the request map, the stream's encoder validating both).
// The host routes a chunk by the invocation id; chunks without it are
// dropped.
func (s *stream) writeLogFrame(invocationID string, stream LogStream, chunk string) error {
	buf := getFrameBuf(len(chunk) + len(chunk)/32 + len(invocationID) + 256)
	buf = append(buf, `{"jsonrpc":"2.0","method":"execute.log","paperclipInvocationId":`...)
	buf = appendJSONString(buf, invocationID)
	buf = append(buf, `,"params":{"stream":`...)
	buf = appendJSONString(buf, string(stream))
	buf = append(buf, `,"chunk":`...)
	buf = appendJSONString(buf, chunk)
	buf = append(buf, "}}\n"...)
	_, err := frameWriter{s}.Write(buf)
	putFrameBuf(buf)
	return err
}

// splitChars returns the longest prefix of s, cut at a rune boundary, whose
// UTF-16 length is at most max, and that length. It always returns at least
// one rune.
func splitChars(s string, max int) (string, int) {
	units := 0
	for i, r := range s {
		n := utf16.RuneLen(r) // 2 outside the BMP; invalid bytes become U+FFFD (1)
		if n < 0 {
			n = 1
		}
		if units+n > max && i > 0 {
			return s[:i], units
		}
		units += n
	}
	return s, units
}
