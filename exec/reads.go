package exec

import (
	"context"
	"time"
)

// The reads of a session command before a follow (docs/exec.md#session-path):
// the first snapshot, timed from the command's recent runs, the second and
// later reads of a command slower than those, and the exit watch of a
// command that prints a lot.

// earlyReads are the reads before a follow (docs/exec.md#session-path);
// done when they ended the command.
func (x *run) earlyReads() (res Result, done bool, err error) {
	// Already-exited fast path: one log snapshot over the connection the
	// dispatch just used, bounded like the reference's first status read
	// (500 ms and the command deadline). Both end markers in it prove the
	// output complete and carry the exit status: done, in two calls. A
	// failed or incomplete read only means: follow (what it brought is kept
	// and goes live, the follow skips it by byte offset).
	//
	// Follow first: when the dispatch came back faster than followFirst
	// the snapshot would reach the daemon before bash has even sourced
	// its profiles, so it could only add a third call; the follow is
	// opened at once (dispatch + follow), and its first frame with the
	// markers ends the command as the snapshot would have.
	//
	// Timed first read: once the lease's recent commands told how long a
	// short one runs (this command line's own runs when it ran before),
	// the snapshot is sent when 80 % of the recent short ones would have
	// ended, plus a learned margin (settle.go; counted from
	// the dispatch's sending, so a network round trip longer than that
	// adds no wait), at any round trip: a short command then mostly costs
	// two calls over pooled connections, and the daemon's 20 ms log tail,
	// which a follow opened too early waits for, is not waited for.
	//
	// Second read: when the timed read came before the end, a second
	// read is made when the slowest of those recent short commands would
	// have ended (at least 2 ms after the first), if that is still to
	// come: a command a little slower than usual then costs one more call
	// over a pooled connection, not a WebSocket of its own and the
	// daemon's 20 ms tail. Then, while the command may still be a short
	// one, more reads at doubling gaps; status reads once the log is
	// large (laterReads), and for a large log an exit watch of up to
	// 1.3 s (watchLargeLog). A command slower than that is followed.
	//
	// Bulk: a command line whose last run left a large log, on a close
	// network, has its exit watched with status reads instead (watchBulk).
	fastest, slowest, bulk := x.r.bulkFor(x.lease, x.key)
	if bulk && x.closeNetwork() {
		return x.watchBulk(fastest, slowest)
	}
	x.bulk = bulk
	settle, second := x.r.settleFor(x.lease, x.key)
	if settle > 0 {
		if wait := x.sent.Add(settle).Sub(x.r.clock.Now()); wait > 0 && !sleep(x.cmdCtx, x.r.clock, wait) {
			return x.stop()
		}
	}
	if settle <= 0 && x.closeNetwork() {
		return Result{}, false, nil // follow first
	}
	x.probed, x.lead = true, x.r.clock.Now().Sub(x.sent)
	if res, done, err = x.fastPath(); done {
		return res, done, err
	}
	x.missed = true
	if settle > 0 {
		if res, done, err = x.laterReads(second); done {
			return res, done, err
		}
		return x.watchLargeLog()
	}
	return Result{}, false, nil
}

// stop ends the reads with the result of a command whose context ended.
func (x *run) stop() (Result, bool, error) {
	res, err := x.stopped(context.Cause(x.cmdCtx))
	return res, true, err
}

// closeNetwork reports whether the dispatch came back within
// Options.FollowFirstBelow: the daemon is a few milliseconds away.
func (x *run) closeNetwork() bool {
	return x.r.followFirst > 0 && x.dispatchRTT < x.r.followFirst
}

// laterReads makes the reads after a timed first read that came before
// the command's end (docs/exec.md#later-reads): the second read, when the
// slowest of the recent short runs would have ended (second after the
// dispatch was sent), then reads laterReadGap, 2×, 4× … that after the
// second, while that is at most twice second or laterReadsLast after the
// dispatch, whichever is later. A read whose time passed
// while the one before it was under way is skipped, so a slow network adds
// no read that would go out right after the last. Once the log holds
// largeLog bytes, or from the start when the command line's last run left
// that much (statusReads), each of these reads is a status read (exitRead):
// every snapshot brings the whole log again, so the log is read once more
// only after the exit. Each of these reads costs one call over a pooled
// connection, where the follow costs a new connection (a TLS handshake on
// the real API) and waits for the daemon's 20 ms log tail; a command
// still running at the last of them is most likely a long one, and the
// follow then carries its live output.
func (x *run) laterReads(second time.Duration) (res Result, done bool, err error) {
	for i, at := 0, second; at <= max(2*second, laterReadsLast); at, i = second+laterReadGap<<i, i+1 {
		wait := x.sent.Add(at).Sub(x.r.clock.Now())
		if wait <= 0 {
			continue // its time passed while the read before it was under way
		}
		if !sleep(x.cmdCtx, x.r.clock, wait) {
			return x.stop()
		}
		if x.statusReads() {
			if res, done, err = x.exitRead(); done {
				return res, done, err
			}
			continue
		}
		if res, done, err = x.fastPath(); done {
			return res, done, err
		}
	}
	return Result{}, false, nil
}

