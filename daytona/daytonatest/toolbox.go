package daytonatest

import (
	"net/http"
	"os"
	osexec "os/exec"
	"regexp"
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
		sb.lastActivity = time.Now()
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
		"PATH":                 hostPath(),
		"HOME":                 sb.home,
		"USER":                 sb.user,
		"LOGNAME":              sb.user,
		"SHELL":                bashBinary(),
		"LANG":                 "C.UTF-8",
		"TMPDIR":               sb.tmp,
		"DAYTONA_SANDBOX_ID":   sb.id,
		"DAYTONA_SANDBOX_USER": sb.user,
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

// hostPath is the PATH sandbox processes get: the host's, so its tools
// are found.
func hostPath() string {
	if p := os.Getenv("PATH"); p != "" {
		return p
	}
	return "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
}

func (s *Server) recordDispatch(d Dispatch) {
	d.Time = time.Now()
	s.mu.Lock()
	s.dispatch = append(s.dispatch, d)
	s.notifyLocked()
	s.mu.Unlock()
}

var envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
