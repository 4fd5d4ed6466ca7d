package daytonatest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Fault describes a misbehaviour injected with Server.Inject. A request
// matches when Method, Route and Sandbox all match (empty = any); the
// first matching fault that still has uses left applies. Effects combine
// in this order: Delay, Gate, (Perform: run the real handler, keep its
// side effects, discard its reply), then one of Drop, Hang, Status,
// otherwise the normal reply (with the WebSocket and scenario knobs
// applied by the handler).
type Fault struct {
	// Method is the HTTP method ("" = any).
	Method string
	// Route is a route template or a concrete path relative to the plane
	// base: API routes relative to URL() ("/sandbox/{sandboxIdOrName}/start",
	// "/sandbox"), toolbox routes relative to <toolboxProxyUrl>/<sandboxId>
	// ("/process/session/{sessionId}/exec", "/files/bulk-upload").
	// Segments in braces match any value; "" matches every route.
	Route string
	// Sandbox restricts the fault to one sandbox, by id or name ("" = any).
	// For POST /sandbox it is compared with the requested name.
	Sandbox string
	// Times is how many matching requests the fault applies to (0 = all).
	Times int
	// Skip lets the first Skip matching requests through untouched.
	Skip int

	// Delay holds the request this long before anything else happens.
	Delay time.Duration
	// Gate holds the request until the channel is closed (or the client
	// gives up): a hook the test releases.
	Gate <-chan struct{}
	// Perform runs the real handler first, so the operation takes effect
	// (sandbox allocated, delete performed, command dispatched), then
	// replaces its reply with Drop, Hang or Status: an uncertain create or
	// a lost reply.
	Perform bool
	// Drop hijacks the connection and closes it (RST) without any reply.
	// Note that Go's http.Transport transparently retries a replayable
	// request (GET, HEAD) that failed this way on a reused connection; the
	// request log then shows both attempts.
	Drop bool
	// Hang never replies: the request blocks until the client gives up
	// (its context ends) or the server closes.
	Hang bool
	// Status replies with this status; Body is the body (default: the
	// plane's standard error shape with http.StatusText as the message).
	Status int
	Body   string
	// Header is added to the reply (e.g. "Retry-After-sandbox-create").
	Header http.Header

	// BodyCut aborts an HTTP reply after BodyCutAfterBytes body bytes: the
	// connection is closed mid-body (a chunked reply loses its terminating
	// chunk, a sized one comes up short), as a broken download would.
	BodyCut           bool
	BodyCutAfterBytes int64

	// WSClose closes a WebSocket (log follow, PTY) abruptly, without a
	// close frame, after WSCloseAfterBytes payload bytes were sent.
	WSClose           bool
	WSCloseAfterBytes int
	// WSSilent accepts the WebSocket upgrade and then sends nothing, ever,
	// until the client closes it.
	WSSilent bool
	// WSStall makes a log follow send WSStallAfterBytes payload bytes and
	// then nothing more, while keeping the connection open, until the
	// client closes it: a follow that falls behind the log for good.
	WSStall           bool
	WSStallAfterBytes int
	// WSDropFinal makes a log follow close normally (1000) without sending
	// its last data frame, as the daemon's race does (docs/daytona.md#follow-logs).
	WSDropFinal bool

	// RefuseStartWhileStopping: a matching start of a started sandbox
	// begins a server-side stop (as auto-stop would) and is refused with
	// 409 "Sandbox state change in progress" (or Status/Body if set); the
	// sandbox then settles in "stopped".
	RefuseStartWhileStopping bool
	// Unsettled makes a setter (autostop/autoarchive/autodelete, labels,
	// public, network-settings) answer success with the new value without
	// storing it: a later GET still shows the old value.
	Unsettled bool
	// ListIgnoresLabels makes a matching listing answer as if its labels
	// filter were absent, so it returns sandboxes whose labels differ from
	// the ones asked for: a real list can (an eventually consistent index,
	// a filter the server does not support), which is why every caller
	// that acts on a listing re-checks each sandbox's labels itself.
	ListIgnoresLabels bool
}

// FaultHandle is an injected fault.
type FaultHandle struct {
	s    *Server
	f    Fault
	seen int // matching requests seen
	hits int // times applied
	gone bool
}

// Inject adds a fault rule and returns its handle.
func (s *Server) Inject(f Fault) *FaultHandle {
	s.init()
	h := &FaultHandle{s: s, f: f}
	s.mu.Lock()
	s.faults = append(s.faults, h)
	s.mu.Unlock()
	return h
}

// Remove disables the fault.
func (h *FaultHandle) Remove() {
	h.s.mu.Lock()
	h.gone = true
	h.s.mu.Unlock()
}

// Hits is how many requests the fault was applied to. Server.Await wakes
// when it changes, so a test can wait until a fault applies (a hang has
// begun) instead of guessing how long that takes.
func (h *FaultHandle) Hits() int {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.hits
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.init()
	s.mu.Lock()
	for _, h := range s.faults {
		h.gone = true
	}
	s.faults = nil
	s.mu.Unlock()
}

