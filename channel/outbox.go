package channel

import "sync"

// Outbox bounds: one take is at most one data frame; the reader waits
// while this much is not yet forwarded.
const (
	maxTake   = MaxDuplexChunk
	maxOutbox = 4 << 20
)

// outbox is the output between the socket reader and the frame sender.
type outbox struct {
	mu              sync.Mutex
	buf             []byte
	done            bool
	code            *int
	transportClosed bool
	wake, space     chan struct{}
}

func newOutbox() *outbox {
	return &outbox{wake: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// put appends output, waiting while the outbox is full.
func (o *outbox) put(b []byte) {
	if len(b) == 0 {
		return
	}
	o.mu.Lock()
	for len(o.buf) >= maxOutbox {
		o.mu.Unlock()
		<-o.space
		o.mu.Lock()
	}
	o.buf = append(o.buf, b...)
	o.mu.Unlock()
	signal(o.wake)
}

// close records how the terminal ended; take drains what is left first.
func (o *outbox) close(code *int, transportClosed bool) {
	o.mu.Lock()
	o.done, o.code, o.transportClosed = true, code, transportClosed
	o.mu.Unlock()
	signal(o.wake)
}

// take returns the next output (at most maxTake bytes), waiting for some;
// false once the outbox is closed and empty.
func (o *outbox) take() ([]byte, bool) {
	for {
		o.mu.Lock()
		if n := min(len(o.buf), maxTake); n > 0 {
			b := append([]byte(nil), o.buf[:n]...)
			o.buf = o.buf[n:]
			if len(o.buf) == 0 {
				o.buf = nil
			}
			o.mu.Unlock()
			signal(o.space)
			return b, true
		}
		done := o.done
		o.mu.Unlock()
		if done {
			return nil, false
		}
		<-o.wake
	}
}
