package daytonatest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/coder/websocket"
)

// followChunk is the daemon's maximum follow frame size (docs/daytona.md#follow-logs).
const followChunk = 1024

// demux splits a marked log into stdout and stderr as the SDKs do: bytes
// after 01 01 01 go to stdout, after 02 02 02 to stderr; bytes before the
// first marker are dropped.
func demux(raw []byte) (stdout, stderr []byte) {
	stdout, stderr = []byte{}, []byte{}
	cur := byte(0)
	for i := 0; i < len(raw); {
		b := raw[i]
		if (b == 1 || b == 2) && i+2 < len(raw) && raw[i+1] == b && raw[i+2] == b {
			cur = b
			i += 3
			continue
		}
		// Up to the next byte that could start a marker (at least one byte).
		j := bytes.IndexAny(raw[i+1:], "\x01\x02")
		end := len(raw)
		if j >= 0 {
			end = i + 1 + j
		}
		switch cur {
		case 1:
			stdout = append(stdout, raw[i:end]...)
		case 2:
			stderr = append(stderr, raw[i:end]...)
		}
		i = end
	}
	return stdout, stderr
}

// stripMarkers removes the stream markers ("combined output").
func stripMarkers(raw []byte) []byte {
	raw = bytes.ReplaceAll(raw, markerStdout, nil)
	return bytes.ReplaceAll(raw, markerStderr, nil)
}

// stripper removes markers from a byte stream cut at arbitrary points.
type stripper struct{ carry []byte }

func (st *stripper) feed(p []byte) []byte {
	data := append(st.carry, p...)
	st.carry = nil
	data = stripMarkers(data)
	// Keep a trailing partial marker for the next chunk.
	for k := 2; k >= 1; k-- {
		if len(data) >= k {
			tail := data[len(data)-k:]
			if bytes.Equal(tail, markerStdout[:k]) || bytes.Equal(tail, markerStderr[:k]) {
				st.carry = append([]byte(nil), tail...)
				data = data[:len(data)-k]
				break
			}
		}
	}
	return data
}

func tbCommandLogs(c *call) {
	ss, cm := c.command()
	if cm == nil {
		return
	}
	mode := requestMode(c.r)
	if c.r.URL.Query().Get("follow") == "true" {
		if isWebSocket(c.r) {
			c.followWS(ss, cm, mode)
		} else {
			c.followHTTP(ss, cm)
		}
		return
	}
	if mode == modeRaw {
		serveRawLog(c, cm.logPath)
		return
	}
	raw, err := os.ReadFile(cm.logPath)
	if err != nil {
		writeToolboxError(c.w, c.r, http.StatusNotFound, "log file not found")
		return
	}
	switch mode {
	case modeSplit:
		o, e := demux(raw)
		writeJSON(c.w, http.StatusOK, map[string]string{"output": string(raw), "stdout": string(o), "stderr": string(e)})
	default:
		c.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		c.w.WriteHeader(http.StatusOK)
		_, _ = c.w.Write(stripMarkers(raw))
	}
}

// serveRawLog answers the log as it is now, markers included, straight
// from the file (the kernel copies it to the socket): a snapshot of
// megabytes costs the emulator no buffer of that size, so it does not
// weigh on the session path more than the daemon would. What the labeler
// appends after the size was taken is the next read's.
func serveRawLog(c *call, path string) {
	f, err := os.Open(path)
	if err != nil {
		writeToolboxError(c.w, c.r, http.StatusNotFound, "log file not found")
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		writeToolboxError(c.w, c.r, http.StatusInternalServerError, err.Error())
		return
	}
	c.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	c.w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	c.w.WriteHeader(http.StatusOK)
	_, _ = io.CopyN(c.w, f, st.Size())
}

