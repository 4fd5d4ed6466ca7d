package exec

import "time"

// SetLastRun makes the lease remember req's command line as having run
// for run and printed printed bytes, so a test picks the plan's path
// without depending on how fast this machine ran the command.
func SetLastRun(r *Runner, leaseKey string, req Request, run time.Duration, printed int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.leases[leaseKey]
	if l == nil {
		l = r.newLeaseLocked(leaseKey)
	}
	l.hist.note(keyOf(r, req), run, 0, printed, printed/64, false)
}

// LastRun reports what the lease remembers of req's command line.
func LastRun(r *Runner, leaseKey string, req Request) (run time.Duration, printed int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.leases[leaseKey]
	if l == nil || l.hist.lines[keyOf(r, req)] == nil {
		return 0, 0, false
	}
	lr := l.hist.lines[keyOf(r, req)]
	return lr.run, lr.printed, true
}

// SetRTT sets the lease's measured round trip.
func SetRTT(r *Runner, leaseKey string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.leases[leaseKey]
	if l == nil {
		l = r.newLeaseLocked(leaseKey)
	}
	l.hist.rtt = d
}

// RTT reports the lease's measured round trip.
func RTT(r *Runner, leaseKey string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.leases[leaseKey]; l != nil {
		return l.hist.rtt
	}
	return 0
}

// DaemonExitTick is the daemon's synchronous exec tick.
const DaemonExitTick = daemonExitTick

// The plan's tunables, for tests that build a history around them.
const (
	LiveWithin = liveWithin
	FilesFrom  = filesFrom
	MarkMargin = markMargin
)

// keyOf is the key of req's command line on r (without a stdin file).
func keyOf(r *Runner, req Request) uint64 {
	return r.commandKey(buildScript(req.Command, req.Args, req.Cwd, req.Env, ""))
}
