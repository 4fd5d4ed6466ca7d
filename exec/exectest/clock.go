// Package exectest holds test helpers for package exec: a fake clock whose
// timers fire only when the test advances it.
package exectest

import (
	"context"
	"sync"
	"time"

	cmdexec "github.com/daytonaworker/daytona-worker/exec"
)

// FakeClock is a manual clock: timers fire when Advance moves the time past
// their deadline. Tests wait for the code under test to arm a timer
// (AwaitTimer) before advancing, so nothing depends on real time.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  map[*fakeTimer]struct{}
	changed chan struct{}
}

var _ cmdexec.Clock = (*FakeClock)(nil)

// NewFakeClock starts at a fixed instant.
func NewFakeClock() *FakeClock {
	return &FakeClock{
		now:     time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		timers:  map[*fakeTimer]struct{}{},
		changed: make(chan struct{}),
	}
}

type fakeTimer struct {
	c        *FakeClock
	ch       chan time.Time
	deadline time.Time
	d        time.Duration
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, ok := t.c.timers[t]
	delete(t.c.timers, t)
	if ok {
		t.c.notifyLocked()
	}
	return ok
}

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer arms a timer that fires once the clock reaches now+d.
func (c *FakeClock) NewTimer(d time.Duration) cmdexec.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1), deadline: c.now.Add(d), d: d}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers[t] = struct{}{}
	c.notifyLocked()
	return t
}

func (c *FakeClock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Advance moves the clock forward and fires every timer that is due.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.deadline.After(c.now) {
			delete(c.timers, t)
			t.ch <- c.now
		}
	}
	c.notifyLocked()
}

// Pending reports the durations (as armed) of the timers not yet fired.
func (c *FakeClock) Pending() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Duration, 0, len(c.timers))
	for t := range c.timers {
		out = append(out, t.d)
	}
	return out
}

// AwaitTimer blocks until a timer armed with exactly duration d is pending.
func (c *FakeClock) AwaitTimer(ctx context.Context, d time.Duration) error {
	return c.Await(ctx, func() bool {
		for t := range c.timers {
			if t.d == d {
				return true
			}
		}
		return false
	})
}

// AwaitFreshTimer blocks until a timer of duration d armed at the current
// fake time is pending (e.g. a watchdog re-armed after activity, not the
// one armed before it).
func (c *FakeClock) AwaitFreshTimer(ctx context.Context, d time.Duration) error {
	return c.Await(ctx, func() bool {
		for t := range c.timers {
			if t.d == d && t.deadline.Equal(c.now.Add(d)) {
				return true
			}
		}
		return false
	})
}

// AwaitNoTimers blocks until no timer is pending (everything the code
// under test armed was stopped or fired).
func (c *FakeClock) AwaitNoTimers(ctx context.Context) error {
	return c.Await(ctx, func() bool { return len(c.timers) == 0 })
}

// AwaitAnyTimer blocks until a timer armed with one of ds is pending and
// returns that duration (the first of ds that matches).
func (c *FakeClock) AwaitAnyTimer(ctx context.Context, ds ...time.Duration) (time.Duration, error) {
	var found time.Duration
	err := c.Await(ctx, func() bool {
		for _, d := range ds {
			for t := range c.timers {
				if t.d == d {
					found = d
					return true
				}
			}
		}
		return false
	})
	return found, err
}

// Await blocks until cond (evaluated under the clock's lock, so it must not
// call the clock) holds, re-checking after every timer change.
func (c *FakeClock) Await(ctx context.Context, cond func() bool) error {
	for {
		c.mu.Lock()
		ok := cond()
		ch := c.changed
		c.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
