package daytonatest

import (
	"context"
	"net/http"
	"strings"
	"time"
)

const (
	planeAPI     = "api"
	planeToolbox = "toolbox"
)

// maxRequestLog bounds the request log; the oldest half is dropped.
const maxRequestLog = 200000

// Request is one entry of the request log.
type Request struct {
	Time   time.Time
	Plane  string // "api" or "toolbox"
	Method string
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
	Fault     bool // a fault rule applied to this request
	Done      bool // the handler has returned
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

// AwaitRequests waits until at least n requests match (as CountRequests).
func (s *Server) AwaitRequests(ctx context.Context, method, route string, n int) error {
	return s.Await(ctx, func() bool { return s.CountRequests(method, route) >= n })
}

// ResetRequests empties the request log.
func (s *Server) ResetRequests() {
	s.init()
	s.mu.Lock()
	s.requests = nil
	s.mu.Unlock()
}

type handlerFunc func(*call)

type route struct {
	method string
	tmpl   string
	segs   []string
	h      handlerFunc
}

func mkRoutes(defs []route) []route {
	for i := range defs {
		defs[i].segs = strings.Split(strings.Trim(defs[i].tmpl, "/"), "/")
	}
	return defs
}

func matchRoute(routes []route, method, path string) (*route, map[string]string, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	pathFound := false
	for i := range routes {
		rt := &routes[i]
		if len(rt.segs) != len(segs) {
			continue
		}
		params := map[string]string{}
		ok := true
		for j, sg := range rt.segs {
			if isParam(sg) {
				if segs[j] == "" {
					ok = false
					break
				}
				params[sg[1:len(sg)-1]] = segs[j]
				continue
			}
			if sg != segs[j] {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		pathFound = true
		if rt.method == method {
			return rt, params, true
		}
	}
	return nil, nil, pathFound
}

// call is one request being served.
type call struct {
	s      *Server
	w      http.ResponseWriter
	r      *http.Request
	plane  string
	params map[string]string
	sb     *sandbox // resolved sandbox, nil if unknown
	fault  *Fault
	rec    *Request
}

func (c *call) ctx() context.Context { return c.r.Context() }

func (c *call) param(k string) string { return c.params[k] }

func (s *Server) logRequest(r *http.Request, plane, tmpl, path, sbID string) *Request {
	h := r.Header.Clone()
	for _, k := range []string{"Authorization", "X-Daytona-Preview-Token", "Cookie"} {
		if h.Get(k) != "" {
			h.Set(k, "[redacted]")
		}
	}
	rec := &Request{Time: time.Now(), Plane: plane, Method: r.Method, Route: tmpl, Path: path, Query: r.URL.RawQuery,
		Header: h, Sandbox: sbID}
	s.mu.Lock()
	if len(s.requests) >= maxRequestLog {
		// Bound memory for long-running use (cmd/daytona-sim).
		s.requests = append([]*Request(nil), s.requests[len(s.requests)/2:]...)
	}
	s.requests = append(s.requests, rec)
	s.notifyLocked()
	s.mu.Unlock()
	return rec
}

func (s *Server) finishRequest(rec *Request, sw *statusWriter) {
	s.mu.Lock()
	rec.Done = true
	if sw.status != 0 && !(sw.hijack && sw.status != http.StatusSwitchingProtocols) {
		rec.Status = sw.status
	}
	if sw.status == http.StatusSwitchingProtocols {
		rec.WebSocket = true
	}
	s.notifyLocked()
	s.mu.Unlock()
}

// serve runs a matched request through auth, faults and the handler.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, plane string, rt *route, params map[string]string, path string, sb *sandbox, sbName string) {
	sbID := ""
	if sb != nil {
		sbID = sb.id
	}
	rec := s.logRequest(r, plane, rt.tmpl, path, sbID)
	sw := &statusWriter{ResponseWriter: w}
	defer s.finishRequest(rec, sw)
	c := &call{s: s, w: sw, r: r, plane: plane, params: params, sb: sb, rec: rec}

	f := s.matchFault(r.Method, rt.tmpl, path, sbID, sbName)
	if f != nil {
		s.mu.Lock()
		rec.Fault = true
		s.mu.Unlock()
		if !s.sleep(r.Context(), f.Delay) {
			return
		}
		if f.Gate != nil {
			select {
			case <-f.Gate:
			case <-r.Context().Done():
				return
			case <-s.done:
				return
			}
		}
		c.fault = f
		if f.BodyCut {
			c.w = &cutWriter{statusWriter: sw, left: f.BodyCutAfterBytes}
		}
		if f.Perform {
			bw := &bufferWriter{}
			c.w = bw
			rt.h(c)
			c.w = sw
		}
		switch {
		case f.Drop:
			dropConn(sw)
			return
		case f.Hang:
			s.hang(r.Context())
			return
		case f.Status != 0 && !f.RefuseStartWhileStopping:
			writeFaultStatus(sw, r, plane, f)
			return
		case f.Perform:
			// Perform without a replacement: nothing else to do, the
			// captured reply is lost (the client sees an empty 200).
			sw.WriteHeader(http.StatusOK)
			return
		}
	}
	rt.h(c)
}
