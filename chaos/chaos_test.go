package chaos

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The defaults come from CHAOS_N and CHAOS_SEED when set: scripts/test.sh
// sets them for the whole `go test ./...` run (a flag would reach every
// package), 200 schedules from a seed derived from the commit.
var (
	flagN        = flag.Int("chaos.n", envInt("CHAOS_N", 20), "number of fault schedules TestSchedules runs (default $CHAOS_N or 20)")
	flagSeed     = flag.Int64("chaos.seed", int64(envInt("CHAOS_SEED", 1)), "seed of the first schedule; schedule i uses seed+i (default $CHAOS_SEED or 1)")
	flagParallel = flag.Int("chaos.parallel", 8, "schedules run at once")
	flagShrink   = flag.Int("chaos.shrink", 40, "re-runs spent shrinking a failing schedule (0: none)")
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// regressions are the schedules that once found a bug, run every time:
// the seed's whole schedule, and the shrunk schedule the failure printed,
// kept literally because a change to newSchedule changes what a seed draws.
var regressions = []struct {
	seed   int64
	why    string
	shrunk schedule
}{
	{1078, "disk full during a syncIn extraction left a truncated file in the target (fixed in sync/syncin.go)",
		schedule{Seed: 1078, Reuse: true, TransitionDelay: 40 * time.Millisecond,
			Steps: []step{{Op: opAcquire}, {Op: opDiskFull, Slot: 1}, {Op: opSyncIn, Files: 1, Size: 300}}}},
	{50113202270080, "a hung directory export (20 s) and a hung scratch removal (30 s) answered a syncOut after the host's 50 s (fixed in sync/sandbox.go: cleanup ends 10 s past the call's deadline)",
		schedule{Seed: 50113202270080, TransitionDelay: 5 * time.Millisecond,
			Faults: []faultSpec{
				{Kind: "perform-hang", Method: "POST", Route: "/process/execute", Skip: 3, Times: 1},
				{Kind: "hang", Method: "POST", Route: "/process/execute", Skip: 3, Times: 1},
			},
			Steps: []step{{Op: opAcquire}, {Op: opSyncOut, Files: 4}}}},
}

// TestSchedules runs -chaos.n schedules from -chaos.seed on (CI passes a
// seed derived from the commit), -chaos.parallel at a time, and reports
// each failing seed with the command that replays it and its shrunk
// schedule, then the counts of faults injected and invariants checked.
func TestSchedules(t *testing.T) {
	t.Parallel()
	seeds := make([]int64, *flagN)
	for i := range seeds {
		seeds[i] = *flagSeed + int64(i)
	}
	t.Logf("seeds %d..%d (replay one: go test ./chaos -run TestSchedules -chaos.seed=N -chaos.n=1 -v)", *flagSeed, *flagSeed+int64(*flagN)-1)
	runSeeds(t, seeds)
}

// TestRegressionSeeds replays every schedule that once found a bug.
// Everything runs at once, beside TestSchedules: a hang costs a bound's
// wait, not CPU.
func TestRegressionSeeds(t *testing.T) {
	t.Parallel()
	var seeds []int64
	for _, reg := range regressions {
		seeds = append(seeds, reg.seed)
		t.Run(fmt.Sprintf("shrunk-%d", reg.seed), func(t *testing.T) {
			t.Parallel()
			if out := runSchedule(t, reg.shrunk); len(out.violations) > 0 {
				t.Errorf("%s: %d violation(s) again:\n  %s\n%s", reg.why, len(out.violations), strings.Join(out.violations, "\n  "), reg.shrunk)
			}
		})
	}
	t.Run("seeds", func(t *testing.T) {
		t.Parallel()
		runSeeds(t, seeds)
	})
}

func runSeeds(t *testing.T, seeds []int64) {
	start := time.Now()
	var mu sync.Mutex
	faults, checks := map[string]int{}, map[string]int{}
	var failed []int64
	done := 0
	sem := make(chan struct{}, max(1, *flagParallel))
	var wg sync.WaitGroup
	for _, seed := range seeds {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s := newSchedule(seed)
			t0 := time.Now()
			out := runSchedule(t, s)
			if testing.Verbose() {
				t.Logf("seed %d: %d steps, %d faults, %s", seed, len(s.Steps), len(s.Faults), time.Since(t0).Round(time.Millisecond))
			}
			mu.Lock()
			defer mu.Unlock()
			for k, v := range out.faults {
				faults[k] += v
			}
			for k, v := range out.checks {
				checks[k] += v
			}
			done++
			if done%100 == 0 || done == len(seeds) {
				writeStats(done, len(failed), time.Since(start), faults, checks)
			}
			if len(out.violations) > 0 {
				failed = append(failed, seed)
				t.Errorf("seed %d: %d violation(s):\n  %s\n%s", seed, len(out.violations), strings.Join(out.violations, "\n  "), s)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("%d schedules in %s (%.1f schedules/s), %d failed", len(seeds), elapsed.Round(time.Millisecond), float64(len(seeds))/elapsed.Seconds(), len(failed))
	t.Logf("faults injected: %s", counts(faults))
	t.Logf("invariants checked: %s", counts(checks))
	slices.Sort(failed)
	for _, seed := range failed {
		shrunk := shrink(t, newSchedule(seed), *flagShrink)
		t.Errorf("replay seed %d: go test ./chaos -run TestSchedules -chaos.seed=%d -chaos.n=1 -v\nshrunk schedule (still fails):\n%s", seed, seed, shrunk)
	}
	writeStats(len(seeds), len(failed), elapsed, faults, checks)
}

// writeStats writes the running totals to $CHAOS_STATS, if set: a long run
// reports as it goes.
func writeStats(done, failed int, elapsed time.Duration, faults, checks map[string]int) {
	if path := os.Getenv("CHAOS_STATS"); path != "" {
		_ = os.WriteFile(path, fmt.Appendf(nil, "schedules %d\nfailed %d\nelapsed %s\nfaults %s\nchecks %s\n",
			done, failed, elapsed.Round(time.Millisecond), counts(faults), counts(checks)), 0o644)
	}
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}

// shrink drops steps, then faults, one at a time while the schedule still
// fails, within budget re-runs. A schedule's timing is not deterministic,
// so the result is a smaller schedule that failed once, not a proof.
func shrink(t *testing.T, s schedule, budget int) schedule {
	fails := func(c schedule) bool {
		if budget <= 0 {
			return false
		}
		budget--
		return len(runSchedule(t, c).violations) > 0
	}
	for i := len(s.Steps) - 1; i >= 1 && budget > 0; i-- { // step 0 is the first acquire
		c := s
		c.Steps = slices.Delete(slices.Clone(s.Steps), i, i+1)
		if fails(c) {
			s = c
		}
	}
	for i := len(s.Faults) - 1; i >= 0 && budget > 0; i-- {
		c := s
		c.Faults = slices.Delete(slices.Clone(s.Faults), i, i+1)
		if fails(c) {
			s = c
		}
	}
	return s
}
