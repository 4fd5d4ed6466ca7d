package daytonatest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Network is the network between the emulator and its clients, charged on
// the real connections (WithNetwork): every byte a connection carries
// arrives half a round trip after it was sent, in each direction, so a
// request on a warm connection costs one round trip, a new connection one
// more (its TCP handshake, charged before its first byte is delivered), a
// TLS handshake one more again (WithTLS: TLS 1.3 is one round trip of its
// own bytes), and a WebSocket upgrade whatever the connection it is sent
// on costs. The zero value is loopback: no delay, no limit.
type Network struct {
	// RTT is the round trip time between client and emulator.
	RTT time.Duration
	// Bandwidth limits each direction of each connection to this many
	// bytes per second (0 means unlimited): bytes leave one after the
	// other at that rate, so N bytes take at least N/Bandwidth seconds
	// more than their round trips.
	Bandwidth int64
}

// WithNetwork charges every connection to the emulator what n costs (see
// Network). Unlike WithLatency, which holds each request once in the
// handler, it delays the bytes themselves: handshakes, request bodies,
// replies and WebSocket frames all pay, each in its own direction. Both
// may be given; they add up.
func WithNetwork(n Network) Option {
	return func(c *config) {
		c.network = Network{RTT: max(n.RTT, 0), Bandwidth: max(n.Bandwidth, 0)}
	}
}

// Connections is how many TCP connections the emulator has accepted since
// it started listening, every client's (test-side requests included): a
// client that keeps its connections warm adds none once it has made its
// first calls. Zero when the emulator is mounted as a handler elsewhere.
func (s *Server) Connections() int64 { return s.conns.Load() }

// Sizes of the lanes that carry a shaped connection's bytes. A segment is
// what one read of the source gave, so the delays keep the sender's own
// chunking. A lane holds at most laneSegments segments (16 MiB): enough
// that the in-flight limit never decides a benchmark's 8 MiB at 100 ms
// (it is not a model of TCP's window, only a bound on memory); a sender
// that gets further ahead waits, as on a full socket buffer.
const (
	segmentSize  = 32 << 10
	laneSegments = 512
)

// netListener counts the connections it accepts and shapes them by nw.
type netListener struct {
	net.Listener
	nw    Network
	count *atomic.Int64
	// done is closed by Close: shaped connections then stop delivering
	// what they still hold and close at once, as a stopping server cuts
	// its clients instead of waiting out their delays.
	done      chan struct{}
	closeOnce sync.Once
}

func newNetListener(ln net.Listener, nw Network, count *atomic.Int64) *netListener {
	return &netListener{Listener: ln, nw: nw, count: count, done: make(chan struct{})}
}

func (l *netListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.count.Add(1)
	if l.nw == (Network{}) {
		return c, nil
	}
	return shape(c, l.nw, l.done), nil
}

func (l *netListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// shapedConn is the server's end of a shaped connection: one end of a
// net.Pipe (so deadlines, which the HTTP server relies on, work as on a
// socket), whose other end four goroutines connect to the client's socket
// through two delaying lanes.
type shapedConn struct {
	net.Conn
	raw   net.Conn
	reset atomic.Bool
}

func (c *shapedConn) LocalAddr() net.Addr  { return c.raw.LocalAddr() }
func (c *shapedConn) RemoteAddr() net.Addr { return c.raw.RemoteAddr() }

// SetLinger(0) makes the close a reset, as on a TCP socket (dropConn):
// it comes after the bytes already in flight, as the close itself would.
func (c *shapedConn) SetLinger(sec int) error {
	c.reset.Store(sec == 0)
	return nil
}

func shape(raw net.Conn, nw Network, done <-chan struct{}) net.Conn {
	srv, inner := net.Pipe()
	c := &shapedConn{Conn: srv, raw: raw}
	// The client could not have sent anything before its connect returned,
	// one round trip after it began: bytes that came sooner on loopback
	// count as sent then.
	in := &lane{nw: nw, from: time.Now().Add(nw.RTT), q: make(chan segment, laneSegments)}
	out := &lane{nw: nw, q: make(chan segment, laneSegments)}
	// The client's end of stream reaches the server as its pipe closing.
	// A server that stops reading leaves the socket to the other lane,
	// which closes it once the server's own bytes are out.
	go in.pump(raw)
	go in.deliver(inner, done, func() { _ = inner.Close() }, func() {})
	go out.pump(inner)
	go out.deliver(raw, done, func() {
		if tc, ok := raw.(*net.TCPConn); ok && c.reset.Load() {
			_ = tc.SetLinger(0)
		}
		_ = raw.Close()
	}, func() { _ = inner.Close() })
	return c
}

// segment is bytes due at the far end at due; err, after them, ends the
// stream.
type segment struct {
	b   []byte
	due time.Time
	err error
}

// lane is one direction of a shaped connection.
type lane struct {
	nw   Network
	from time.Time // nothing counts as sent before this
	// free is when the link has sent everything before (Bandwidth).
	free time.Time
	q    chan segment
}

// stamp is when n bytes sent now arrive.
func (l *lane) stamp(n int) time.Time {
	t := time.Now()
	if t.Before(l.from) {
		t = l.from
	}
	if l.nw.Bandwidth > 0 {
		if t.Before(l.free) {
			t = l.free
		}
		t = t.Add(time.Duration(float64(n) / float64(l.nw.Bandwidth) * float64(time.Second)))
		l.free = t
	}
	return t.Add(l.nw.RTT / 2)
}

// pump reads src into the lane until src fails.
func (l *lane) pump(src io.Reader) {
	buf := make([]byte, segmentSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			l.q <- segment{b: append([]byte(nil), buf[:n]...), due: l.stamp(n)}
		}
		if err != nil {
			l.q <- segment{err: err, due: l.stamp(0)}
			close(l.q)
			return
		}
	}
}

// deliver writes each segment to dst when it is due, then calls end at
// the end of the stream. When dst fails or the listener closes it calls
// end and fail (which ends the source) and drains the lane, so that its
// pump never blocks.
func (l *lane) deliver(dst io.Writer, done <-chan struct{}, end, fail func()) {
	var t *time.Timer
	for seg := range l.q {
		if d := time.Until(seg.due); d > 0 {
			if t == nil {
				t = time.NewTimer(d)
			} else {
				t.Reset(d)
			}
			select {
			case <-t.C:
			case <-done:
				end()
				fail()
				drainLane(l.q)
				return
			}
		}
		if seg.err != nil {
			end()
			drainLane(l.q)
			return
		}
		if _, err := dst.Write(seg.b); err != nil {
			end()
			fail()
			drainLane(l.q)
			return
		}
	}
}

func drainLane(q <-chan segment) {
	for range q {
	}
}
