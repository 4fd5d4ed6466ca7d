package sync

import (
	"context"
	"testing"
	"time"
)

// TestCleanupEndsSoonAfterTheCallersDeadline: cleanup survives the
// caller's cancel, but ends CleanupOverrun past its deadline however much
// budget it asked for, so cleanups after a timed-out transfer cannot hold
// the answer past the host's wait (chaos regression 50113202270080: a hung
// export and a hung scratch removal answered after 50 s).
func TestCleanupEndsSoonAfterTheCallersDeadline(t *testing.T) {
	check := func(name string, ctx context.Context, budget time.Duration, want func(before, after time.Time) (lo, hi time.Time)) {
		t.Helper()
		before := time.Now()
		cctx, cancel := cleanupContext(ctx, budget)
		defer cancel()
		after := time.Now()
		if err := cctx.Err(); err != nil {
			t.Fatalf("%s: cleanup context done at once: %v", name, err)
		}
		dl, ok := cctx.Deadline()
		if !ok {
			t.Fatalf("%s: cleanup context has no deadline", name)
		}
		lo, hi := want(before, after)
		if dl.Before(lo) || dl.After(hi) {
			t.Errorf("%s: deadline %v after the call, want between %v and %v", name, dl.Sub(before), lo.Sub(before), hi.Sub(before))
		}
	}
	budget := func(d time.Duration) func(before, after time.Time) (time.Time, time.Time) {
		return func(before, after time.Time) (time.Time, time.Time) { return before.Add(d), after.Add(d) }
	}
	check("no deadline", context.Background(), cleanupBudget, budget(cleanupBudget))

	far, cancelFar := context.WithTimeout(context.Background(), time.Hour)
	defer cancelFar()
	check("far deadline", far, cleanupBudget, budget(cleanupBudget))

	dl := time.Now().Add(-time.Second) // the transfer already timed out
	past, cancelPast := context.WithDeadline(context.Background(), dl)
	defer cancelPast()
	at := func(before, after time.Time) (time.Time, time.Time) {
		return dl.Add(CleanupOverrun), dl.Add(CleanupOverrun)
	}
	check("past deadline", past, cleanupBudget, at)
	check("short budget", past, time.Second, budget(time.Second))

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	check("cancelled caller", cancelled, cleanupBudget, budget(cleanupBudget))
}
