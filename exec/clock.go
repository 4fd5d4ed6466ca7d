package exec

import (
	"context"
	"time"
)

// Clock is the time source of a Runner. Every wait and bound of the execute
// path (read bounds, the 15 s silent-socket switch, the 1 s polling
// interval, the command deadline, durations) comes from it, so tests drive hour-long commands with a fake clock
// (exectest.FakeClock) instead of sleeping.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer of a Clock.
type Timer interface {
	// C delivers the fire time once.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// withBound returns a child of ctx that is cancelled with cause when the
// clock says d has passed (d <= 0: no bound). The helper goroutine ends as
// soon as the returned cancel is called, so no goroutine outlives its use.
func withBound(ctx context.Context, clk Clock, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancelCause(ctx)
	if d <= 0 {
		return cctx, func() { cancel(context.Canceled) }
	}
	t := clk.NewTimer(d)
	done := make(chan struct{})
	go func() {
		defer t.Stop()
		select {
		case <-t.C():
			cancel(cause)
		case <-cctx.Done():
		case <-done:
		}
	}()
	return cctx, func() {
		select {
		case <-done:
		default:
			close(done)
		}
		cancel(context.Canceled)
	}
}

// sleep waits d on the clock, or until ctx ends (then it returns false).
func sleep(ctx context.Context, clk Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}
