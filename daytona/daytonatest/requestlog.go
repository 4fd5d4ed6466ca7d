package daytonatest

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// maxRequestLog bounds the request log; the oldest half is dropped.
const maxRequestLog = 200000

// SimRequestsPath is where, under the API prefix (URL()+SimRequestsPath),
// the emulator serves its request log as JSON for readers in another
// process (benchmarks of cmd/daytona-sim). It is the emulator's own
// endpoint, not Daytona's: it is neither logged nor delayed by WithLatency
// (under WithNetwork its bytes pay the network like any).
const SimRequestsPath = "/__sim/requests"

// SimConnectionsHeader is the header of the SimRequestsPath reply that
// carries Connections, the TCP connections accepted so far (the reader's
// own included), so a benchmark in another process can tell the
// connections its client opened in a span from two reads.
const SimConnectionsHeader = "X-Sim-Connections"

// Request is one entry of the request log.
type Request struct {
	// Time is when the request reached the emulator, before the
	// WithLatency delay.
	Time time.Time
	// Handled is when the emulator began to handle the request, once the
	// WithLatency delay was over; zero while delayed, and for a request
	// whose client or server went away during the delay.
	Handled time.Time
	Plane   string // "api" or "toolbox"
	Method  string
	// Route is the matched route template, relative to the plane base
	// (e.g. "/sandbox/{sandboxIdOrName}/start", "/process/session/{sessionId}/exec");
	// for unknown routes it is the concrete path.
	Route string
	// Path is the concrete path relative to the plane base (toolbox paths
	// without the leading /<sandboxId>).
	Path    string
	Query   string      // raw query string
	Header  http.Header // request headers; Authorization and preview tokens redacted
	Sandbox string      // sandbox id resolved from the path ("" if none or unknown)
	// Status is the reply status: 0 while in flight and for replies that
	// never came (dropped connection, hang until the client gave up);
	// 101 for WebSocket upgrades.
	Status    int
	WebSocket bool
	// NewConn is true for the first request served on its TCP connection:
	// the client paid for a connection (and, against real Daytona, a TLS
	// handshake) to send it. Only known when the emulator listens itself
	// (Start); always false when it is mounted as a handler elsewhere.
	NewConn bool
	Fault   bool // a fault rule applied to this request
	Done    bool // the handler has returned
	// BodyBytes and ReplyBytes are the bytes of the request body the
	// emulator read and of the reply body it wrote (headers, chunk framing
	// and WebSocket frames not counted): what a benchmark counts as moved
	// on the wire, independent of what the client reports. Final once Done.
	BodyBytes  int64
	ReplyBytes int64
}

// Requests returns a copy of the request log, in arrival order.
func (s *Server) Requests() []Request {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		out[i] = *r
		out[i].Header = r.Header.Clone()
	}
	return out
}

// CountRequests counts logged requests with this method ("" = any) whose
// route matches route (a template or concrete path, as in Fault.Route;
// "" = any). Requests are counted on arrival.
func (s *Server) CountRequests(method, route string) int {
	n := 0
	for _, r := range s.Requests() {
		if method != "" && !strings.EqualFold(method, r.Method) {
			continue
		}
		if routeMatches(route, r.Route, r.Path) {
			n++
		}
	}
	return n
}

// NewConnections counts the logged requests that opened their TCP
// connection (Request.NewConn): after ResetRequests, the connections a
// client opened since. A client that keeps its connections warm opens
// none once it has made its first calls.
func (s *Server) NewConnections() int {
	n := 0
	for _, r := range s.Requests() {
		if r.NewConn {
			n++
		}
	}
	return n
}

// AwaitRequests waits until at least n requests match (as CountRequests).
func (s *Server) AwaitRequests(ctx context.Context, method, route string, n int) error {
	return s.Await(ctx, func() bool { return s.CountRequests(method, route) >= n })
}

// ResetRequests empties the request log.
func (s *Server) ResetRequests() {
	s.init()
	s.mu.Lock()
	s.requestsGone += len(s.requests)
	s.requests = nil
	s.mu.Unlock()
}

func (s *Server) logRequest(r *http.Request, plane, tmpl, path string, newConn bool) *Request {
	h := r.Header.Clone()
	for _, k := range []string{"Authorization", "X-Daytona-Preview-Token", "Cookie"} {
		if h.Get(k) != "" {
			h.Set(k, "[redacted]")
		}
	}
	rec := &Request{Time: time.Now(), Plane: plane, Method: r.Method, Route: tmpl, Path: path, Query: r.URL.RawQuery,
		Header: h, NewConn: newConn}
	s.mu.Lock()
	if len(s.requests) >= maxRequestLog {
		// Bound memory for long-running use (cmd/daytona-sim).
		drop := len(s.requests) / 2
		s.requestsGone += drop
		s.requests = append([]*Request(nil), s.requests[drop:]...)
	}
	s.requests = append(s.requests, rec)
	s.notifyLocked()
	s.mu.Unlock()
	return rec
}

