package daytonatest

import (
	"net/http"
	"os"
	osexec "os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// daemonVersion is what GET /version and the DTO's daemonVersion report.
const daemonVersion = "0.190.0-daytonatest"

// toolbox is the per-sandbox daemon state.
type toolbox struct {
	mu       sync.Mutex
	sessions map[string]*session
	ptys     map[string]*ptySession
	execs    map[*osexec.Cmd]struct{} // running one-shot executes
}

func (t *toolbox) init() {
	t.sessions = map[string]*session{}
	t.ptys = map[string]*ptySession{}
	t.execs = map[*osexec.Cmd]struct{}{}
}

// killAll ends every session and PTY of the sandbox (stop, delete, error):
// sessions live in daemon memory and do not survive.
func (sb *sandbox) killAll(reason string) {
	sb.tb.mu.Lock()
	sessions := sb.tb.sessions
	ptys := sb.tb.ptys
	sb.tb.sessions = map[string]*session{}
	sb.tb.ptys = map[string]*ptySession{}
	for cmd := range sb.tb.execs {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	sb.tb.mu.Unlock()
	var wg sync.WaitGroup
	for _, ss := range sessions {
		wg.Add(1)
		go func() { defer wg.Done(); ss.kill() }()
	}
	for _, p := range ptys {
		wg.Add(1)
		go func() { defer wg.Done(); p.kill() }()
	}
	wg.Wait()
	if len(sessions)+len(ptys) > 0 {
		sb.s.logf("daytonatest: sandbox %s: %d sessions, %d ptys ended (%s)", sb.id, len(sessions), len(ptys), reason)
	}
	sb.s.notify()
}

// Sessions lists the ids of a sandbox's live process sessions.
func (s *Server) Sessions(sandboxID string) []string {
	return s.toolboxIDs(sandboxID, false)
}

// PTYs lists the ids of a sandbox's PTY sessions.
func (s *Server) PTYs(sandboxID string) []string {
	return s.toolboxIDs(sandboxID, true)
}

func (s *Server) toolboxIDs(sandboxID string, ptys bool) []string {
	s.init()
	s.mu.Lock()
	sb := s.sandboxes[sandboxID]
	s.mu.Unlock()
	if sb == nil {
		return nil
	}
	sb.tb.mu.Lock()
	defer sb.tb.mu.Unlock()
	var out []string
	if ptys {
		for id := range sb.tb.ptys {
			out = append(out, id)
		}
	} else {
		for id := range sb.tb.sessions {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

var toolboxRoutes = mkRoutes([]route{
	{method: "GET", tmpl: "/version", h: tbVersion},
	{method: "GET", tmpl: "/work-dir", h: tbWorkDir},
	{method: "GET", tmpl: "/user-home-dir", h: tbWorkDir},
	{method: "POST", tmpl: "/process/execute", h: tbExecute},
	{method: "GET", tmpl: "/process/session", h: tbListSessions},
	{method: "POST", tmpl: "/process/session", h: tbCreateSession},
	{method: "GET", tmpl: "/process/session/entrypoint/logs", h: tbEntrypointLogs},
	{method: "GET", tmpl: "/process/session/{sessionId}", h: tbGetSession},
	{method: "DELETE", tmpl: "/process/session/{sessionId}", h: tbDeleteSession},
	{method: "POST", tmpl: "/process/session/{sessionId}/exec", h: tbSessionExec},
	{method: "GET", tmpl: "/process/session/{sessionId}/command/{commandId}", h: tbCommand},
	{method: "GET", tmpl: "/process/session/{sessionId}/command/{commandId}/logs", h: tbCommandLogs},
	{method: "POST", tmpl: "/process/session/{sessionId}/command/{commandId}/input", h: tbCommandInput},
	{method: "GET", tmpl: "/process/pty", h: tbListPty},
	{method: "POST", tmpl: "/process/pty", h: tbCreatePty},
	{method: "GET", tmpl: "/process/pty/{sessionId}", h: tbGetPty},
	{method: "DELETE", tmpl: "/process/pty/{sessionId}", h: tbDeletePty},
	{method: "GET", tmpl: "/process/pty/{sessionId}/connect", h: tbConnectPty},
	{method: "POST", tmpl: "/process/pty/{sessionId}/resize", h: tbResizePty},
	{method: "GET", tmpl: "/files", h: tbListFiles},
	{method: "DELETE", tmpl: "/files", h: tbDeleteFile},
	{method: "GET", tmpl: "/files/info", h: tbFileInfo},
	{method: "POST", tmpl: "/files/folder", h: tbCreateFolder},
	{method: "POST", tmpl: "/files/move", h: tbMoveFile},
	{method: "POST", tmpl: "/files/permissions", h: tbPermissions},
	{method: "GET", tmpl: "/files/download", h: tbDownload},
	{method: "POST", tmpl: "/files/bulk-download", h: tbBulkDownload},
	{method: "POST", tmpl: "/files/upload", h: tbUpload},
	{method: "POST", tmpl: "/files/bulk-upload", h: tbBulkUpload},
})

// serveToolbox dispatches <toolboxProxyUrl>/<sandboxId>/<path>.
func (s *Server) serveToolbox(w http.ResponseWriter, r *http.Request, rel string) {
	rel = strings.TrimPrefix(rel, "/")
	id, rest, _ := strings.Cut(rel, "/")
	rest = "/" + rest
	rt, params, _ := matchRoute(toolboxRoutes, r.Method, rest)
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

// toolboxReady answers like the proxy/runner when the sandbox cannot be
// reached, and counts the request as activity otherwise.
func (c *call) toolboxReady() bool {
	s := c.s
	if c.sb == nil {
		writeToolboxError(c.w, c.r, http.StatusNotFound, "sandbox not found")
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := c.sb
	switch {
	case !sb.visibleLocked():
		writeToolboxError(c.w, c.r, http.StatusNotFound, "sandbox not found")
		return false
	case sb.containerLost:
		writeToolboxError(c.w, c.r, http.StatusNotFound, "sandbox container not found: "+MissingContainerReason(sb.id))
		return false
	case sb.state == StateArchived || sb.state == StateArchiving || sb.state == StateRestoring:
		writeToolboxError(c.w, c.r, http.StatusBadRequest, "failed to get runner info: sandbox has no runner")
		return false
	case sb.state != StateStarted:
		writeToolboxError(c.w, c.r, http.StatusBadRequest, "failed to resolve container IP after 3 attempts: no IP address found. Is the Sandbox started?")
		return false
	}
	if !strings.EqualFold(c.r.Header.Get("X-Daytona-Skip-Last-Activity-Update"), "true") {
		sb.lastActivity = s.cfg.now()
	}
	return true
}

func tbVersion(c *call) {
	writeJSON(c.w, http.StatusOK, map[string]string{"version": daemonVersion})
}

func tbWorkDir(c *call) {
	writeJSON(c.w, http.StatusOK, map[string]string{"dir": c.sb.home})
}

// outputMode is how the toolbox formats command output for a client,
// chosen from its version headers (docs/daytona.md#version-headers).
type outputMode int

const (
	modeStripped outputMode = iota // markers stripped, plain text
	modeRaw                        // raw with markers, no split
	modeSplit                      // JSON with output/stdout/stderr
)

func requestMode(r *http.Request) outputMode {
	v := r.Header.Get("X-Daytona-SDK-Version")
	if v == "" {
		// Browsers pass it as a WebSocket sub-protocol.
		for _, p := range strings.Split(r.Header.Get("Sec-WebSocket-Protocol"), ",") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(p), "X-Daytona-SDK-Version~"); ok {
				v = rest
			}
		}
	}
	if v == "" {
		if strings.EqualFold(r.Header.Get("X-Daytona-Split-Output"), "true") {
			return modeRaw
		}
		return modeStripped
	}
	if strings.Contains(v, "dev") {
		return modeSplit
	}
	switch {
	case versionAtLeast(v, 0, 167, 0):
		return modeSplit
	case versionAtLeast(v, 0, 27, 0):
		return modeRaw
	default:
		return modeStripped
	}
}

func versionAtLeast(v string, maj, min, patch int) bool {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	want := []int{maj, min, patch}
	for i := 0; i < 3; i++ {
		n := 0
		if i < len(parts) {
			var err error
			n, err = strconv.Atoi(parts[i])
			if err != nil {
				return false
			}
		}
		if n != want[i] {
			return n > want[i]
		}
	}
	return true
}

var (
	bashOnce sync.Once
	bashPath string
)

func bashBinary() string {
	bashOnce.Do(func() {
		p, err := osexec.LookPath("bash")
		if err != nil {
			p = "/bin/bash"
		}
		bashPath = p
	})
	return bashPath
}

// baseEnv is the environment of every process in the sandbox. The host
// environment is deliberately not inherited (it may hold secrets); only
// PATH is taken over so the host's tools are found.
func (sb *sandbox) baseEnv(extra map[string]string) []string {
	sb.s.mu.Lock()
	env := map[string]string{
		"PATH":                 os.Getenv("PATH"),
		"HOME":                 sb.home,
		"USER":                 sb.user,
		"LOGNAME":              sb.user,
		"SHELL":                bashBinary(),
		"LANG":                 "C.UTF-8",
		"TMPDIR":               sb.root + "/tmp",
		"DAYTONA_SANDBOX_ID":   sb.id,
		"DAYTONA_SANDBOX_USER": sb.user,
	}
	if env["PATH"] == "" {
		env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	for k, v := range sb.env {
		env[k] = v
	}
	sb.s.mu.Unlock()
	for k, v := range extra {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

// Dispatch records one command handed to a shell: a session exec or a
// one-shot execute. Tests use it to prove a command ran exactly once.
type Dispatch struct {
	Time      time.Time
	Sandbox   string
	Session   string // "" for POST /process/execute
	CommandID string // "" for POST /process/execute
	Command   string
	Async     bool
	Timeout   int // the timeout in seconds of POST /process/execute (0 = none)
}

// Dispatches returns every command dispatch so far, in order.
func (s *Server) Dispatches() []Dispatch {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Dispatch(nil), s.dispatch...)
}

// CountDispatches counts dispatched commands whose text contains substr
// ("" counts all).
func (s *Server) CountDispatches(substr string) int {
	n := 0
	for _, d := range s.Dispatches() {
		if strings.Contains(d.Command, substr) {
			n++
		}
	}
	return n
}

func (s *Server) recordDispatch(d Dispatch) {
	d.Time = time.Now()
	s.mu.Lock()
	s.dispatch = append(s.dispatch, d)
	s.notifyLocked()
	s.mu.Unlock()
}
