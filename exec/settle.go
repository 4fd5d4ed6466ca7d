package exec

import (
	"slices"
	"time"
)

// runTimes keeps the run times of a lease's latest session commands, as
// their end markers carried them (the shell's clock from just before the
// script to just after it), and the margin learned for what a command
// takes outside those readings, to time the next command's first log read
// (docs/exec.md#timed-first-read).
type runTimes struct {
	last [runTimeSamples]time.Duration
	n    int // samples held (≤ runTimeSamples)
	next int // where the next sample goes
	// margin: the dispatch reaching the shell, the subshell starting, the
	// markers reaching the log. It is learned from the first reads: a read
	// that found a command unfinished although the command ran no longer
	// than the read's lead over it shows the margin was short.
	margin time.Duration
}

// runTimeSamples is how many recent commands the estimate looks at: enough
// that one fast outlier or a few long builds do not decide it, few enough
// that a changed profile is learned within a handful of commands.
const runTimeSamples = 8

// settleMax divides short commands from long ones: a run time above it is
// a long command (a build, a test run), which the first read is not timed
// for, because live output would wait.
const settleMax = 100 * time.Millisecond

// The margin starts at marginFloor, grows past a miss's lead by marginStep
// and shrinks by marginDecay after each read that found the command
// finished, never above marginMax.
const (
	marginFloor = time.Millisecond
	marginStep  = 2 * time.Millisecond
	marginDecay = time.Millisecond / 2
	marginMax   = settleMax / 2
)

func (r *runTimes) add(d time.Duration) {
	r.last[r.next] = d
	r.next = (r.next + 1) % runTimeSamples
	r.n = min(r.n+1, runTimeSamples)
}

// learn adjusts the margin after a first read made lead after the
// dispatch was sent, of a command that ran run: found says whether the
// read found it finished. A miss means the command's time outside its run
// exceeded lead-run, so the margin grows past that; a hit lets it shrink a
// little, so a margin grown on a slow moment comes back down.
func (r *runTimes) learn(lead, run time.Duration, found bool) {
	if found {
		r.margin = max(marginFloor, r.margin-marginDecay)
		return
	}
	r.margin = min(marginMax, max(r.margin, marginFloor, lead-run+marginStep))
}

// settle is how long after its dispatch was sent a command's first log
// read should reach the daemon, or 0 for at once. While at least half of
// the recent commands were short, it is the run time that 80 % of those
// short ones stayed within, plus the margin; a lease whose commands are
// mostly long ones is not timed.
//
// Why a high share and not the fastest run: a read that comes too early
// costs a call and then the follow, whose first read is at its connection,
// as early as the follow would have been anyway; a read that comes late
// costs the wait. Run times spread by several milliseconds even on a quiet
// machine and by tens under load, so the fastest would miss most
// commands, while 80 % keeps the common short command at two calls. Long
// commands are left out of the share: they miss whatever the wait, and one
// of them (the setup of a workspace) must not keep the next short ones
// untimed.
func (r *runTimes) settle() time.Duration {
	short := make([]time.Duration, 0, runTimeSamples)
	for _, d := range r.last[:r.n] {
		if d <= settleMax {
			short = append(short, d)
		}
	}
	if len(short) == 0 || 2*len(short) < r.n {
		return 0
	}
	slices.Sort(short)
	return short[settleRank(len(short))] + max(r.margin, marginFloor)
}

// settleRank is the index, in n sorted run times, of the one 80 % of them
// stay within (the largest while there are fewer than 5).
func settleRank(n int) int { return (8*n+9)/10 - 1 }

// noteRunTime records a finished command's run time on its lease and, if
// its first read was a snapshot made lead after the dispatch was sent,
// what that read found.
func (r *Runner) noteRunTime(l *lease, run time.Duration, probed bool, lead time.Duration, found bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.runs.add(run)
	if probed {
		l.runs.learn(lead, run, found)
	}
}

// settleFor is the lease's current settle (0 when not timing first reads).
func (r *Runner) settleFor(l *lease) time.Duration {
	if !r.timeFirstRead {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return l.runs.settle()
}