// hold keeps a request for the WithLatency delay; false if the client
// or the server went away first. A closing server drops the connection:
// the request was never answered, so it gets no reply (not an empty 200).
func (s *Server) hold(w http.ResponseWriter, r *http.Request) bool {
	if s.sleep(r.Context(), s.cfg.latency) {
		return true
	}
	if r.Context().Err() == nil {
		dropConn(w)
	}
	return false
}

// setSandbox records the sandbox a request resolved to.
func (s *Server) setSandbox(rec *Request, sbID string) {
	s.mu.Lock()
	rec.Sandbox = sbID
	s.mu.Unlock()
}

func (s *Server) finishRequest(rec *Request, sw *statusWriter, body *countedBody) {
	s.mu.Lock()
	rec.Done = true
	rec.BodyBytes, rec.ReplyBytes = body.n.Load(), sw.written.Load()
	if sw.status != 0 && !(sw.hijack && sw.status != http.StatusSwitchingProtocols) {
		rec.Status = sw.status
	}
	if sw.status == http.StatusSwitchingProtocols {
		rec.WebSocket = true
	}
	s.notifyLocked()
	s.mu.Unlock()
}

// countedBody counts the bytes of a request body as the handler reads them.
type countedBody struct {
	io.ReadCloser
	n atomic.Int64
}

func (c *countedBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// WireBytes sums BodyBytes and ReplyBytes over the logged requests: the
// payload bytes that crossed the wire since the last ResetRequests.
func (s *Server) WireBytes() (body, reply int64) {
	for _, r := range s.Requests() {
		body += r.BodyBytes
		reply += r.ReplyBytes
	}
	return body, reply
}

// connKey keys the per-connection request counter that Start's
// ConnContext puts in every request's context.
type connKey struct{}

func connContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, new(atomic.Int64))
}

// firstOnConn counts r on its connection and reports whether it is the
// connection's first request.
func firstOnConn(r *http.Request) bool {
	n, ok := r.Context().Value(connKey{}).(*atomic.Int64)
	return ok && n.Add(1) == 1
}

// SimRequest is one entry of the SimRequestsPath reply, a digest of a
// Request; readers in other languages depend on exactly these names.
type SimRequest struct {
	Method    string `json:"method"`
	Route     string `json:"route"`
	Status    int    `json:"status"`
	NewConn   bool   `json:"newConn"`
	WebSocket bool   `json:"webSocket"`
	Sandbox   string `json:"sandbox"`
}

// simAdmit admits a request to an emulator-only endpoint: it takes the
// API key like the API, and one method (else 405 with wrongMethod).
func (s *Server) simAdmit(w http.ResponseWriter, r *http.Request, method, wrongMethod string) bool {
	if !bearerOK(r, s.cfg.apiKey) {
		writeAPIError(w, r, http.StatusUnauthorized, "Unauthorized")
		return false
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeAPIError(w, r, http.StatusMethodNotAllowed, wrongMethod)
		return false
	}
	return true
}

// serveSimRequests answers GET SimRequestsPath[?since=N]: the request log
// as a JSON array, without the first N entries the emulator ever logged
// (entries dropped by ResetRequests or the log's bound count too, so a
// reader that passes the number it has read so far never sees an entry
// twice), with the connection count in SimConnectionsHeader. It takes the
// API key like the API.
func (s *Server) serveSimRequests(w http.ResponseWriter, r *http.Request) {
	if !s.simAdmit(w, r, http.MethodGet, "only GET reads the request log") {
		return
	}
	since := 0
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeAPIError(w, r, http.StatusBadRequest, "since must be a non-negative integer")
			return
		}
		since = n
	}
	out := []SimRequest{}
	s.mu.Lock()
	for i, rec := range s.requests {
		if s.requestsGone+i < since {
			continue
		}
		out = append(out, SimRequest{Method: rec.Method, Route: rec.Route, Status: rec.Status,
			NewConn: rec.NewConn, WebSocket: rec.WebSocket, Sandbox: rec.Sandbox})
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(SimConnectionsHeader, strconv.FormatInt(s.Connections(), 10))
	_ = json.NewEncoder(w).Encode(out)
}
