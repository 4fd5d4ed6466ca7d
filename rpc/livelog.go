package rpc

import (
	"context"
	"strings"
	"sync"
	"time"
)

// Live output batching (docs/host.md#live-output-to-the-host). The first
// bytes after a quiet spell go to the host at once (a prompt, a progress
// line) when they are few (under burstMax). What follows, and bulk output
// after a quiet spell, is gathered while a send is under way and for
// coalesceWindow after it (after its first bytes, for bulk after a quiet
// spell), and goes out as one execute.log chunk: the host parses every
// notification and then the whole result again, so a command printing a
// lot costs it less in fewer, larger chunks, and nothing waits on the
// host's pipe while the command's output is read. Chunks still pending
// when the result is ready are dropped (close(true)): their bytes are in
// it. Bulk output mostly comes at a command's end (a log snapshot made
// just before the end markers were written), so holding it for the window
// mostly means the host parses it once, in the result.
const (
	coalesceWindow = 50 * time.Millisecond
	// burstMax: the first bytes after a quiet spell go at once only while
	// fewer than this.
	burstMax = 64 << 10
	// pendingMax: a batch this large goes out without waiting for the
	// window (ExecuteLog cuts it to the host's chunk limit), and
	// beyond it a write waits for the send under way (the command's
	// output is then read no faster than the host takes it). Large, so
	// that fast output still gathered at the command's end is dropped
	// rather than sent.
	pendingMax = 8 << 20
)

// LiveLog forwards live output as execute.log notifications, in order per
// stream and across streams, one send at a time. close must be called
// before the execute's response: it waits for the send under way, and
// sends or drops what is left.
type LiveLog struct {
	ctx    context.Context
	send   func(ctx context.Context, stream LogStream, text string) error
	window time.Duration

	mu       sync.Mutex
	idle     sync.Cond // a send ended
	pending  []logPiece
	size     int
	timer    *time.Timer
	timerSeq uint64    // tells a stale tick from the current one
	last     time.Time // the last send ended (or bulk after a quiet spell came)
	sending  bool
	closed   bool
	failed   bool
}

type logPiece struct {
	stream LogStream
	text   strings.Builder
}

// NewLiveLog returns the live output of the request ctx serves; it sends
// through ExecuteLog.
func NewLiveLog(ctx context.Context) *LiveLog {
	s := &LiveLog{ctx: ctx, send: ExecuteLog, window: coalesceWindow}
	s.idle.L = &s.mu
	return s
}

// Write takes output of a stream ("stdout" or "stderr"): it is the
// command runner's sink (exec.Sink).
func (s *LiveLog) Write(stream, text string) error {
	s.mu.Lock()
	for s.sending && s.size >= pendingMax && !s.closed && !s.failed {
		s.idle.Wait()
	}
	if s.closed || s.failed {
		s.mu.Unlock()
		return nil
	}
	st := LogStream(stream)
	if n := len(s.pending); n == 0 || s.pending[n-1].stream != st {
		s.pending = append(s.pending, logPiece{stream: st})
	}
	s.pending[len(s.pending)-1].text.WriteString(text)
	s.size += len(text)
	if !s.sending && s.timer == nil && time.Since(s.last) > s.window {
		if s.size < burstMax {
			// Quiet until now: these few bytes go at once.
			b := s.takeLocked()
			s.mu.Unlock()
			s.sendBatch(b)
			return nil
		}
		s.last = time.Now() // bulk after a quiet spell: the window starts here
	}
	s.nextLocked()
	s.mu.Unlock()
	return nil
}

// takeLocked removes the pending batch and marks a send under way.
func (s *LiveLog) takeLocked() []logPiece {
	s.stopTimerLocked()
	b := s.pending
	s.pending, s.size = nil, 0
	s.sending = true
	return b
}

func (s *LiveLog) stopTimerLocked() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// sendBatch sends b without holding s.mu (writes keep gathering), then
// schedules what gathered meanwhile.
func (s *LiveLog) sendBatch(b []logPiece) {
	failed := false
	for i := range b {
		if err := s.send(s.ctx, b[i].stream, b[i].text.String()); err != nil {
			failed = true // the host will not take more (answered, budget spent)
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sending = false
	s.last = time.Now()
	if failed {
		s.failed = true
		s.pending, s.size = nil, 0
	}
	s.idle.Broadcast()
	s.nextLocked()
}

// nextLocked schedules the pending batch: at once when it is full,
// otherwise a window after the last send (or after bulk output that ended
// a quiet spell).
func (s *LiveLog) nextLocked() {
	if s.closed || s.failed || s.sending || len(s.pending) == 0 {
		return
	}
	if s.size >= pendingMax {
		b := s.takeLocked()
		go s.sendBatch(b)
		return
	}
	if s.timer == nil {
		s.timerSeq++
		seq := s.timerSeq
		s.timer = time.AfterFunc(max(0, s.window-time.Since(s.last)), func() { s.tick(seq) })
	}
}

func (s *LiveLog) tick(seq uint64) {
	s.mu.Lock()
	if seq != s.timerSeq || s.timer == nil {
		s.mu.Unlock()
		return
	}
	s.timer = nil
	if s.closed || s.failed || s.sending || len(s.pending) == 0 {
		s.mu.Unlock()
		return
	}
	b := s.takeLocked()
	s.mu.Unlock()
	s.sendBatch(b)
}

// Close ends the live output: it waits for the send under way, then sends what
// is pending, or drops it when drop is set (the result that follows holds
// every byte of it). Later writes are dropped.
func (s *LiveLog) Close(drop bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.stopTimerLocked()
	if drop {
		s.pending, s.size = nil, 0
	}
	for s.sending {
		s.idle.Wait()
	}
	if len(s.pending) == 0 || s.failed {
		s.mu.Unlock()
		return
	}
	b := s.takeLocked()
	s.mu.Unlock()
	s.sendBatch(b)
}
