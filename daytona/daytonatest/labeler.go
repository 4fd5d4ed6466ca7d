package daytonatest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// LabelerCost is what the daemon's session labeler charges: it is a bash
// loop (`while IFS= read -r line; do printf …; done`) per stream, so every
// line and every byte of a session command's output costs shell time
// before it reaches the log (docs/emulator.md#labeler-cost).
type LabelerCost struct {
	PerLine time.Duration
	PerByte time.Duration
}

// DaemonLabelerCost is the v0.190.0 daemon's labeler as measured with a
// plain HTTP client: about 3.1 µs per line plus 0.15 µs per byte (5.4 MB/s
// for 100-column lines, about 240,000 lines/s for `seq`).
var DaemonLabelerCost = LabelerCost{PerLine: 3100 * time.Nanosecond, PerByte: 150 * time.Nanosecond}

// pacer holds a labeler to its cost: due is when the work charged so far
// is done.
type pacer struct {
	cost LabelerCost
	due  time.Time
	done <-chan struct{}
}

// charge waits until lines and n bytes more would have been labeled.
func (p *pacer) charge(lines, n int) {
	if p.cost == (LabelerCost{}) {
		return
	}
	now := time.Now()
	if p.due.Before(now) {
		p.due = now
	}
	p.due = p.due.Add(time.Duration(lines)*p.cost.PerLine + time.Duration(n)*p.cost.PerByte)
	if d := time.Until(p.due); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-p.done:
		}
		t.Stop()
	}
}

// dropNUL removes NUL bytes in place: bash's `read` drops them, so the
// daemon's session logs never hold one (the one-shot path keeps them).
func dropNUL(b []byte) []byte {
	if bytes.IndexByte(b, 0) < 0 {
		return b
	}
	out := b[:0]
	for _, c := range b {
		if c != 0 {
			out = append(out, c)
		}
	}
	return out
}

// Output markers of the daemon's session logs (docs/daytona.md#session-exec).
var (
	markerStdout = []byte{1, 1, 1}
	markerStderr = []byte{2, 2, 2}
)

// label reads one of the shell's output streams and writes marked lines.
// One buffer serves the whole stream: each read lands after the partial
// line the last one left, the complete lines are recorded (copied into
// the command's log record) and the partial line moves to the front. A
// buffer appended to and resliced instead allocated anew at about every
// read, megabytes for a large output, on the machine the worker and the
// host share with the emulator.
func (ss *session) label(r io.Reader, stderr bool) {
	const (
		readSize = 64 * 1024 // a pipe's default capacity: one read drains it
		// maxLine is the longest partial line held back until its
		// newline: the daemon's `read` shows a line only once it is
		// whole, so a partial line stays invisible; past this bound the
		// emulator passes it on in pieces to keep its memory bounded.
		maxLine = 16 << 20
	)
	buf := make([]byte, 0, 2*readSize)
	var lines [][]byte
	pace := pacer{cost: ss.s.cfg.cost, done: ss.s.done}
	for {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		// Every complete line of this read is recorded under one lock, one
		// log write and one notification per command: a line at a time
		// made the emulator, not the worker, the bottleneck of big outputs.
		lines = lines[:0]
		rest := buf
		size := 0
		for {
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				break
			}
			lines = append(lines, dropNUL(rest[:i]))
			size += i + 1
			rest = rest[i+1:]
		}
		if len(lines) > 0 {
			pace.charge(len(lines), size)
			ss.lines(stderr, lines)
		}
		if len(rest) > maxLine {
			pace.charge(0, len(rest))
			// A very long line: pass it on in pieces (each with its marker,
			// so the streams stay intact), keeping a tail in case the
			// sentinel is split.
			cut := len(rest) - len(ss.token) - 32
			ss.line(stderr, dropNUL(rest[:cut]), false)
			rest = rest[cut:]
		}
		if err != nil {
			if len(rest) > 0 {
				pace.charge(1, len(rest))
				ss.line(stderr, dropNUL(rest), true)
			}
			return
		}
		// What is left (at most maxLine) moves to the front; the buffer
		// grows while a long line is held so that a whole read fits.
		// and shrinks back once it is through.
		switch {
		case cap(buf)-len(rest) < readSize:
			buf = append(make([]byte, 0, 2*cap(buf)), rest...)
			continue
		case cap(buf) > 4*readSize && len(rest) < readSize:
			buf = append(make([]byte, 0, 2*readSize), rest...)
			continue
		}
		buf = buf[:copy(buf, rest)]
	}
}

