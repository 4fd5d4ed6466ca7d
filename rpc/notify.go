package rpc

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf16"

	"github.com/sourcegraph/jsonrpc2"
)

// Host limits on execute.log (docs/host.md#execute).
const (
	// MaxLogChunkChars is the largest execute.log chunk, in JavaScript
	// characters (UTF-16 code units).
	MaxLogChunkChars = 1_000_000
	// MaxLogTotalChars is what the host accepts per execute call.
	MaxLogTotalChars = 128 << 20
	// DefaultCallTimeout bounds a worker→host request without a deadline.
	DefaultCallTimeout = 30 * time.Second
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

// InvocationID returns the paperclipInvocation.id of the request ctx serves,
// or "".
func InvocationID(ctx context.Context) string {
	if r, ok := ctx.Value(requestKey{}).(*request); ok {
		return r.invocationID
	}
	return ""
}

// Notify sends a worker→host notification. While the request ctx serves is
// still unanswered, it carries that request's paperclipInvocationId.
func Notify(ctx context.Context, method string, params any) error {
	s, r, err := fromContext(ctx)
	if err != nil {
		return err
	}
	conn := s.conn.Load()
	if r == nil {
		return conn.Notify(ctx, method, params)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return conn.Notify(ctx, method, params, r.invocationOpt()...)
}

// Call sends a worker→host request and decodes its result into result (which
// may be nil). Without a deadline on ctx it gives up after
// DefaultCallTimeout. The invocation id is echoed as for [Notify].
func Call(ctx context.Context, method string, params, result any) error {
	s, r, err := fromContext(ctx)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultCallTimeout)
		defer cancel()
	}
	var opts []jsonrpc2.CallOption
	if r != nil {
		r.mu.Lock()
		opts = r.invocationOpt()
		r.mu.Unlock()
	}
	err = s.conn.Load().Call(ctx, method, params, result, opts...)
	var je *jsonrpc2.Error
	if errors.As(err, &je) {
		return &Error{Code: je.Code, Message: je.Message}
	}
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("rpc: host did not answer %s: %w", method, ctx.Err())
	}
	return err
}

// invocationOpt must be called with r.mu held.
func (r *request) invocationOpt() []jsonrpc2.CallOption {
	if r.answered || r.invocationID == "" {
		return nil
	}
	return []jsonrpc2.CallOption{jsonrpc2.ExtraField("paperclipInvocationId", r.invocationID)}
}

func fromContext(ctx context.Context) (*server, *request, error) {
	s, _ := ctx.Value(serverKey{}).(*server)
	if s == nil || s.conn.Load() == nil {
		return nil, nil, ErrNotServing
	}
	r, _ := ctx.Value(requestKey{}).(*request)
	return s, r, nil
}

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
	s, r, err := fromContext(ctx)
	if err != nil {
		return err
	}
	if r == nil || r.invocationID == "" {
		return errors.New("rpc: execute.log needs the paperclipInvocation of an execute request")
	}
	conn := s.conn.Load()
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
		err := conn.Notify(ctx, "execute.log", logParams{Stream: string(stream), Chunk: chunk}, r.invocationOpt()...)
		if err != nil {
			return err
		}
		r.logChars += int64(units)
		text = text[len(chunk):]
	}
	return nil
}

type logParams struct {
	Stream string `json:"stream"`
	Chunk  string `json:"chunk"`
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
