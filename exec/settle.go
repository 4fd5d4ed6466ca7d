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
	// byCommand holds the latest run times of each command line the lease
	// ran (the script's hash; at most commandHistories, the least recently
	// used one goes first). Agents repeat their commands (the status of
	// the repository, the tests), and a command's own run times foretell
	// its next one far better than the lease's mix of every command, where
	// one slow setup step kept the reads of the short ones late.
	byCommand map[uint64]*commandRuns
	uses      uint64 // counts add calls: commandRuns.used
}

// commandRuns is the run-time history of one command line on a lease.
type commandRuns struct {
	last [commandRunSamples]time.Duration
	n    int
	next int
	used uint64
	// large: the command line's last run left a large log (largeLog).
	large bool
	// kept: the bytes of text each stream (stdout, stderr) kept on the
	// command line's last run, which the next run reserves
	// (output.reserve).
	kept [2]int
}

// commandRunSamples and commandHistories bound what a lease keeps per
// command: a few runs of each of its recent command lines, 64 × 56 bytes
// and a map entry at most.
const (
	commandRunSamples = 4
	commandHistories  = 64
)

// runTimeSamples is how many recent commands the estimate looks at: enough
// that one fast outlier or a few long builds do not decide it, few enough
// that a changed profile is learned within a handful of commands.
const runTimeSamples = 8

// settleMax divides short commands from long ones: a run time above it is
// a long command (a build, a test run), which the first read is not timed
// for, because live output would wait. A command line's own runs count as
// short up to commandSettleMax: they foretell its next run well, and a
// command that prints a lot (a listing, a large file) can run 100-250 ms
// (an 8 MiB cat on a loaded machine), where a follow would replay its log
// in 1 KiB frames and send them all live; a quarter of a second before
// its first output shows matters to no one.
const (
	settleMax        = 100 * time.Millisecond
	commandSettleMax = 250 * time.Millisecond
)

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

// addCommand records d for the lease and for the command line key, and
// whether the run left a large log.
func (r *runTimes) addCommand(key uint64, d time.Duration, large bool) {
	r.add(d)
	r.addToCommand(key, d).large = large
}

// addToCommand records d for the command line key only.
func (r *runTimes) addToCommand(key uint64, d time.Duration) *commandRuns {
	c := r.command(key)
	c.last[c.next] = d
	c.next = (c.next + 1) % commandRunSamples
	c.n = min(c.n+1, commandRunSamples)
	return c
}

