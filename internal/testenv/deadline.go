package testenv

import (
	"context"
	"sync"
)

// Deadline is a host call context whose deadline passes when the test calls
// Expire, not after a wall-clock interval: a hang case then ends at the
// point the test chose (the hang has begun), however slowly a loaded machine
// got there. Its Err is context.DeadlineExceeded, as a real deadline's
// would be, and so is that of every context derived from it.
type Deadline struct {
	context.Context
	done chan struct{}
	once sync.Once
}

// NewDeadline is a Deadline under parent's values (and nothing else of it).
func NewDeadline(parent context.Context) *Deadline {
	return &Deadline{Context: parent, done: make(chan struct{})}
}

// Expire makes the deadline pass; later calls do nothing.
func (c *Deadline) Expire() { c.once.Do(func() { close(c.done) }) }

// Done is closed once Expire was called.
func (c *Deadline) Done() <-chan struct{} { return c.done }

// Err is context.DeadlineExceeded once Expire was called, else nil.
func (c *Deadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
