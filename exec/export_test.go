package exec

import "time"

// LearnedRunTimes reports how many run times the runner holds for the
// lease (tests check that the end markers taught it one).
func LearnedRunTimes(r *Runner, leaseKey string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.leases[leaseKey]; l != nil {
		return l.runs.n
	}
	return 0
}

// SetRunTimes replaces what the runner learned for the lease, so a test's
// settle does not depend on how fast this machine ran a command.
func SetRunTimes(r *Runner, leaseKey string, ds ...time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.leases[leaseKey]
	l.runs = runTimes{}
	for _, d := range ds {
		l.runs.add(d)
	}
}

// The catch-up read's knobs (docs/exec.md#catch-up-read), for tests that
// drive the fake clock through the exit watch.
const (
	CatchUpAfter = catchUpAfter
	ExitWatch    = exitWatch
	ExitWatchMax = exitWatchMax
)

// SetCommandRunTimes replaces what the runner learned of req's command
// line on the lease.
func SetCommandRunTimes(r *Runner, leaseKey string, req Request, ds ...time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.leases[leaseKey]
	key := keyOf(r, req)
	delete(l.runs.byCommand, key)
	for _, d := range ds {
		l.runs.addToCommand(key, d)
	}
}

// MarkLargeLog notes on the lease that req's last run left a large log
// (after SetCommandRunTimes, which forgets it).
func MarkLargeLog(r *Runner, leaseKey string, req Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leases[leaseKey].runs.byCommand[keyOf(r, req)].large = true
}

// LargeLogLearned reports whether the lease noted that req's last run
// left a large log.
func LargeLogLearned(r *Runner, leaseKey string, req Request) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.leases[leaseKey].runs.byCommand[keyOf(r, req)]
	return c != nil && c.large
}

// SecondReadGap is the least time between a timed first read and the
// second one.
const SecondReadGap = secondReadGap

// LaterReadGap, LaterReadsLast and LargeLog shape the reads after the
// second one.
const (
	LaterReadGap   = laterReadGap
	LaterReadsLast = laterReadsLast
	LargeLog       = largeLog
	BulkWatchGap   = bulkWatchGap
)

// Kept reports what the lease noted req's command line kept of each
// stream on its last run (what its next run reserves).
func Kept(r *Runner, leaseKey string, req Request) [2]int {
	r.mu.Lock()
	l := r.leases[leaseKey]
	r.mu.Unlock()
	return r.keptFor(l, keyOf(r, req))
}

// ReserveMin is the least text a run reserves.
const ReserveMin = reserveMin

// keyOf is the key of req's command line on r (without a stdin file).
func keyOf(r *Runner, req Request) uint64 {
	return r.commandKey(buildScript(req.Command, req.Args, req.Cwd, req.Env, ""))
}