// routeMatches reports whether pattern (template or concrete path) matches
// a request whose template is tmpl and concrete path is path.
func routeMatches(pattern, tmpl, path string) bool {
	if pattern == "" || pattern == tmpl {
		return true
	}
	ps := strings.Split(strings.Trim(pattern, "/"), "/")
	for _, cand := range []string{path, tmpl} {
		cs := strings.Split(strings.Trim(cand, "/"), "/")
		if len(cs) != len(ps) {
			continue
		}
		ok := true
		for i := range ps {
			if isParam(ps[i]) || ps[i] == cs[i] {
				continue
			}
			ok = false
			break
		}
		if ok {
			return true
		}
	}
	return false
}

func isParam(seg string) bool {
	return len(seg) >= 2 && seg[0] == '{' && seg[len(seg)-1] == '}'
}

// matchFault finds and consumes the fault for a request.
func (s *Server) matchFault(method, tmpl, path, sbID, sbName string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.faults {
		f := &h.f
		if h.gone {
			continue
		}
		if f.Method != "" && !strings.EqualFold(f.Method, method) {
			continue
		}
		if !routeMatches(f.Route, tmpl, path) {
			continue
		}
		if f.Sandbox != "" && f.Sandbox != sbID && f.Sandbox != sbName {
			continue
		}
		h.seen++
		if h.seen <= f.Skip {
			continue
		}
		if f.Times > 0 && h.hits >= f.Times {
			continue
		}
		h.hits++
		s.notifyLocked() // wakes Await(… h.Hits() …)
		cp := *f
		return &cp
	}
	return nil
}

// hang blocks until the request's client goes away or the server closes.
func (s *Server) hang(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-s.done:
	}
}

// dropConn closes the client connection without a reply.
func dropConn(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			if tc, ok := c.(*tls.Conn); ok {
				c = tc.NetConn()
			}
			// *net.TCPConn, or a connection shaped by WithNetwork.
			if lc, ok := c.(interface{ SetLinger(int) error }); ok {
				_ = lc.SetLinger(0) // RST: the client sees a reset, not a clean EOF
			}
			_ = c.Close()
			return
		}
	}
	// Cannot hijack (HTTP/2): abort the handler, which resets the stream.
	panic(http.ErrAbortHandler)
}

// writeFaultStatus writes the fault's status reply.
func writeFaultStatus(w http.ResponseWriter, r *http.Request, plane string, f *Fault) {
	for k, vs := range f.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if f.Body != "" {
		ct := "text/plain; charset=utf-8"
		if json.Valid([]byte(f.Body)) {
			ct = "application/json; charset=utf-8"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(f.Status)
		_, _ = w.Write([]byte(f.Body))
		return
	}
	msg := http.StatusText(f.Status)
	if plane == planeAPI {
		if f.Status == http.StatusTooManyRequests {
			msg = "ThrottlerException: Too Many Requests"
		}
		writeAPIError(w, r, f.Status, msg)
		return
	}
	writeToolboxError(w, r, f.Status, strings.ToLower(msg))
}

// bufferWriter captures a handler's reply when Perform discards it.
type bufferWriter struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferWriter) Header() http.Header {
	if b.h == nil {
		b.h = http.Header{}
	}
	return b.h
}
func (b *bufferWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = 200
	}
	return b.body.Write(p)
}
func (b *bufferWriter) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}
func (b *bufferWriter) Flush() {}

// statusWriter records the status of a reply and keeps Hijack/Flush.
type statusWriter struct {
	http.ResponseWriter
	status  int
	hijack  bool
	written atomic.Int64 // reply body bytes (Request.ReplyBytes)
}

func (sw *statusWriter) WriteHeader(code int) {
	if sw.status == 0 {
		sw.status = code
	}
	sw.ResponseWriter.WriteHeader(code)
}

func (sw *statusWriter) Write(p []byte) (int, error) {
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	n, err := sw.ResponseWriter.Write(p)
	sw.written.Add(int64(n))
	return n, err
}

func (sw *statusWriter) Flush() {
	if f, ok := sw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (sw *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := sw.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	c, rw, err := hj.Hijack()
	if err == nil {
		sw.hijack = true
	}
	return c, rw, err
}

func (sw *statusWriter) Unwrap() http.ResponseWriter { return sw.ResponseWriter }

// cutWriter aborts the reply once its byte budget is spent.
type cutWriter struct {
	*statusWriter
	left int64
}

func (cw *cutWriter) Write(p []byte) (int, error) {
	if int64(len(p)) <= cw.left {
		n, err := cw.statusWriter.Write(p)
		cw.left -= int64(n)
		return n, err
	}
	if cw.left > 0 {
		_, _ = cw.statusWriter.Write(p[:cw.left])
	}
	cw.statusWriter.Flush()
	// net/http closes the connection without finishing the body.
	panic(http.ErrAbortHandler)
}
