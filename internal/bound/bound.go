// Package bound runs one provider call under a liveness bound and names the
// call when the bound, not the caller, cut it off. provider and cleanup
// bound every Daytona call they make that could hang through it.
package bound

import (
	"context"
	"fmt"
	"time"
)

// TimeoutError is SandboxLivenessTimeoutError (docs/behavior.md#liveness-bound):
// a bounded provider call did not answer in time.
type TimeoutError struct {
	Op    string
	Bound time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("Daytona sandbox liveness call %q did not respond within %d ms; the sandbox connection is unresponsive.",
		e.Op, e.Bound.Milliseconds())
}

// Is makes errors.Is(err, context.DeadlineExceeded) true, so callers that
// only ask "did time run out" need not know this type.
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// Call runs fn under a bound d. d <= 0 means unbounded. When the bound (not
// the caller's own deadline or cancellation) cuts the call off, the error is
// a *TimeoutError naming op.
func Call(ctx context.Context, op string, d time.Duration, fn func(context.Context) error) error {
	if d <= 0 {
		return fn(ctx)
	}
	bctx, cancel := context.WithTimeoutCause(ctx, d, &TimeoutError{Op: op, Bound: d})
	defer cancel()
	err := fn(bctx)
	if err != nil && ctx.Err() == nil && bctx.Err() != nil {
		return context.Cause(bctx)
	}
	return err
}
