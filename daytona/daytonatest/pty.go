package daytonatest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"
)

// ptySession is one PTY: an interactive login bash on a real
// pseudo-terminal, its output broadcast to every attached WebSocket.
type ptySession struct {
	s         *Server
	sb        *sandbox
	id, cwd   string
	envs      map[string]string
	lazy      bool
	createdAt time.Time

	mu       sync.Mutex
	cols     int
	rows     int
	started  bool
	exited   bool
	exitCode int
	cmd      *osexec.Cmd
	ptmx     *os.File
	clients  map[*ptyClient]struct{}
	done     chan struct{} // closed once the process exited and output drained
	doneOnce sync.Once
}

type ptyMsg struct {
	typ  websocket.MessageType
	data []byte
}

type ptyClient struct {
	ch      chan ptyMsg
	dropped chan struct{} // closed when the client is dropped as slow
	once    sync.Once
	cut     chan struct{} // closed by DropPTYConnections
	cutOnce sync.Once
}

func (p *ptySession) infoLocked() map[string]any {
	envs := p.envs
	if envs == nil {
		envs = map[string]string{}
	}
	return map[string]any{
		"id": p.id, "cwd": p.cwd, "envs": envs, "cols": p.cols, "rows": p.rows,
		"createdAt": p.createdAt.UTC().Format(time.RFC3339), "active": p.started && !p.exited, "lazyStart": p.lazy,
	}
}

func tbListPty(c *call) {
	c.sb.tb.mu.Lock()
	var list []*ptySession
	for _, p := range c.sb.tb.ptys {
		list = append(list, p)
	}
	c.sb.tb.mu.Unlock()
	out := []any{}
	for _, p := range list {
		p.mu.Lock()
		out = append(out, p.infoLocked())
		p.mu.Unlock()
	}
	writeJSON(c.w, http.StatusOK, map[string]any{"sessions": out})
}

func tbCreatePty(c *call) {
	var req struct {
		ID        string            `json:"id"`
		Cwd       string            `json:"cwd"`
		Envs      map[string]string `json:"envs"`
		Cols      int               `json:"cols"`
		Rows      int               `json:"rows"`
		LazyStart bool              `json:"lazyStart"`
	}
	if err := json.NewDecoder(c.r.Body).Decode(&req); err != nil {
		writeGinError(c.w, http.StatusBadRequest, "invalid request body")
		return
	}
	if req.ID == "" {
		writeGinError(c.w, http.StatusBadRequest, "session ID is required")
		return
	}
	if req.Cols == 0 {
		req.Cols = 80
	}
	if req.Rows == 0 {
		req.Rows = 24
	}
	if req.Cols < 1 || req.Cols > 1000 || req.Rows < 1 || req.Rows > 1000 {
		writeGinError(c.w, http.StatusBadRequest, "cols and rows must be between 1 and 1000")
		return
	}
	sb := c.sb
	cwd := sb.home
	if req.Cwd != "" {
		cwd = req.Cwd
		if !filepath.IsAbs(cwd) {
			cwd = filepath.Join(sb.home, cwd)
		}
	}
	p := &ptySession{
		s: c.s, sb: sb, id: req.ID, cwd: cwd, envs: req.Envs, lazy: req.LazyStart, createdAt: time.Now(),
		cols: req.Cols, rows: req.Rows, clients: map[*ptyClient]struct{}{}, done: make(chan struct{}),
	}
	sb.tb.mu.Lock()
	if _, ok := sb.tb.ptys[req.ID]; ok {
		sb.tb.mu.Unlock()
		writeGinError(c.w, http.StatusConflict, fmt.Sprintf("PTY session with ID '%s' already exists", req.ID))
		return
	}
	sb.tb.ptys[req.ID] = p
	sb.tb.mu.Unlock()
	if !req.LazyStart {
		p.mu.Lock()
		err := p.startLocked()
		p.mu.Unlock()
		if err != nil {
			sb.tb.mu.Lock()
			delete(sb.tb.ptys, req.ID)
			sb.tb.mu.Unlock()
			writeGinError(c.w, http.StatusInternalServerError, "failed to start PTY session")
			return
		}
	}
	writeJSON(c.w, http.StatusCreated, map[string]string{"sessionId": req.ID})
}

// startLocked starts the shell; p.mu must be held.
func (p *ptySession) startLocked() error {
	if p.started {
		return nil
	}
	extra := map[string]string{"TERM": "xterm-256color"}
	for k, v := range p.envs {
		extra[k] = v
	}
	cmd, err := p.sb.command([]string{bashBinary(), "--login", "-i"}, p.cwd, p.sb.baseEnv(extra), true)
	if err != nil {
		return err
	}
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(p.cols), Rows: uint16(p.rows)})
	if err != nil {
		return err
	}
	p.started, p.cmd, p.ptmx = true, cmd, ptmx
	if !p.s.goBackground(p.pump) {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		_ = ptmx.Close()
		return errClosed
	}
	return nil
}

