package daytonatest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	plane  string // planeAPI or planeToolbox
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

// matchRoute finds the route of plane that serves method and path, with
// the values of the path's {parameters}.
func matchRoute(plane, method, path string) (*route, map[string]string) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i := range routes {
		rt := &routes[i]
		if rt.plane != plane || rt.method != method || len(rt.segs) != len(segs) {
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
		if ok {
			return rt, params
		}
	}
	return nil, nil
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

// routes is every operation the emulator serves: the control plane under
// /api, then the toolbox under <toolboxProxyUrl>/<sandboxId>.
var routes = mkRoutes([]route{
	{plane: planeAPI, method: "GET", tmpl: "/sandbox", h: apiList},
	{plane: planeAPI, method: "POST", tmpl: "/sandbox", h: apiCreate},
	{plane: planeAPI, method: "GET", tmpl: "/sandbox/paginated", h: apiListPaginated},
	{plane: planeAPI, method: "GET", tmpl: "/sandbox/{sandboxIdOrName}", h: apiGet},
	{plane: planeAPI, method: "DELETE", tmpl: "/sandbox/{sandboxIdOrName}", h: apiDelete},
	{plane: planeAPI, method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/start", h: apiStart},
	{plane: planeAPI, method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/stop", h: apiStop},
	{plane: planeAPI, method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/recover", h: apiRecover},
	{plane: planeAPI, method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/archive", h: apiArchive},
	{plane: planeAPI, method: "PUT", tmpl: "/sandbox/{sandboxIdOrName}/labels", h: apiLabels},
	{plane: planeAPI, method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/autostop/{interval}", h: apiInterval("autostop")},
	{plane: planeAPI, method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/autoarchive/{interval}", h: apiInterval("autoarchive")},
	{plane: planeAPI, method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/autodelete/{interval}", h: apiInterval("autodelete")},
	// Not in the v0.190.0 documents: the proposed wall-clock lifetime of
	// docs/behavior.md#ttl (see proposedRoutes).
	{plane: planeAPI, method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/ttl/{interval}", h: apiInterval("ttl")},
	{plane: planeAPI, method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/public/{isPublic}", h: apiPublic},
	{plane: planeAPI, method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/network-settings", h: apiNetwork},
	{plane: planeAPI, method: "POST", tmpl: "/sandbox/{sandboxId}/last-activity", h: apiLastActivity},
	{plane: planeAPI, method: "GET", tmpl: "/sandbox/{sandboxId}/toolbox-proxy-url", h: apiToolboxURL},
	{plane: planeAPI, method: "GET", tmpl: "/sandbox/{sandboxIdOrName}/ports/{port}/preview-url", h: apiPreviewURL},
	{plane: planeToolbox, method: "GET", tmpl: "/version", h: tbVersion},
	{plane: planeToolbox, method: "GET", tmpl: "/work-dir", h: tbWorkDir},
	{plane: planeToolbox, method: "GET", tmpl: "/user-home-dir", h: tbWorkDir},
	{plane: planeToolbox, method: "POST", tmpl: "/process/execute", h: tbExecute},
	{plane: planeToolbox, method: "GET", tmpl: "/process/session", h: tbListSessions},
	{plane: planeToolbox, method: "POST", tmpl: "/process/session", h: tbCreateSession},
	{plane: planeToolbox, method: "GET", tmpl: "/process/session/entrypoint/logs", h: tbEntrypointLogs},
	{plane: planeToolbox, method: "GET", tmpl: "/process/session/{sessionId}", h: tbGetSession},
	{plane: planeToolbox, method: "DELETE", tmpl: "/process/session/{sessionId}", h: tbDeleteSession},
	{plane: planeToolbox, method: "POST", tmpl: "/process/session/{sessionId}/exec", h: tbSessionExec},
	{plane: planeToolbox, method: "GET", tmpl: "/process/session/{sessionId}/command/{commandId}", h: tbCommand},
	{plane: planeToolbox, method: "GET", tmpl: "/process/session/{sessionId}/command/{commandId}/logs", h: tbCommandLogs},
	{plane: planeToolbox, method: "POST", tmpl: "/process/session/{sessionId}/command/{commandId}/input", h: tbCommandInput},
	{plane: planeToolbox, method: "GET", tmpl: "/process/pty", h: tbListPty},
	{plane: planeToolbox, method: "POST", tmpl: "/process/pty", h: tbCreatePty},
	{plane: planeToolbox, method: "GET", tmpl: "/process/pty/{sessionId}", h: tbGetPty},
	{plane: planeToolbox, method: "DELETE", tmpl: "/process/pty/{sessionId}", h: tbDeletePty},
	{plane: planeToolbox, method: "GET", tmpl: "/process/pty/{sessionId}/connect", h: tbConnectPty},
	{plane: planeToolbox, method: "POST", tmpl: "/process/pty/{sessionId}/resize", h: tbResizePty},
	{plane: planeToolbox, method: "GET", tmpl: "/files", h: tbListFiles},
	{plane: planeToolbox, method: "DELETE", tmpl: "/files", h: tbDeleteFile},
	{plane: planeToolbox, method: "GET", tmpl: "/files/info", h: tbFileInfo},
	{plane: planeToolbox, method: "POST", tmpl: "/files/folder", h: tbCreateFolder},
	{plane: planeToolbox, method: "POST", tmpl: "/files/move", h: tbMoveFile},
	{plane: planeToolbox, method: "POST", tmpl: "/files/permissions", h: tbPermissions},
	{plane: planeToolbox, method: "GET", tmpl: "/files/download", h: tbDownload},
	{plane: planeToolbox, method: "POST", tmpl: "/files/bulk-download", h: tbBulkDownload},
	{plane: planeToolbox, method: "POST", tmpl: "/files/upload", h: tbUpload},
	{plane: planeToolbox, method: "POST", tmpl: "/files/bulk-upload", h: tbBulkUpload},
})

// serveAPI dispatches a control-plane request; rel is the path after /api.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, rel string) {
	rt, params := matchRoute(planeAPI, r.Method, rel)
	if rt == nil {
		rec := s.logRequest(r, planeAPI, rel, rel, "")
		sw := &statusWriter{ResponseWriter: w}
		writeAPIError(sw, r, http.StatusNotFound, fmt.Sprintf("Cannot %s %s", r.Method, r.URL.Path))
		s.finishRequest(rec, sw)
		return
	}
	var sb *sandbox
	name := ""
	key := params["sandboxIdOrName"]
	if key == "" {
		key = params["sandboxId"]
	}
	if key != "" {
		s.mu.Lock()
		sb = s.lookupLocked(key)
		if sb != nil {
			name = sb.name
		} else if old, ok := s.sandboxes[key]; ok {
			name = old.name
		}
		s.mu.Unlock()
	}
	if rt.tmpl == "/sandbox" && r.Method == "POST" {
		// Peek at the requested name so Fault.Sandbox can target a create.
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		var peek struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(body, &peek)
		name = peek.Name
	}
	if !bearerOK(r, s.cfg.apiKey) {
		rec := s.logRequest(r, planeAPI, rt.tmpl, rel, "")
		sw := &statusWriter{ResponseWriter: w}
		writeAPIError(sw, r, http.StatusUnauthorized, "Unauthorized")
		s.finishRequest(rec, sw)
		return
	}
	s.serve(w, r, planeAPI, rt, params, rel, sb, name)
}

// serveToolbox dispatches <toolboxProxyUrl>/<sandboxId>/<path>.
func (s *Server) serveToolbox(w http.ResponseWriter, r *http.Request, rel string) {
	rel = strings.TrimPrefix(rel, "/")
	id, rest, _ := strings.Cut(rel, "/")
	rest = "/" + rest
	rt, params := matchRoute(planeToolbox, r.Method, rest)
	s.mu.Lock()
	sb := s.sandboxes[id]
	if sb != nil && !sb.visibleLocked() {
		sb = nil
	}
	name, token := "", ""
	if sb != nil {
		name, token = sb.name, sb.previewToken
	}
	s.mu.Unlock()
	sbID := ""
	if sb != nil {
		sbID = sb.id
	}
	if rt == nil || rest == "/" {
		rec := s.logRequest(r, planeToolbox, rest, rest, sbID)
		sw := &statusWriter{ResponseWriter: w}
		writeToolboxError(sw, r, http.StatusNotFound, "not found")
		s.finishRequest(rec, sw)
		return
	}
	if !bearerOK(r, s.cfg.apiKey) && (token == "" || r.Header.Get("X-Daytona-Preview-Token") != token) {
		rec := s.logRequest(r, planeToolbox, rt.tmpl, rest, sbID)
		sw := &statusWriter{ResponseWriter: w}
		writeToolboxError(sw, r, http.StatusUnauthorized, "invalid or missing authentication")
		s.finishRequest(rec, sw)
		return
	}
	wrapped := *rt
	wrapped.h = func(c *call) {
		if c.toolboxReady() {
			rt.h(c)
		}
	}
	s.serve(w, r, planeToolbox, &wrapped, params, rest, sb, name)
}