func isWebSocket(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

func headerHasToken(h http.Header, key, tok string) bool {
	for _, v := range h.Values(key) {
		for _, p := range bytes.Split([]byte(v), []byte(",")) {
			if bytes.EqualFold(bytes.TrimSpace(p), []byte(tok)) {
				return true
			}
		}
	}
	return false
}

// The daemon's follow loop (docs/daytona.md#follow-logs): it reads the
// log in chunks while there is data, otherwise sleeps followTail between
// reads, and once followCloseReads reads in a row came back empty (about
// a second) it closes the stream if the command has exited. A client that
// waits for that close after a command ends waits about a second; the
// emulator keeps that cost visible instead of closing at once.
const (
	followTail       = 20 * time.Millisecond
	followCloseReads = 50
)

// HoldFollowClose keeps the log follows of a session's commands open after
// the commands exit, until release is called: a client that waits for the
// daemon's close (instead of recognising the end by itself) then waits
// until the test releases it. It reports false if the session is unknown.
func (s *Server) HoldFollowClose(sandboxID, sessionID string) (release func(), ok bool) {
	s.init()
	s.mu.Lock()
	sb := s.sandboxes[sandboxID]
	s.mu.Unlock()
	if sb == nil {
		return nil, false
	}
	sb.tb.mu.Lock()
	ss := sb.tb.sessions[sessionID]
	sb.tb.mu.Unlock()
	if ss == nil {
		return nil, false
	}
	set := func(v bool) {
		ss.mu.Lock()
		ss.closeHeld = v
		ss.mu.Unlock()
	}
	set(true)
	return func() { set(false) }, true
}

// logTail reads a command log from offset 0 as it grows.
type logTail struct {
	ss     *session
	cm     *command
	f      *os.File
	offset int64
	empty  int // reads in a row that found nothing new
}

// next returns the next chunk (≤ followChunk bytes), or done=true once
// the command finished, everything was read and the close delay passed
// (at once when the session was deleted); it blocks while waiting.
func (t *logTail) next(ctx context.Context, done <-chan struct{}) (chunk []byte, finished bool, err error) {
	for {
		t.ss.mu.Lock()
		size := t.cm.size
		exited := t.cm.exitCode != nil
		t.ss.mu.Unlock()
		if t.offset < size {
			n := size - t.offset
			if n > followChunk {
				n = followChunk
			}
			buf := make([]byte, n)
			m, err := t.f.ReadAt(buf, t.offset)
			if m == 0 && err != nil {
				return nil, false, err
			}
			t.offset += int64(m)
			t.empty = 0
			return buf[:m], false, nil
		}
		t.ss.mu.Lock()
		held, killed := t.ss.closeHeld, t.ss.killing
		t.ss.mu.Unlock()
		// A deleted session's follows end once what is left was delivered
		// above. A shell that died on its own ends nothing: its commands
		// never exit, and the daemon keeps their follows open.
		gone := t.ss.exited
		select {
		case <-gone:
			if killed {
				return nil, true, nil
			}
			gone = nil
		default:
		}
		if exited && t.empty >= followCloseReads && !held {
			return nil, true, nil
		}
		tm := time.NewTimer(followTail)
		select {
		case <-tm.C:
			t.empty++
		case <-ctx.Done():
			tm.Stop()
			return nil, false, ctx.Err()
		case <-done:
			tm.Stop()
			return nil, false, errClosed
		case <-gone:
			tm.Stop()
		}
	}
}

func (c *call) followWS(ss *session, cm *command, mode outputMode) {
	f, err := os.Open(cm.logPath)
	if err != nil {
		writeToolboxError(c.w, c.r, http.StatusNotFound, "log file not found")
		return
	}
	defer f.Close()
	conn, err := acceptWS(c)
	if err != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go discardReads(ctx, conn, cancel)
	fault := c.fault
	if fault != nil && fault.WSSilent {
		select {
		case <-ctx.Done():
		case <-c.s.done:
		}
		_ = conn.CloseNow()
		return
	}
	ws := &wsSender{conn: conn, fault: fault, closing: c.s.done}
	tail := &logTail{ss: ss, cm: cm, f: f}
	var st *stripper
	if mode == modeStripped {
		st = &stripper{}
	}
	var held []byte // WSDropFinal: the newest chunk is only sent once another follows
	dropFinal := fault != nil && fault.WSDropFinal
	for {
		chunk, finished, err := tail.next(ctx, c.s.done)
		if err != nil {
			if ctx.Err() == nil {
				_ = conn.Close(websocket.StatusInternalError, "read error")
			}
			_ = conn.CloseNow()
			return
		}
		if finished {
			if !dropFinal && len(held) > 0 {
				if !ws.send(ctx, held) {
					return
				}
			}
			_ = conn.Close(websocket.StatusNormalClosure, "")
			return
		}
		if st != nil {
			chunk = st.feed(chunk)
			if len(chunk) == 0 {
				continue
			}
		}
		if dropFinal {
			prev := held
			held = chunk
			if prev == nil {
				continue
			}
			chunk = prev
		}
		if !ws.send(ctx, chunk) {
			return
		}
	}
}

// wsSender writes binary frames and applies the WSClose fault.
type wsSender struct {
	conn    *websocket.Conn
	fault   *Fault
	closing <-chan struct{} // the server is closing
	sent    int
}

// send writes p; false if the connection is gone (or was cut by a fault).
func (w *wsSender) send(ctx context.Context, p []byte) bool {
	if f := w.fault; f != nil && f.WSClose {
		left := f.WSCloseAfterBytes - w.sent
		if left <= 0 {
			_ = w.conn.CloseNow()
			return false
		}
		if len(p) >= left {
			_ = w.conn.Write(ctx, websocket.MessageBinary, p[:left])
			w.sent += left
			_ = w.conn.CloseNow()
			return false
		}
	}
	if f := w.fault; f != nil && f.WSStall && w.sent+len(p) > f.WSStallAfterBytes {
		if left := f.WSStallAfterBytes - w.sent; left > 0 {
			_ = w.conn.Write(ctx, websocket.MessageBinary, p[:left])
			w.sent += left
		}
		select { // until the client closes the connection
		case <-ctx.Done():
		case <-w.closing:
		}
		_ = w.conn.CloseNow()
		return false
	}
	if err := w.conn.Write(ctx, websocket.MessageBinary, p); err != nil {
		_ = w.conn.CloseNow()
		return false
	}
	w.sent += len(p)
	return true
}

func acceptWS(c *call) (*websocket.Conn, error) {
	opts := &websocket.AcceptOptions{InsecureSkipVerify: true, CompressionMode: websocket.CompressionDisabled}
	for _, p := range bytes.Split([]byte(c.r.Header.Get("Sec-WebSocket-Protocol")), []byte(",")) {
		if p = bytes.TrimSpace(p); len(p) > 0 {
			opts.Subprotocols = append(opts.Subprotocols, string(p))
		}
	}
	conn, err := websocket.Accept(c.w, c.r, opts)
	if err != nil {
		return nil, err
	}
	if f := c.fault; f != nil && f.WSClose && f.WSCloseAfterBytes <= 0 {
		_ = conn.CloseNow()
		return nil, errClosed
	}
	return conn, nil
}

// discardReads reads and ignores client frames (answering pings) until the
// connection ends, then cancels.
func discardReads(ctx context.Context, conn *websocket.Conn, cancel context.CancelFunc) {
	defer cancel()
	for {
		if _, _, err := conn.Read(ctx); err != nil {
			return
		}
	}
}

// followHTTP is the runner's chunked-HTTP fallback: markers stripped.
func (c *call) followHTTP(ss *session, cm *command) {
	f, err := os.Open(cm.logPath)
	if err != nil {
		writeToolboxError(c.w, c.r, http.StatusNotFound, "log file not found")
		return
	}
	defer f.Close()
	c.w.Header().Set("Content-Type", "application/octet-stream")
	c.w.WriteHeader(http.StatusOK)
	fl, _ := c.w.(http.Flusher)
	tail := &logTail{ss: ss, cm: cm, f: f}
	st := &stripper{}
	for {
		chunk, finished, err := tail.next(c.ctx(), c.s.done)
		if err != nil || finished {
			return
		}
		if b := st.feed(chunk); len(b) > 0 {
			if _, err := c.w.Write(b); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
	}
}
