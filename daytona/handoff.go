package daytona

import (
	"context"
	"errors"
	"io"
	"net/http/httptrace"
	"sync"
	"time"
)

// headerStallGrace bounds how long a cancellation that arrives while an
// answer's header is being read is held back (see cancelGate). Reading a
// header is a matter of microseconds once its first byte is in; only a
// server that stalls half-way through a header (or sends 1xx answers
// first) makes a caller wait this long after cancelling. Only a transport
// goroutine stalled this long between pooling a connection and reporting
// it could let a cause forwarded after the grace reach the next request;
// that request then fails with errConnAbandoned.
const headerStallGrace = 5 * time.Second

// cancelGate carries the caller's cancellation of one request to the HTTP
// transport, except in the one window where Go's HTTP/1 transport would
// turn it against another request (docs/daytona.md#connections).
//
// The transport puts a connection whose answer has no body (Content-Length
// 0: a session create, an empty log snapshot) back in the pool before it
// hands that answer to its request. A request waiting for a connection may
// take it at once and write on it. If the first request's context is
// cancelled in between, the transport closes the connection and records
// that cause on it; the second request then fails with the first one's
// cause although its own context is alive. Retrying that request is not
// safe: it had a connection and may already have written itself, and an
// exec dispatch or a create must reach the server at most once. The
// failure is therefore prevented rather than repaired: the transport
// sees the request under a context of its own (the caller's values, not
// its cancellation), and the gate forwards the caller's cancellation:
//   - at once until the first byte of the answer arrives, and again once
//     the transport has handed the answer over, so a hanging call or a body
//     read is cut as before;
//   - not at all once the connection went back to the pool: the answer is
//     complete and the connection belongs to the next request;
//   - in between (the header being read), only when the answer is handed
//     over, or after headerStallGrace if the header stalls.
//
// Every forwarded cause is wrapped in abandonedError, so a request that
// still fails with one while its own context is alive (a stalled header
// forwarded after the grace) reports a closed connection, never another
// request's cause.
type cancelGate struct {
	ctx    context.Context // what the transport sees
	cancel context.CancelCauseFunc
	stop   func() bool // stops watching the caller's context
	grace  time.Duration

	mu      sync.Mutex
	state   gateState
	pending error // a cause held back while the header is read
	timer   *time.Timer
}

type gateState int

const (
	gateOpen     gateState = iota // cancellations go through
	gateHeader                    // the answer's header is being read: hold back
	gateReturned                  // the connection is back in the pool: drop
)

func newCancelGate(parent context.Context, grace time.Duration) *cancelGate {
	g := &cancelGate{grace: grace}
	g.ctx, g.cancel = context.WithCancelCause(context.WithoutCancel(parent))
	g.stop = context.AfterFunc(parent, func() { g.forward(context.Cause(parent)) })
	return g
}

// forward hands the caller's cause to the transport, or holds it back.
func (g *cancelGate) forward(cause error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.state {
	case gateOpen:
		g.cancel(&abandonedError{cause: cause})
	case gateHeader:
		g.pending = cause
		g.timer = time.AfterFunc(g.grace, g.stalled)
	}
}

// stalled forwards a held-back cause once the grace is over.
func (g *cancelGate) stalled() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == gateHeader && g.pending != nil {
		g.cancel(&abandonedError{cause: g.pending})
		g.pending = nil
	}
}

// trace adds the gate's hooks to t.
func (g *cancelGate) trace(t *httptrace.ClientTrace) *httptrace.ClientTrace {
	t.GotFirstResponseByte = func() { g.set(gateOpen, gateHeader) }
	t.PutIdleConn = func(err error) {
		if err == nil {
			g.mu.Lock()
			g.state = gateReturned
			g.pending = nil
			g.mu.Unlock()
		}
	}
	return t
}

// set moves the gate from one state to another.
func (g *cancelGate) set(from, to gateState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == from {
		g.state = to
	}
}

// answered: the transport returned (an answer or an error). A cause held
// back meanwhile goes through now; later ones go through at once (the
// body is read on a connection that is still the request's own).
func (g *cancelGate) answered() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != gateHeader {
		return
	}
	g.state = gateOpen
	if g.pending != nil {
		g.cancel(&abandonedError{cause: g.pending})
		g.pending = nil
	}
}

// release ends the request: the caller's context is no longer watched.
// Called once the transport returned an error or the answer's body is
// closed, when no connection is waiting on the transport's context any
// more, so cancelling it disturbs nothing.
func (g *cancelGate) release() {
	g.stop()
	g.mu.Lock()
	if g.timer != nil {
		g.timer.Stop()
	}
	g.state = gateReturned
	g.mu.Unlock()
	g.cancel(errRequestOver)
}

// gatedBody releases the gate when the answer's body is closed.
type gatedBody struct {
	io.ReadCloser
	once sync.Once
	gate *cancelGate
}

func (b *gatedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.gate.release)
	return err
}

// errConnAbandoned is the cause of a request whose connection another
// request's cancellation closed while its own context is alive.
var errConnAbandoned = errors.New("connection closed by another request's cancellation; the request may have reached the server")

// errRequestOver ends the transport's context of a finished request.
var errRequestOver = errors.New("daytona: request over")

// abandonedError is a caller's cancellation as the transport sees it. It
// reads as its cause, so the request it belongs to reports its own
// cancellation; another request that fails with it learns that its
// connection was closed under it by someone else.
type abandonedError struct{ cause error }

func (e *abandonedError) Error() string { return e.cause.Error() }
func (e *abandonedError) Unwrap() error { return e.cause }
