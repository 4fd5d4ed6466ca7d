package exec

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
)

// Paths a session command can take (metadata logStream; docs/exec.md#paths).
const (
	pathSync     = "sync"     // a synchronous exec answered with the end
	pathRead     = "read"     // a log read found the end markers
	pathFiles    = "files"    // a download of the output files found them
	pathFollowed = "followed" // the follow carried the command to its end
	pathPolled   = "polled"   // the status and snapshot poll did
	pathOneShot  = "one_shot" // the one-shot execute (BypassSession)
)

// observe carries out the plan: the looks (plan.firstLook, then each time
// the time since the dispatch has doubled, within liveWithin), then the
// follow, with the poll as its fallback. The files path is never followed
// (its output is not in the log): past its looks its exit is polled.
func (x *run) observe() (Result, error) {
	if x.answered {
		if code, ok := x.out.ended(); ok {
			x.observed = pathSync
			return x.complete(code)
		}
	}
	if !x.plan.follow && !x.plan.sync {
		for at, ok := x.plan.firstLook, true; ok; at, ok = nextLook(at) {
			x.first = at == x.plan.firstLook
			if wait := x.sent.Add(at).Sub(x.r.clock.Now()); wait > 0 && !sleep(x.cmdCtx, x.r.clock, wait) {
				return x.stopped(context.Cause(x.cmdCtx))
			}
			if res, done, err := x.look(); done {
				return res, err
			}
		}
	}
	if x.plan.files {
		return x.poll()
	}
	x.observed = pathFollowed
	for attempt := 0; attempt < maxStreamAttempts; attempt++ {
		end, code, cause := x.follow()
		switch end {
		case endExited:
			// A look sent a round trip before the markers arrived would
			// have found them.
			x.seen = x.r.clock.Now().Sub(x.sent) - x.r.rttOf(x.lease)
			return x.complete(code)
		case endStopped:
			return x.stopped(cause)
		case endIdle:
			x.observing = true
			return x.poll()
		case endRejected:
			continue
		case endClean:
			x.observing = true
			c, err := x.exitAfterClose()
			if err != nil {
				return x.readFailed(err)
			}
			if c != nil {
				return x.complete(*c)
			}
		}
	}
	return x.poll()
}

// look reads the command's output once, bounded like the reference's
// fast path (FastPathBound): the log, or on the files path the files.
// done when it held both end markers (the result) or the command's
// context ended; otherwise what it brought goes live (the log) and a
// failed read changes nothing.
func (x *run) look() (res Result, done bool, err error) {
	at := x.r.clock.Now().Sub(x.sent)
	_ = x.read(x.cmdCtx, FastPathBound, errFastPathBound)
	if x.cmdCtx.Err() != nil {
		res, err = x.stopped(context.Cause(x.cmdCtx))
		return res, true, err
	}
	if code, ok := x.out.ended(); ok {
		// A look sent then found the end. When it was the first look the
		// end may have come earlier: the next run's first look comes
		// halfway between this one and the shell-clock run, so the plan
		// does not stay as late as a first guess.
		x.seen = at
		if run, timed := x.out.runTime(); timed && x.first && run < at {
			x.seen = run + (at-run)/2
		}
		x.observed = pathRead
		if x.plan.files {
			x.observed = pathFiles
		}
		res, err = x.complete(code)
		return res, true, err
	}
	x.out.publish()
	return Result{}, false, nil
}

// download reads both output files of the files path into the result, in
// one call, bounded by d (boundCause). The files end with the markers
// once the command has ended; a file read before that is a prefix, and
// the next download's bytes are placed by offset. Files that were never
// made by a command that has exited (the wrapper fell back to the log)
// switch the command to the log.
func (x *run) download(parent context.Context, d time.Duration, boundCause error) error {
	started := x.r.clock.Now()
	rctx, cancel := withBound(parent, x.r.clock, d, boundCause)
	defer cancel()
	gen := x.out.nextGen()
	defer x.out.nextGen()
	x.out.fromFiles()
	bd, _, err := x.t.Client.Files.DownloadFiles(rctx, x.t.Sandbox, x.files[:])
	if err != nil {
		return x.readFailure(parent, rctx, err, started)
	}
	defer bd.Close()
	missing := 0
	for i := range x.files {
		f, err := bd.Next()
		if err != nil {
			return x.readFailure(parent, rctx, err, started)
		}
		if errors.Is(f.Err, daytona.ErrNotFound) {
			missing++
			continue
		}
		if _, err := io.Copy(&feeder{o: x.out, gen: gen, stream: i, quiet: true}, f); err != nil {
			return x.readFailure(parent, rctx, err, started)
		}
	}
	if missing == len(x.files) && x.exited {
		// Neither file exists after the exit: the wrapper could not make
		// them, and the output and markers are in the log.
		x.plan.files = false
		return x.rawSnapshot(parent, d, boundCause)
	}
	return nil
}

// read reads the output once, bounded by d: the log, or the files.
func (x *run) read(parent context.Context, d time.Duration, boundCause error) error {
	if x.plan.files {
		return x.download(parent, d, boundCause)
	}
	return x.rawSnapshot(parent, d, boundCause)
}

// feeder writes a byte stream into one stream of the output, at the
// offsets it reaches.
type feeder struct {
	o      *output
	gen    uint64
	stream int
	off    int64
	quiet  bool // feedQuiet: the caller decides what goes live
}

func (f *feeder) Write(p []byte) (int, error) {
	if f.quiet {
		f.o.feedQuiet(f.gen, f.stream, f.off, p)
	} else {
		f.o.feed(f.gen, f.stream, f.off, p)
	}
	f.off += int64(len(p))
	return len(p), nil
}

// removeFiles removes the files path's files after the execute answered.
func (x *run) removeFiles() {
	files := x.files
	x.r.background(x.ctx, x.lease, func(ctx context.Context) {
		for _, f := range files {
			_, _ = x.t.Client.Files.Delete(ctx, x.t.Sandbox, f, false)
		}
	})
}

// salvage reads what a files-path command wrote before it timed out or
// was stopped, best effort and within cleanupBound: a stopped command
// keeps the output it printed, as on the log path.
func (x *run) salvage() {
	if !x.plan.files || x.cmdID == "" || x.out.bothCapped() {
		return
	}
	_ = x.download(context.WithoutCancel(x.ctx), cleanupBound, errObservationBound)
}
