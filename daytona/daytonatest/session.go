package daytonatest

import (
	"github.com/daytonaworker/daytona-worker/internal/shell"

	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// session is one persistent bash process. Commands are written to its
// stdin one line each and run in that same shell with `source`, so cwd,
// variables, functions and options carry over, exactly as in the daemon.
// The shell's stdout and stderr are two pipes read by labelers that write
// the marked lines into the running command's log; after each command the
// shell prints a per-session random sentinel (with the exit status) on
// both pipes, which is how output is attributed and completion detected.
type session struct {
	s     *Server
	sb    *sandbox
	id    string
	dir   string
	token []byte

	// scripts is dir as the shell names it (sandbox.sessionScripts).
	scripts string

	cmd    *osexec.Cmd
	script io.WriteCloser
	inputW *os.File
	outR   *os.File
	errR   *os.File
	exited chan struct{} // bash exited and both labelers drained

	mu         sync.Mutex
	commands   map[string]*command
	order      []*command
	dispatched []*command // in dispatch order
	outIdx     int        // index in dispatched that stdout lines belong to
	errIdx     int
	dead       bool
	// shellGone: the shell process has exited (dead is set only once its
	// output has drained too); an exec then meets a broken pipe.
	shellGone bool
	shellCode int
	killing   bool
	// closeHeld: follows of this session's commands do not close after
	// the exit while set (HoldFollowClose).
	closeHeld bool
}

type command struct {
	id, text     string
	async        bool
	suppressEcho bool
	logPath      string
	log          *os.File
	size         int64
	gotOut       bool
	gotErr       bool
	rc           int
	exitCode     *int
	done         chan struct{}
	pending      []byte // log records not yet written (flushLocked)
	sentinel     []byte // <session token>:<id>, which ends its last line
}

func tbListSessions(c *call) {
	c.sb.tb.mu.Lock()
	var list []*session
	for _, ss := range c.sb.tb.sessions {
		list = append(list, ss)
	}
	c.sb.tb.mu.Unlock()
	out := make([]any, 0, len(list))
	for _, ss := range list {
		out = append(out, ss.dto())
	}
	writeJSON(c.w, http.StatusOK, out)
}

func (ss *session) dto() map[string]any {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	cmds := make([]map[string]any, 0, len(ss.order))
	for _, cm := range ss.order {
		cmds = append(cmds, cm.dtoLocked())
	}
	return map[string]any{"sessionId": ss.id, "commands": cmds}
}

func (cm *command) dtoLocked() map[string]any {
	d := map[string]any{"id": cm.id, "command": cm.text}
	if cm.exitCode != nil {
		d["exitCode"] = *cm.exitCode
	}
	return d
}

func tbCreateSession(c *call) {
	var req struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.NewDecoder(c.r.Body).Decode(&req); err != nil || req.SessionID == "" {
		writeToolboxError(c.w, c.r, http.StatusBadRequest, "invalid request body")
		return
	}
	if req.SessionID == "entrypoint" {
		writeToolboxError(c.w, c.r, http.StatusBadRequest, "session ID 'entrypoint' is reserved")
		return
	}
	sb := c.sb
	sb.tb.mu.Lock()
	defer sb.tb.mu.Unlock()
	if _, ok := sb.tb.sessions[req.SessionID]; ok {
		writeToolboxError(c.w, c.r, http.StatusConflict, "session already exists")
		return
	}
	ss, err := c.s.startSession(sb, req.SessionID)
	if err != nil {
		writeToolboxError(c.w, c.r, http.StatusInternalServerError, "failed to start session: "+err.Error())
		return
	}
	sb.tb.sessions[req.SessionID] = ss
	c.w.WriteHeader(http.StatusCreated)
}

func (s *Server) startSession(sb *sandbox, id string) (_ *session, err error) {
	dir := filepath.Join(s.stateDir, sb.id, "sessions", uuid.NewString())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// Every pipe end and dir handle opened here is closed when the session
	// does not start: a failed start must not cost the emulator descriptors.
	var opened []*os.File
	defer func() {
		if err != nil {
			for _, f := range opened {
				_ = f.Close()
			}
			_ = os.RemoveAll(dir)
		}
	}()
	cmd, err := sb.command([]string{bashBinary(), "--noprofile", "--norc"}, sb.home, sb.baseEnv(nil), false)
	if err != nil {
		return nil, err
	}
	scripts, dirFiles, err := sb.sessionScripts(dir)
	if err != nil {
		return nil, err
	}
	opened = append(opened, dirFiles...)
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	opened = append(opened, outR, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	opened = append(opened, errR, errW)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	opened = append(opened, inR, inW)
	cmd.Stdout = outW
	cmd.Stderr = errW
	// fd 3: the stdin of async commands (POST …/input writes here); fd 4,
	// in a namespace, the session's dir (sessionScripts).
	cmd.ExtraFiles = append([]*os.File{inR}, dirFiles...)
	script, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	err = cmd.Start()
	for _, f := range dirFiles {
		_ = f.Close() // the child holds its own copy
	}
	if err != nil {
		return nil, err // Start closed the stdin pipe itself
	}
	outW.Close()
	errW.Close()
	inR.Close()
	ss := &session{
		s: s, sb: sb, id: id, dir: dir, scripts: scripts, cmd: cmd, script: script, inputW: inW, outR: outR, errR: errR,
		token: []byte("__DAYTONATEST_" + randHex(12) + "__"), commands: map[string]*command{},
		exited: make(chan struct{}),
	}
	// File writes beyond the allocation fail with EFBIG instead of killing.
	_, _ = io.WriteString(script, "trap '' XFSZ\n")
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ss.label(outR, false) }()
	go func() { defer wg.Done(); ss.label(errR, true) }()
	waiter := func() {
		err := cmd.Wait()
		ss.mu.Lock()
		ss.shellGone = true
		ss.mu.Unlock()
		wg.Wait()
		outR.Close()
		errR.Close()
		ss.finish(exitCodeOf(err))
	}
	if !s.goBackground(waiter) {
		// The server is closing: do not leave the shell behind.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = script.Close()
		waiter()
		return nil, errClosed
	}
	return ss, nil
}

// deleteGrace is how long a deleted session's processes get between
// SIGTERM and SIGKILL: the daemon's termination grace period (5 s; a
// DELETE of a session whose command ignores SIGTERM was answered after
// 5,026 ms).
const deleteGrace = 5 * time.Second

// kill ends the session: SIGTERM to its process group, SIGKILL after the
// daemon's grace.
func (ss *session) kill() {
	ss.mu.Lock()
	ss.killing = true
	ss.mu.Unlock()
	_ = ss.script.Close()
	pid := ss.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	t := time.NewTimer(deleteGrace)
	defer t.Stop()
	select {
	case <-ss.exited:
	case <-ss.s.done:
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	case <-t.C:
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		t2 := time.NewTimer(time.Second)
		defer t2.Stop()
		select {
		case <-ss.exited:
		case <-t2.C:
			// Something outside the group (setsid) holds the output
			// pipes: stop reading them so the session can end.
			_ = ss.outR.Close()
			_ = ss.errR.Close()
			<-ss.exited
		}
	}
	// Stragglers that left the group's pipes open are gone with the group.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = os.RemoveAll(ss.dir)
}

func (c *call) session() *session {
	c.sb.tb.mu.Lock()
	ss := c.sb.tb.sessions[c.param("sessionId")]
	c.sb.tb.mu.Unlock()
	if ss == nil {
		writeToolboxError(c.w, c.r, http.StatusNotFound, "session not found")
	}
	return ss
}

func tbGetSession(c *call) {
	if c.param("sessionId") == "entrypoint" {
		writeJSON(c.w, http.StatusOK, map[string]any{"sessionId": "entrypoint", "commands": []any{}})
		return
	}
	if ss := c.session(); ss != nil {
		writeJSON(c.w, http.StatusOK, ss.dto())
	}
}

// tbEntrypointLogs: the emulated sandboxes have no entrypoint process, so
// its log is empty.
func tbEntrypointLogs(c *call) {
	if requestMode(c.r) == modeSplit {
		writeJSON(c.w, http.StatusOK, map[string]string{"output": "", "stdout": "", "stderr": ""})
		return
	}
	c.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	c.w.WriteHeader(http.StatusOK)
}

func tbDeleteSession(c *call) {
	sb := c.sb
	sb.tb.mu.Lock()
	ss := sb.tb.sessions[c.param("sessionId")]
	delete(sb.tb.sessions, c.param("sessionId"))
	sb.tb.mu.Unlock()
	if ss == nil {
		writeToolboxError(c.w, c.r, http.StatusNotFound, "session not found")
		return
	}
	ss.kill()
	c.w.WriteHeader(http.StatusNoContent)
}

func tbSessionExec(c *call) {
	if c.param("sessionId") == "entrypoint" {
		writeToolboxError(c.w, c.r, http.StatusBadRequest, "cannot execute commands in the entrypoint session")
		return
	}
	c.sb.tb.mu.Lock()
	ss := c.sb.tb.sessions[c.param("sessionId")]
	c.sb.tb.mu.Unlock()
	if ss == nil {
		// The daemon wraps the service's typed "not found" with
		// fmt.Errorf, so the answer is a 500, not a 404.
		c.writeSessionEnded(true)
		return
	}
	var req struct {
		Command           string `json:"command"`
		RunAsync          bool   `json:"runAsync"`
		Async             bool   `json:"async"`
		SuppressInputEcho bool   `json:"suppressInputEcho"`
	}
	if err := json.NewDecoder(c.r.Body).Decode(&req); err != nil || strings.TrimSpace(req.Command) == "" {
		writeEmpty(c.w, http.StatusBadRequest)
		return
	}
	async := req.RunAsync || req.Async
	cm, err := ss.dispatch(req.Command, async, req.SuppressInputEcho)
	written := time.Now()
	if errors.Is(err, errShellGone) {
		c.writeSessionEnded(false)
		return
	}
	if err != nil {
		writeToolboxError(c.w, c.r, http.StatusBadRequest, err.Error())
		return
	}
	mode := requestMode(c.r)
	if async {
		writeJSON(c.w, http.StatusAccepted, map[string]any{"cmdId": cm.id, "output": nil, "stdout": nil, "stderr": nil, "exitCode": nil})
		return
	}
	select {
	case <-cm.done:
	case <-c.ctx().Done():
		return
	case <-c.s.done:
		return
	}
	// The daemon polls the exit code file: once right after the write
	// (never there yet), then every syncPoll, so the answer comes at the
	// first tick after the command's end.
	ticks := time.Since(written)/syncPoll + 1
	if !c.s.sleep(c.ctx(), time.Until(written.Add(ticks*syncPoll))) {
		return
	}
	ss.mu.Lock()
	killed := ss.killing
	code := *cm.exitCode
	ss.mu.Unlock()
	if killed {
		writeToolboxError(c.w, c.r, http.StatusBadRequest, "session cancelled")
		return
	}
	raw, _ := os.ReadFile(cm.logPath)
	resp := map[string]any{"cmdId": cm.id, "exitCode": code, "stdout": nil, "stderr": nil}
	switch mode {
	case modeSplit:
		o, e := demux(raw)
		resp["output"], resp["stdout"], resp["stderr"] = string(raw), string(o), string(e)
	case modeRaw:
		resp["output"] = string(raw)
	default:
		resp["output"] = string(stripMarkers(raw))
	}
	writeJSON(c.w, http.StatusOK, resp)
}

// syncPoll is how often the daemon looks for a synchronous session
// command's exit code file (time.Sleep(50 * time.Millisecond) in its
// execute loop).
const syncPoll = 50 * time.Millisecond

// fifos are the command's own stdout and stderr pipes under the session's
// host dir.
func (cm *command) fifos(dir string) (out, err string) {
	return filepath.Join(dir, cm.id+".out"), filepath.Join(dir, cm.id+".err")
}

// errShellGone: the session's shell has exited, so the write of a command
// to its stdin fails (the daemon's "broken pipe").
var errShellGone = errors.New("session shell has exited")

// dispatch hands one command to the session's shell.
func (ss *session) dispatch(text string, async, suppressEcho bool) (*command, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.dead || ss.shellGone || ss.killing {
		return nil, errShellGone
	}
	cm := &command{
		id: uuid.NewString(), text: text, async: async, suppressEcho: suppressEcho,
		done: make(chan struct{}),
	}
	cm.sentinel = []byte(string(ss.token) + ":" + cm.id)
	cm.logPath = filepath.Join(ss.dir, cm.id+".log")
	scriptPath := filepath.Join(ss.dir, cm.id+".sh")
	// Readable by the sandbox user, who owns the (0700) dir.
	if err := os.WriteFile(scriptPath, []byte(text+"\n"), 0o644); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(cm.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cm.log = f
	stdin := "</dev/null"
	if async {
		stdin = "<&3"
	}
	// The command writes to pipes of its own (FIFOs, as the daemon's
	// wrapper gives it), relayed to the shell's streams by two cats that
	// the shell waits for before it prints the sentinels: like the
	// daemon's exit code, the completion comes only once every process
	// holding the command's stdout or stderr (a background job it left)
	// has closed it, and the next command waits for that too.
	out, errp := cm.fifos(ss.dir)
	for _, fp := range []string{out, errp} {
		if err := syscall.Mkfifo(fp, 0o600); err != nil {
			_ = f.Close()
			return nil, err
		}
		if err := ss.sb.view.own(fp); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	sOut, sErr := shell.Quote(ss.scripts+"/"+cm.id+".out"), shell.Quote(ss.scripts+"/"+cm.id+".err")
	tok := string(ss.token)
	line := fmt.Sprintf("ulimit -S -f %d 2>/dev/null; cat %s & __dt_o=$!; cat %s >&2 & __dt_e=$!; source %s %s >%s 2>%s; __dt_rc=$?; wait $__dt_o $__dt_e; "+
		"printf '%%s:%%s:%%s\\n' %s %s \"$__dt_rc\"; printf '%%s:%%s\\n' %s %s >&2\n",
		ss.sb.fsizeBlocks(), sOut, sErr, shell.Quote(ss.scripts+"/"+cm.id+".sh"), stdin, sOut, sErr,
		shell.Quote(tok), shell.Quote(cm.id), shell.Quote(tok), shell.Quote(cm.id))
	if _, err := io.WriteString(ss.script, line); err != nil {
		_ = f.Close()
		return nil, errShellGone
	}
	ss.commands[cm.id] = cm
	ss.order = append(ss.order, cm)
	ss.dispatched = append(ss.dispatched, cm)
	ss.s.recordDispatch(Dispatch{Sandbox: ss.sb.id, Session: ss.id, CommandID: cm.id, Command: text, Async: async})
	return cm, nil
}

func (c *call) command() (*session, *command) {
	ss := c.session()
	if ss == nil {
		return nil, nil
	}
	ss.mu.Lock()
	cm := ss.commands[c.param("commandId")]
	ss.mu.Unlock()
	if cm == nil {
		writeToolboxError(c.w, c.r, http.StatusNotFound, "command not found")
		return nil, nil
	}
	return ss, cm
}

func tbCommand(c *call) {
	ss, cm := c.command()
	if cm == nil {
		return
	}
	ss.mu.Lock()
	d := cm.dtoLocked()
	ss.mu.Unlock()
	writeJSON(c.w, http.StatusOK, d)
}

func tbCommandInput(c *call) {
	ss, cm := c.command()
	if cm == nil {
		return
	}
	var req struct {
		Data *string `json:"data"`
	}
	if err := json.NewDecoder(c.r.Body).Decode(&req); err != nil || req.Data == nil {
		writeEmpty(c.w, http.StatusBadRequest)
		return
	}
	data := *req.Data
	if !strings.HasSuffix(data, "\n") {
		data += "\n"
	}
	ss.mu.Lock()
	if cm.exitCode != nil {
		code := *cm.exitCode
		ss.mu.Unlock()
		writeToolboxError(c.w, c.r, http.StatusGone, fmt.Sprintf("command has already completed with exit code %d", code))
		return
	}
	if ss.dead {
		ss.mu.Unlock()
		writeToolboxError(c.w, c.r, http.StatusGone, "session process has exited")
		return
	}
	if !cm.suppressEcho {
		rec := append(append([]byte{}, markerStdout...), data...)
		cm.appendLocked(rec)
		cm.flushLocked()
	}
	async := cm.async
	ss.mu.Unlock()
	if async {
		if _, err := io.WriteString(ss.inputW, data); err != nil {
			writeToolboxError(c.w, c.r, http.StatusGone, "session process has exited")
			return
		}
	}
	c.s.notify()
	c.w.WriteHeader(http.StatusNoContent)
}
