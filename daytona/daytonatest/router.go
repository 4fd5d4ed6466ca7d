package daytonatest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

const (
	planeAPI     = "api"
	planeToolbox = "toolbox"
)

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

// serve runs a matched request through faults and the handler; auth and
// the latency are behind it, rec is its log entry and sw its writer.
func (s *Server) serve(sw *statusWriter, r *http.Request, rec *Request, rt *route, params map[string]string, path string, sb *sandbox, sbName string) {
	sbID := ""
	if sb != nil {
		sbID = sb.id
	}
	s.setSandbox(rec, sbID)
	c := &call{s: s, w: sw, r: r, plane: rec.Plane, params: params, sb: sb, rec: rec}

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
			writeFaultStatus(sw, r, rec.Plane, f)
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
	{plane: planeAPI, method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/ssh-access", h: apiCreateSSHAccess},
	{plane: planeAPI, method: "DELETE", tmpl: "/sandbox/{sandboxIdOrName}/ssh-access", h: apiRevokeSSHAccess},
	{plane: planeAPI, method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/snapshot", h: apiCreateSandboxSnapshot},
	{plane: planeAPI, method: "GET", tmpl: "/snapshots/{id}", h: apiGetSnapshot},
	{plane: planeAPI, method: "DELETE", tmpl: "/snapshots/{id}", h: apiDeleteSnapshot},
	{plane: planeAPI, method: "GET", tmpl: "/sandbox/{sandboxIdOrName}/ports/{port}/preview-url", h: apiPreviewURL},
	{plane: planeAPI, method: "GET", tmpl: "/organizations", h: apiOrganizations},
	{plane: planeAPI, method: "GET", tmpl: "/organizations/{organizationId}/usage", h: apiOrganizationUsage},
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

// route is the first, state-free step of serving a request: it finds the
// plane and route of r, so the request is logged on arrival, before the
// latency; ok is false outside both planes.
func routeOf(r *http.Request) (plane string, rt *route, params map[string]string, tmpl, rel string, ok bool) {
	path := r.URL.Path
	switch {
	case path == APIPrefix || strings.HasPrefix(path, APIPrefix+"/"):
		plane, rel = planeAPI, strings.TrimPrefix(path, APIPrefix)
	case strings.HasPrefix(path, ToolboxPrefix+"/"):
		// <toolboxProxyUrl>/<sandboxId>/<path>: routes are relative to the sandbox.
		_, rest, _ := strings.Cut(strings.TrimPrefix(path, ToolboxPrefix+"/"), "/")
		plane, rel = planeToolbox, "/"+rest
	default:
		return "", nil, nil, "", "", false
	}
	rt, params = matchRoute(plane, r.Method, rel)
	if rt == nil || (plane == planeToolbox && rel == "/") {
		return plane, nil, nil, rel, rel, true
	}
	return plane, rt, params, rt.tmpl, rel, true
}

// serveAPI dispatches a control-plane request; rel is the path after /api.
func (s *Server) serveAPI(w *statusWriter, r *http.Request, rec *Request, rt *route, params map[string]string, rel string) {
	if rt == nil {
		writeAPIError(w, r, http.StatusNotFound, fmt.Sprintf("Cannot %s %s", r.Method, r.URL.Path))
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
		writeAPIError(w, r, http.StatusUnauthorized, "Unauthorized")
		return
	}
	s.serve(w, r, rec, rt, params, rel, sb, name)
}

// serveToolbox dispatches <toolboxProxyUrl>/<sandboxId>/<rel>.
func (s *Server) serveToolbox(w *statusWriter, r *http.Request, rec *Request, rt *route, params map[string]string, rel string) {
	id, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, ToolboxPrefix+"/"), "/")
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
	if sb != nil {
		s.setSandbox(rec, sb.id)
	}
	if rt == nil {
		writeToolboxError(w, r, http.StatusNotFound, "not found")
		return
	}
	if !bearerOK(r, s.cfg.apiKey) && (token == "" || r.Header.Get("X-Daytona-Preview-Token") != token) {
		writeToolboxError(w, r, http.StatusUnauthorized, "invalid or missing authentication")
		return
	}
	wrapped := *rt
	wrapped.h = func(c *call) {
		if c.toolboxReady() && !c.forward() {
			rt.h(c)
		}
	}
	s.serve(w, r, rec, &wrapped, params, rel, sb, name)
}