// line records one output line (complete) or piece (not complete).
func (ss *session) line(stderr bool, b []byte, complete bool) {
	ss.mu.Lock()
	cm := ss.lineLocked(stderr, b, complete)
	if cm != nil {
		cm.flushLocked()
	}
	ss.mu.Unlock()
	ss.s.notify()
}

// lines records complete lines in order, flushing each command's log once.
func (ss *session) lines(stderr bool, bs [][]byte) {
	ss.mu.Lock()
	var touched []*command
	for _, b := range bs {
		if cm := ss.lineLocked(stderr, b, true); cm != nil && (len(touched) == 0 || touched[len(touched)-1] != cm) {
			touched = append(touched, cm)
		}
	}
	for _, cm := range touched {
		cm.flushLocked()
	}
	ss.mu.Unlock()
	ss.s.notify()
}

// sentinelTailMax is the longest text that may follow a sentinel: a colon
// and a signed 64-bit integer.
const sentinelTailMax = 1 + 20

// lineLocked attributes one line to the current command and buffers its log
// record; it returns that command (nil if none). ss.mu is held.
func (ss *session) lineLocked(stderr bool, b []byte, complete bool) *command {
	idx := &ss.outIdx
	if stderr {
		idx = &ss.errIdx
	}
	content := b
	sentinel := false
	rc := 0
	if *idx < len(ss.dispatched) && complete {
		// The sentinel ends the line, exactly: <token>:<cid>:<rc> on stdout,
		// <token>:<cid> on stderr. (An xtrace or verbose echo of the exec
		// line also contains the token, but never in this form.)
		// Only the line's tail can hold it (at most a colon and an int
		// after it), so only the tail is searched: a line of output costs
		// no search of its whole length and no allocation.
		want := ss.dispatched[*idx].sentinel
		from := max(0, len(b)-len(want)-sentinelTailMax)
		if i := bytes.LastIndex(b[from:], want); i >= 0 {
			i += from
			tail := string(b[i+len(want):])
			if stderr && tail == "" {
				content, sentinel = b[:i], true
			} else if code, ok := strings.CutPrefix(tail, ":"); ok && !stderr {
				if v, err := strconv.Atoi(code); err == nil {
					content, sentinel, rc = b[:i], true, v
				}
			}
		}
	}
	var owner *command
	if *idx < len(ss.dispatched) {
		cm := ss.dispatched[*idx]
		owner = cm
		if len(content) > 0 || (!sentinel && complete) {
			m := markerStdout
			if stderr {
				m = markerStderr
			}
			// Straight into the buffered record: the daemon labels what
			// bash writes without a copy per line.
			cm.pending = append(append(cm.pending, m...), content...)
			if complete {
				cm.pending = append(cm.pending, '\n')
			}
		}
		if sentinel {
			if stderr {
				cm.gotErr = true
			} else {
				cm.gotOut = true
				cm.rc = rc
			}
			*idx++
			if cm.gotOut && cm.gotErr {
				cm.completeLocked(cm.rc)
			}
		}
	}
	return owner
}

// appendLocked buffers a log record; flushLocked writes what is buffered
// (followers see it at their next tail read).
func (cm *command) appendLocked(p []byte) { cm.pending = append(cm.pending, p...) }

func (cm *command) flushLocked() {
	if len(cm.pending) == 0 {
		return
	}
	if cm.log != nil {
		n, _ := cm.log.Write(cm.pending)
		cm.size += int64(n)
	}
	cm.pending = cm.pending[:0]
}

func (cm *command) completeLocked(code int) {
	if cm.exitCode != nil {
		return
	}
	cm.flushLocked()
	cm.exitCode = &code
	if cm.log != nil {
		_ = cm.log.Close()
		cm.log = nil
	}
	if cm.logPath != "" {
		out, errp := cm.fifos(filepath.Dir(cm.logPath))
		_ = os.Remove(out)
		_ = os.Remove(errp)
	}
	close(cm.done)
}

// finish runs once the shell exited and its output drained. A session
// being deleted ends its commands that never completed (the shell's exit
// status for the one that ran, -1 for the rest) so their follows close. A
// shell that died on its own (killed, the OOM killer, an `exit` that
// escaped the command) leaves them as the daemon does: no exit code ever,
// and their follows stay open (docs/emulator.md#lost-sessions-and-dead-shells).
func (ss *session) finish(code int) {
	ss.mu.Lock()
	ss.dead = true
	ss.shellCode = code
	if ss.killing {
		first := true
		for _, cm := range ss.dispatched {
			if cm.exitCode != nil {
				continue
			}
			if first {
				cm.completeLocked(code)
				first = false
				continue
			}
			cm.completeLocked(-1)
		}
	}
	ss.mu.Unlock()
	_ = ss.inputW.Close()
	close(ss.exited)
	ss.s.notify()
}