// watchLargeLog watches the exit of a command still running after its
// later reads whose log is already large, or whose command line's last
// run left a large one (statusReads; docs/exec.md#later-reads):
// status reads at the catch-up read's gaps (exitWatch, doubling up to
// exitWatchMax: seven reads over 1.3 s), then one snapshot after the
// exit. A follow would replay the whole log from its start in the
// daemon's 1 KiB frames, behind a new connection, while what the reads
// brought is live already; on a loaded sandbox a listing or a file that
// usually takes 20 ms can take three times that. A command still running
// after the watch is a long one, and the follow carries it.
func (x *run) watchLargeLog() (res Result, done bool, err error) {
	if !x.statusReads() {
		return Result{}, false, nil
	}
	for wait := exitWatch; wait <= exitWatchMax; wait *= 2 {
		if !sleep(x.cmdCtx, x.r.clock, wait) {
			return x.stop()
		}
		if res, done, err = x.exitRead(); done {
			return res, done, err
		}
	}
	return Result{}, false, nil
}

// watchBulk watches the exit of a command line whose last run left a
// large log, on a close network (docs/exec.md#bulk-commands): status reads
// from when its fastest recent run would have ended, every bulkWatchGap
// until its slowest would have, then at doubling gaps until twice that;
// after the exit, one snapshot (exitRead). A snapshot of such a command
// carries megabytes each time, a status read a few bytes, so its end is
// seen within a few milliseconds, where a timed snapshot waits for the
// second slowest of its runs. Not done: the follow. On a far network
// every status read is a round trip, and the timed snapshot stays.
func (x *run) watchBulk(fastest, slowest time.Duration) (res Result, done bool, err error) {
	gap := bulkWatchGap
	for at := fastest; at <= 2*slowest; at += gap {
		if at > slowest {
			gap *= 2
		}
		wait := x.sent.Add(at).Sub(x.r.clock.Now())
		if wait <= 0 {
			continue // as in laterReads
		}
		if !sleep(x.cmdCtx, x.r.clock, wait) {
			return x.stop()
		}
		if res, done, err = x.exitRead(); done {
			return res, done, err
		}
	}
	return Result{}, false, nil
}

// bulkWatchGap is the gap between watchBulk's status reads until the
// slowest recent run would have ended; it doubles after that.
const bulkWatchGap = 4 * time.Millisecond

// exitRead is a read of a command whose log is large: a status
// read, and after the exit one snapshot for the rest of the output (the
// daemon records the exit only after the log holds all of it), the
// reference's fast path. done when the command's result is in; a failed
// read (err nil, not done) changes nothing: the next read, or the follow,
// takes over.
func (x *run) exitRead() (res Result, done bool, err error) {
	code, rerr := x.statusRead(x.cmdCtx, FastPathBound, errFastPathBound)
	if x.cmdCtx.Err() != nil {
		return x.stop()
	}
	if rerr != nil || code == nil {
		return Result{}, false, nil
	}
	return x.fastPath()
}

// statusReads reports whether the reads before a follow are status reads:
// the log holds largeLog bytes already, or the command line's last run
// left that much (a far network's timed snapshot of a `cat` that came
// early may have brought less, and each later snapshot, or the follow's
// replay, would carry the growing log again).
func (x *run) statusReads() bool {
	return x.bulk || x.out.received() >= largeLog
}

// laterReadGap is how long after the second read the next one comes
// (then twice, four times … as long after it). From largeLog bytes of
// log on, the second and later reads are status reads.
//
// laterReadsLast is how long after the dispatch the later reads go on at
// least. A command line like `echo hi` runs in 20–25 ms on daytona-sim,
// so twice its slowest run ends the reads at about 50 ms, and a loaded
// sandbox runs it three or four times slower now and then: it was then
// followed, a WebSocket on a new connection (a TLS handshake on the real
// API) and the daemon's 20 ms log tail, for a command that ended a few
// milliseconds later. Each read until then is one call over a pooled
// connection, and what it brings goes live.
const (
	laterReadGap   = 4 * time.Millisecond
	laterReadsLast = 100 * time.Millisecond
	largeLog       = 256 << 10
)

// fastPath reads one snapshot; done when it held both end markers (the
// result) or the command's context ended. Otherwise what it brought goes
// live.
func (x *run) fastPath() (res Result, done bool, err error) {
	_ = x.rawSnapshot(x.cmdCtx, FastPathBound, errFastPathBound)
	if x.cmdCtx.Err() != nil {
		return x.stop()
	}
	if code, ok := x.out.ended(); ok {
		x.observed = "fast_path"
		res, err = x.complete(code)
		return res, true, err
	}
	x.out.publish()
	return Result{}, false, nil
}