// pump broadcasts output until the terminal closes, then records the exit.
func (p *ptySession) pump() {
	buf := make([]byte, 32*1024)
	for {
		n, err := p.ptmx.Read(buf)
		if n > 0 {
			p.broadcast(ptyMsg{typ: websocket.MessageBinary, data: append([]byte(nil), buf[:n]...)})
		}
		if err != nil {
			break
		}
	}
	code := exitCodeOf(p.cmd.Wait())
	_ = p.ptmx.Close()
	p.mu.Lock()
	p.exited = true
	p.exitCode = code
	p.mu.Unlock()
	p.sb.tb.mu.Lock()
	if p.sb.tb.ptys[p.id] == p {
		delete(p.sb.tb.ptys, p.id)
	}
	p.sb.tb.mu.Unlock()
	p.doneOnce.Do(func() { close(p.done) })
	p.s.notify()
}

// broadcast queues msg for every client; a full queue drops that client.
func (p *ptySession) broadcast(msg ptyMsg) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for cl := range p.clients {
		select {
		case cl.ch <- msg:
		default:
			delete(p.clients, cl)
			cl.once.Do(func() { close(cl.dropped) })
		}
	}
}

// kill ends the process group with SIGKILL and waits for the exit.
func (p *ptySession) kill() {
	p.mu.Lock()
	started := p.started
	var pid int
	if started {
		pid = p.cmd.Process.Pid
	} else {
		// Lazy and never connected: nothing runs; mark it gone.
		p.started, p.exited, p.exitCode = true, true, 137
	}
	p.mu.Unlock()
	if !started {
		p.doneOnce.Do(func() { close(p.done) })
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-p.done:
		return
	case <-t.C:
	}
	// A process outside the shell's group (a background job) still holds
	// the terminal: closing the master unblocks the pump.
	p.mu.Lock()
	f := p.ptmx
	p.mu.Unlock()
	_ = f.Close()
	<-p.done
}

func exitReason(code int) string {
	switch {
	case code == 0:
		return ""
	case code == 130:
		return "Ctrl+C"
	case code == 137:
		return "SIGKILL"
	case code == 143:
		return "SIGTERM"
	case code > 128:
		return fmt.Sprintf("signal %d", code-128)
	default:
		return "non-zero exit"
	}
}

func (c *call) pty() *ptySession {
	c.sb.tb.mu.Lock()
	p := c.sb.tb.ptys[c.param("sessionId")]
	c.sb.tb.mu.Unlock()
	return p
}

func tbGetPty(c *call) {
	p := c.pty()
	if p == nil {
		writeGinError(c.w, http.StatusNotFound, "PTY session not found")
		return
	}
	p.mu.Lock()
	d := p.infoLocked()
	p.mu.Unlock()
	writeJSON(c.w, http.StatusOK, d)
}

func tbDeletePty(c *call) {
	p := c.pty()
	if p == nil {
		writeGinError(c.w, http.StatusNotFound, "PTY session not found")
		return
	}
	p.kill()
	c.sb.tb.mu.Lock()
	if c.sb.tb.ptys[p.id] == p {
		delete(c.sb.tb.ptys, p.id)
	}
	c.sb.tb.mu.Unlock()
	writeJSON(c.w, http.StatusOK, map[string]string{"message": "PTY session deleted"})
}

func tbResizePty(c *call) {
	p := c.pty()
	if p == nil {
		writeGinError(c.w, http.StatusNotFound, "PTY session not found")
		return
	}
	var req struct {
		Cols int `json:"cols"`
		Rows int `json:"rows"`
	}
	if err := json.NewDecoder(c.r.Body).Decode(&req); err != nil || req.Cols < 1 || req.Cols > 1000 || req.Rows < 1 || req.Rows > 1000 {
		writeGinError(c.w, http.StatusBadRequest, "cols and rows must be between 1 and 1000")
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		writeGinError(c.w, http.StatusGone, fmt.Sprintf("PTY session '%s' has terminated and cannot be resized", p.id))
		return
	}
	p.cols, p.rows = req.Cols, req.Rows
	if p.started {
		if err := pty.Setsize(p.ptmx, &pty.Winsize{Cols: uint16(req.Cols), Rows: uint16(req.Rows)}); err != nil {
			writeGinError(c.w, http.StatusInternalServerError, "failed to resize PTY session")
			return
		}
	}
	writeJSON(c.w, http.StatusOK, p.infoLocked())
}