// command returns the history of the command line key, made (in place of
// the least recently used one when commandHistories are held) if the
// lease has none, and marks it used.
func (r *runTimes) command(key uint64) *commandRuns {
	r.uses++
	c := r.byCommand[key]
	if c == nil {
		if r.byCommand == nil {
			r.byCommand = map[uint64]*commandRuns{}
		}
		if len(r.byCommand) >= commandHistories {
			var oldest uint64
			for k, h := range r.byCommand {
				if c == nil || h.used < c.used {
					oldest, c = k, h
				}
			}
			delete(r.byCommand, oldest)
		}
		c = &commandRuns{}
		r.byCommand[key] = c
	}
	c.used = r.uses
	return c
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

// settleCommand is how long after its dispatch was sent the first log
// read of the command line key should reach the daemon, or 0 for at once,
// and when the slowest of the recent short commands would have ended (the
// second read). While at least half of the recent commands were short, it
// is the run time that 80 % of those short ones stayed within, plus the
// margin; commands that are mostly long ones are not timed. The recent
// commands are the command line's own last 4 once it ran on the lease (of
// which the second largest counts: the runs of one command spread little,
// and one slow run, a cold cache or a loaded machine, must not hold back
// its next four reads), the lease's last 8 otherwise. Short is at most
// commandSettleMax for the command line's own runs, settleMax for the
// lease's.
//
// Why a high share and not the fastest run: a read that comes too early
// costs a call and then the second read or the follow; a read that comes
// late costs the wait. Run times spread by several milliseconds even on a
// quiet machine and by tens under load, so the fastest would miss most
// commands, while 80 % keeps the common short command at two calls. Long
// commands are left out of the share: they miss whatever the wait, and one
// of them (the setup of a workspace) must not keep the next short ones
// untimed.
//
// A command line whose last run left a large log is read at its slowest
// recent run instead (on a close network its exit is watched with status
// reads instead, watchBulk): a snapshot that comes before its end carries
// megabytes that the snapshot after the end carries again, which costs far
// more than waiting for the slowest run. Through the real host at 40 ms
// per request, such a miss made an 8 MiB `cat` take 390-660 ms where one
// read took 190-260.
func (r *runTimes) settleCommand(key uint64) (settle, slowest time.Duration) {
	if c := r.byCommand[key]; c != nil && c.n > 0 {
		rank := commandRank
		if c.large {
			rank = slowestRank
		}
		return r.settleOf(c.last[:c.n], rank, commandSettleMax)
	}
	return r.settleOf(r.last[:r.n], settleRank, settleMax)
}

// commandRank is the index, in n sorted run times of one command line, of
// the one that counts: the largest of up to 3, the second largest of 4.
func commandRank(n int) int { return n - 1 - n/commandRunSamples }

// slowestRank is the index of the largest of n sorted run times.
func slowestRank(n int) int { return n - 1 }

func (r *runTimes) settleOf(samples []time.Duration, rank func(int) int, limit time.Duration) (settle, slowest time.Duration) {
	short := shortRuns(samples, limit)
	if short == nil {
		return 0, 0
	}
	return r.withMargin(short[rank(len(short))]), r.withMargin(short[len(short)-1])
}

// withMargin is when a command that ran d would have ended, counted from
// its dispatch's sending: d and the learned margin (at least marginFloor).
func (r *runTimes) withMargin(d time.Duration) time.Duration {
	return d + max(r.margin, marginFloor)
}

// shortRuns returns the samples of at most limit, sorted, or nil unless
// they are at least half of all samples.
func shortRuns(samples []time.Duration, limit time.Duration) []time.Duration {
	short := make([]time.Duration, 0, runTimeSamples)
	for _, d := range samples {
		if d <= limit {
			short = append(short, d)
		}
	}
	if len(short) == 0 || 2*len(short) < len(samples) {
		return nil
	}
	slices.Sort(short)
	return short
}

// settleRank is the index, in n sorted run times, of the one 80 % of them
// stay within (the largest while there are fewer than 5).
func settleRank(n int) int { return (8*n+9)/10 - 1 }

// noteRunTime records a finished command's run time on its lease and, if
// its first read was a snapshot made lead after the dispatch was sent,
// what that read found.
func (r *Runner) noteRunTime(l *lease, key uint64, run time.Duration, large, probed bool, lead time.Duration, found bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.runs.addCommand(key, run, large)
	if probed {
		l.runs.learn(lead, run, found)
	}
}

// settleFor is the lease's current settle for the command line key and
// when a second read follows a first that came too early (both 0 when not
// timing first reads; docs/exec.md#timed-first-read).
func (r *Runner) settleFor(l *lease, key uint64) (settle, second time.Duration) {
	if !r.timeFirstRead {
		return 0, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	settle, slowest := l.runs.settleCommand(key)
	return settle, max(slowest, settle+secondReadGap)
}

// secondReadGap is the least time between a timed first read and the
// second one.
const secondReadGap = 2 * time.Millisecond

// bulkRuns reports, for a command line whose last run left a large log
// and whose runs are short (commandSettleMax), when the fastest and the
// slowest of its recent runs would have ended, margin included.
func (r *runTimes) bulkRuns(key uint64) (fastest, slowest time.Duration, ok bool) {
	c := r.byCommand[key]
	if c == nil || !c.large {
		return 0, 0, false
	}
	short := shortRuns(c.last[:c.n], commandSettleMax)
	if short == nil {
		return 0, 0, false
	}
	return r.withMargin(short[0]), r.withMargin(short[len(short)-1]), true
}

// bulkFor is bulkRuns under the runner's lock, when first reads are timed.
func (r *Runner) bulkFor(l *lease, key uint64) (fastest, slowest time.Duration, ok bool) {
	if !r.timeFirstRead {
		return 0, 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return l.runs.bulkRuns(key)
}

// keptFor is what the command line key kept of each stream on its last
// run on the lease (zero for a command line it has not run, or without a
// lease): the next run reserves that much (output.reserve).
func (r *Runner) keptFor(l *lease, key uint64) [2]int {
	if l == nil {
		return [2]int{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := l.runs.byCommand[key]; c != nil {
		return c.kept
	}
	return [2]int{}
}

// noteKept records what a run of the command line key kept of each
// stream, on either path. A command line without a history gets one only
// for output worth reserving, so the many small one-shot commands do not
// push the run times of the session's command lines out.
func (r *Runner) noteKept(l *lease, key uint64, kept [2]int) {
	if l == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.runs.byCommand[key] == nil && max(kept[0], kept[1]) < reserveMin {
		return
	}
	l.runs.command(key).kept = kept
}
