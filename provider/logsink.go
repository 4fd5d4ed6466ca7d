package provider

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/daytonaworker/daytona-worker/rpc"
)

// Live output batching: the first bytes after a quiet spell go to the host
// at once (latency), and whatever follows within coalesceWindow is sent as
// one execute.log chunk (throughput: a chatty command produces thousands of
// small socket frames, and the host parses every notification).
const (
	coalesceWindow = 2 * time.Millisecond
	coalesceMax    = 256 << 10
)

// logSink forwards live output as execute.log notifications, in order per
// stream and across streams. close must be called before the execute's
// response: it sends what is buffered and stops the sink.
type logSink struct {
	ctx  context.Context
	send func(ctx context.Context, stream rpc.LogStream, text string) error

	mu      sync.Mutex
	pending []logPiece
	size    int
	timer   *time.Timer
	last    time.Time
	closed  bool
	failed  bool
}

type logPiece struct {
	stream rpc.LogStream
	text   strings.Builder
}

func newLogSink(ctx context.Context) *logSink {
	return &logSink{ctx: ctx, send: rpc.ExecuteLog}
}

// write is the exec.Sink.
func (s *logSink) write(stream, text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.failed {
		return nil
	}
	st := rpc.LogStream(stream)
	if n := len(s.pending); n > 0 && s.pending[n-1].stream == st {
		s.pending[n-1].text.WriteString(text)
	} else {
		s.pending = append(s.pending, logPiece{stream: st})
		s.pending[len(s.pending)-1].text.WriteString(text)
	}
	s.size += len(text)
	switch {
	case s.size >= coalesceMax, time.Since(s.last) > coalesceWindow && s.timer == nil:
		s.flushLocked() // quiet until now, or a full batch: send at once
	case s.timer == nil:
		s.timer = time.AfterFunc(coalesceWindow, s.tick)
	}
	return nil
}

func (s *logSink) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer = nil
	if !s.closed {
		s.flushLocked()
	}
}

// flushLocked sends the buffer; s.mu is held, so sends stay in order and
// never overlap close.
func (s *logSink) flushLocked() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	for i := range s.pending {
		if s.failed {
			break
		}
		if err := s.send(s.ctx, s.pending[i].stream, s.pending[i].text.String()); err != nil {
			s.failed = true // the host will not take more (answered, budget spent)
		}
	}
	s.pending, s.size = s.pending[:0], 0
	s.last = time.Now()
}

// close sends what is buffered; later writes are dropped.
func (s *logSink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.flushLocked()
		s.closed = true
	}
}