func tbConnectPty(c *call) {
	p := c.pty()
	conn, err := acceptWS(c)
	if err != nil {
		return
	}
	fail := func(msg string) {
		b, _ := json.Marshal(map[string]string{"type": "control", "status": "error", "error": msg})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = conn.Write(ctx, websocket.MessageText, b)
		cancel()
		_ = conn.CloseNow()
	}
	if p == nil {
		fail(fmt.Sprintf("Failed to connect to PTY session: PTY session %s not found", c.param("sessionId")))
		return
	}
	conn.SetReadLimit(64 * 1024)
	cl := &ptyClient{ch: make(chan ptyMsg, 256), dropped: make(chan struct{}), cut: make(chan struct{})}
	p.mu.Lock()
	if p.exited {
		p.mu.Unlock()
		fail(fmt.Sprintf("Failed to connect to PTY session: PTY session %s has terminated and is no longer available", p.id))
		return
	}
	cl.ch <- ptyMsg{typ: websocket.MessageText, data: []byte(`{"type":"control","status":"connected"}`)}
	p.clients[cl] = struct{}{}
	err = p.startLocked()
	p.mu.Unlock()
	if err != nil {
		fail("Failed to connect to PTY session: failed to start PTY session")
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if c.fault != nil && c.fault.WSSilent {
		p.mu.Lock()
		delete(p.clients, cl)
		p.mu.Unlock()
		go discardReads(ctx, conn, cancel)
		select {
		case <-ctx.Done():
		case <-c.s.done:
		}
		_ = conn.CloseNow()
		return
	}
	// Reader: client frames are terminal input.
	go func() {
		defer cancel()
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			p.mu.Lock()
			f := p.ptmx
			gone := p.exited
			p.mu.Unlock()
			if gone || f == nil {
				_ = conn.Close(websocket.StatusInternalError, "PTY session unavailable")
				return
			}
			if _, err := f.Write(data); err != nil {
				return
			}
		}
	}()
	ws := &wsSender{conn: conn, fault: c.fault, closing: c.s.done}
	defer func() {
		p.mu.Lock()
		delete(p.clients, cl)
		p.mu.Unlock()
	}()
	send := func(m ptyMsg) bool {
		if m.typ == websocket.MessageText {
			return conn.Write(ctx, m.typ, m.data) == nil
		}
		return ws.send(ctx, m.data)
	}
	for {
		select {
		case m := <-cl.ch:
			if !send(m) {
				return
			}
		case <-cl.dropped:
			_ = conn.Close(websocket.StatusPolicyViolation, "slow consumer")
			return
		case <-cl.cut:
			_ = conn.CloseNow() // no close frame: a network failure
			return
		case <-p.done:
			for {
				select {
				case m := <-cl.ch:
					if !send(m) {
						return
					}
					continue
				default:
				}
				break
			}
			p.mu.Lock()
			code := p.exitCode
			p.mu.Unlock()
			reason := map[string]any{"exitCode": code}
			if r := exitReason(code); r != "" {
				reason["exitReason"] = r
			}
			b, _ := json.Marshal(reason)
			status := websocket.StatusNormalClosure
			if code != 0 {
				status = websocket.StatusInternalError
			}
			_ = conn.Close(status, string(b))
			return
		case <-ctx.Done():
			_ = conn.CloseNow()
			return
		case <-c.s.done:
			_ = conn.CloseNow()
			return
		}
	}
}

// SimPTYDropPath is where, under the API prefix, the emulator cuts the
// terminal connections of a sandbox for readers in another process
// (POST ?sandbox=<id>, answered {"dropped":n}): DropPTYConnections over
// HTTP. It is the emulator's own endpoint, not Daytona's.
const SimPTYDropPath = "/__sim/pty-drop"

// DropPTYConnections cuts every WebSocket attached to the sandbox's PTYs
// without a close frame, as a network failure would; the processes keep
// running. It returns how many connections it cut.
func (s *Server) DropPTYConnections(sandboxID string) int {
	s.init()
	s.mu.Lock()
	sb := s.sandboxes[sandboxID]
	s.mu.Unlock()
	if sb == nil {
		return 0
	}
	sb.tb.mu.Lock()
	var ptys []*ptySession
	for _, p := range sb.tb.ptys {
		ptys = append(ptys, p)
	}
	sb.tb.mu.Unlock()
	n := 0
	for _, p := range ptys {
		p.mu.Lock()
		for cl := range p.clients {
			cl.cutOnce.Do(func() { close(cl.cut) })
			n++
		}
		p.mu.Unlock()
	}
	return n
}

// serveSimPTYDrop answers POST SimPTYDropPath?sandbox=<id>.
func (s *Server) serveSimPTYDrop(w http.ResponseWriter, r *http.Request) {
	if !s.simAdmit(w, r, http.MethodPost, "only POST cuts terminal connections") {
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"dropped": s.DropPTYConnections(r.URL.Query().Get("sandbox"))})
}
