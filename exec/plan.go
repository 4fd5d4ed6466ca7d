package exec

import (
	"time"
)

// The plan of a session command (docs/exec.md#the-plan). planFor is a
// pure function of what the runner knows when the command is dispatched:
// the round trip to the toolbox and what the command line did on its last
// run on the lease. One loop (observe, session.go) carries the plan out.
// Everything the plan decides is reported in the result's metadata
// (logStream), so the bench counts each path.

// Tunables of the session path. These, with DefaultOutputCap,
// cleanupBound, shellDiedTail and probeEveryMax, are the package's own
// (docs/exec.md#tunables says what each rests on); the reference's
// constants (PollInterval, FastPathBound, SilentSocketLimit,
// exitRetryDelays) and Daytona's (daemonExitTick) are not ours to tune.
const (
	// liveWithin is how long a command's output may wait before it must
	// go live: a command whose last run took longer is followed at once,
	// and a command still running this long after its dispatch is
	// followed (or, on the files path, watched by status reads). A person
	// watching a run notices a quarter of a second; a command this short
	// is over before its output could be read twice at 100 ms.
	liveWithin = 250 * time.Millisecond
	// filesFrom is the output of a short command line's last run from
	// which its next run writes its streams to files in the sandbox and
	// the worker downloads them (the files path), instead of passing them
	// through the daemon's labeler: the labeler costs about 0.15 µs a byte
	// and 3.1 µs a line (docs/emulator.md#labeler-cost), so 128 KiB of
	// output costs it 20 ms or more, what a download's round trip and
	// file removal cost at internet distances.
	filesFrom = 128 << 10
	// markMargin is what a command takes outside its shell-clock run time
	// before its end can be read: the dispatch reaching the shell, the
	// wrapper's first steps and the markers passing the labeler into the
	// log. A look is made this long after the command's last run would
	// have ended.
	markMargin = 5 * time.Millisecond
	// commandHistories bounds the command lines a lease remembers (the
	// least recently used one goes first): 64 × ~40 bytes.
	commandHistories = 64
)

// Daytona's constants, measured on the v0.190.0 daemon: a synchronous
// session exec checks the command's exit-code file when it has written the
// command and then every 50 ms, so its answer comes on such a tick
// (docs/daytona.md#session-exec); the labelers that write a command's
// output into its log take 3.1 µs a line and 0.15 µs a byte
// (docs/emulator.md#labeler-cost).
const (
	daemonExitTick = 50 * time.Millisecond
	labelerPerLine = 3100 * time.Nanosecond
	labelerPerByte = 150 * time.Nanosecond
)

// labelerTime is what the daemon's labelers take for a run's output.
func (r *lastRun) labelerTime() time.Duration {
	return time.Duration(r.lines)*labelerPerLine + time.Duration(r.printed)*labelerPerByte
}

// lastRun is what a command line did on its last run on the lease.
type lastRun struct {
	run time.Duration // by the shell's clock (the end marker)
	// seen is when, counted from the dispatch's sending, the worker had
	// the run's end (0: not known): the run plus what it cost around it
	// (the daemon's wrapper, the labeler, the network), as measured.
	seen    time.Duration
	printed int64 // bytes of output, both streams
	lines   int64 // newlines among them
	// garbled: the daemon's log split the output at a label run.
	garbled bool
	used    uint64 // recency (history.uses when last noted)
}

// plan is how one session command is run and observed.
type plan struct {
	// sync: the exec is synchronous; its answer carries the log and the
	// exit code (one call). Not answered within liveWithin, the command is
	// looked up and followed.
	sync bool
	// files: the command's streams go to files in the sandbox, fetched
	// with one download once it ended (no live output).
	files bool
	// follow: follow the log at once (a long command).
	follow bool
	// firstLook is when, counted from the dispatch's sending, the first
	// look (a log read, or the download) is made; each later look comes
	// when the time since the dispatch has doubled, while that is within
	// liveWithin.
	firstLook time.Duration
}

// planFor plans a command from the measured round trip (0 = not measured)
// and the command line's last run (nil = none on this lease).
//
//   - A command line that printed filesFrom or more and whose run was
//     mostly the daemon's labeler (its labeler time at least half the run)
//     takes the files path: the labeler held it back, a file would not.
//     So does one whose output the log garbled (a label run in it): only
//     the files carry it exact.
//   - One that ran longer than liveWithin otherwise is followed at once:
//     its output must go live.
//   - Otherwise the exec is synchronous when the daemon's exit tick costs
//     less than a second round trip: the answer comes one round trip plus
//     the run rounded up to the next tick, where an exec and a log read take
//     two round trips or the run plus one, whichever is longer.
//   - An asynchronous command is looked at when its last run's end was
//     seen (or, not known, when its shell-clock run plus markMargin would
//     have ended), not before the dispatch answered.
func planFor(rtt time.Duration, last *lastRun) plan {
	run, look := time.Duration(0), markMargin
	if last != nil {
		run, look = last.run, last.run+markMargin
		if last.seen > 0 {
			look = last.seen
		}
		if last.garbled || last.printed >= filesFrom && 2*last.labelerTime() >= run {
			return plan{files: true, firstLook: max(rtt, min(look, run+markMargin))}
		}
		if run > liveWithin {
			return plan{follow: true}
		}
	}
	p := plan{firstLook: max(rtt, look)}
	if tick := ceilTick(run + markMargin); rtt > 0 && tick < max(rtt, run) {
		p.sync = true
	}
	return p
}

// ceilTick rounds d up to the daemon's next exit tick after the first
// check (which comes before any command could have ended).
func ceilTick(d time.Duration) time.Duration {
	n := max(1, (d+daemonExitTick-1)/daemonExitTick)
	return n * daemonExitTick
}

// nextLook is when the look after one made at `at` comes: a quarter
// later (at least a millisecond), so a look that just missed the end is
// followed by one that overshoots it by at most a quarter; ok is false
// once that is past liveWithin.
func nextLook(at time.Duration) (time.Duration, bool) {
	next := at + max(at/4, time.Millisecond)
	return next, next <= liveWithin
}

// history is what a lease remembers of its command lines (by the hash of
// the command script without its stdin file), and the round trip to its
// toolbox.
type history struct {
	lines map[uint64]*lastRun
	uses  uint64
	// rtt is the duration of the lease's latest call that was a bare round
	// trip (an asynchronous exec, a log or status read, a session create).
	rtt time.Duration
}

// last returns the command line's last run, or nil.
func (h *history) last(key uint64) *lastRun {
	r := h.lines[key]
	if r == nil {
		return nil
	}
	h.uses++
	r.used = h.uses
	c := *r
	return &c
}

// note records a command line's run.
func (h *history) note(key uint64, run, seen time.Duration, printed, lines int64, garbled bool) {
	if h.lines == nil {
		h.lines = map[uint64]*lastRun{}
	}
	if _, ok := h.lines[key]; !ok && len(h.lines) >= commandHistories {
		var oldest uint64
		first := true
		for k, r := range h.lines {
			if first || r.used < h.lines[oldest].used {
				oldest, first = k, false
			}
		}
		delete(h.lines, oldest)
	}
	h.uses++
	h.lines[key] = &lastRun{run: run, seen: seen, printed: printed, lines: lines, garbled: garbled, used: h.uses}
}
