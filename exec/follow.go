package exec

import (
	"context"
	"sync"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
)

// streamEnd is how one follow connection ended.
type streamEnd int

const (
	endExited   streamEnd = iota // both end markers arrived
	endClean                     // the server closed normally
	endRejected                  // the connection failed
	endIdle                      // silent for SilentSocketLimit
	endStopped                   // command deadline, lease cancel, caller
)

// follow runs one follow connection with the silent-socket watchdog, and
// returns how it ended. Both end markers in its frames end it at once
// (endExited): the daemon closes the socket only about a second after the
// exit. The reference's early status reads (25/50/100/200 ms into each
// connection) are not made: with the markers they could only tell what
// the next frame tells, at the cost of up to four calls per command; a
// follow that closed without the markers (frames lost) is settled by the
// status read after the close, a silent socket (a dead shell's follow
// never closes) by the 15 s switch and its check of the shell.
// The connection has ended when follow returns; its late callbacks are
// ignored.
func (x *run) follow() (end streamEnd, code int, cause error) {
	gen := x.out.nextGen()
	actx, acancel := context.WithCancel(x.cmdCtx)
	activity := make(chan struct{}, 1)
	marked := make(chan struct{}, 1) // both end markers arrived
	done := make(chan error, 1)
	// Catch-up read (docs/exec.md#catch-up-read): the follow replays the
	// log from its first byte in frames of 1 KiB, so for a command that
	// prints megabytes it is the slow way to the end. Once it has
	// delivered catchUpAfter bytes, the exit is watched with status reads,
	// and a snapshot taken after the exit brings the whole log at once.
	var position int64 // bytes the follow has delivered (its goroutine's only)
	// paused holds the follow's frames while the catch-up read runs, so
	// the two do not compete for the machine and the output; the frames
	// wait in the connection and go on if the read did not end it.
	var paused sync.RWMutex
	bulk := make(chan struct{}, 1)
	caught := make(chan struct{}, 1)
	watching, watched := false, false // the catch-up runs, has run
	go func() {
		done <- x.t.Client.Toolbox.FollowSessionCommandLogs(actx, x.t.Sandbox, x.sess.id, x.cmdID, nil,
			func(c daytona.LogChunk) error {
				paused.RLock()
				defer paused.RUnlock()
				if position += int64(len(c.Data)); position >= catchUpAfter {
					select {
					case bulk <- struct{}{}:
					default:
					}
				}
				if x.out.feed(gen, int(c.Stream)-1, c.Offset, c.Data) {
					select {
					case activity <- struct{}{}:
					default:
					}
					if _, ok := x.out.ended(); ok {
						select {
						case marked <- struct{}{}:
						default:
						}
					}
				}
				return nil
			})
	}()
	silence := x.r.clock.NewTimer(SilentSocketLimit)
	var followErr error
	followEnded := false
	defer func() {
		x.out.nextGen() // late callbacks of this connection are ignored
		acancel()
		silence.Stop()
		if !followEnded {
			<-done
		}
		if watching {
			<-caught
		}
	}()
	for {
		select {
		case followErr = <-done:
			followEnded = true
			if c, ok := x.out.ended(); ok {
				return endExited, c, nil
			}
			if x.cmdCtx.Err() != nil {
				return endStopped, 0, context.Cause(x.cmdCtx)
			}
			if followErr == nil {
				return endClean, 0, nil
			}
			return endRejected, 0, nil
		case <-marked:
			// The markers prove the output complete: the socket's close
			// (about a second after the exit) is not waited for.
			c, _ := x.out.ended()
			return endExited, c, nil
		case <-bulk:
			if watched {
				continue
			}
			watching, watched = true, true
			go func() {
				defer func() { caught <- struct{}{} }()
				x.catchUp(actx, gen, &paused)
			}()
		case <-caught:
			watching = false
			// The exit was recorded and the log read whole: the markers in
			// it end the command. Without them (the command never printed
			// them) the follow goes on to its end as before.
			if c, ok := x.out.ended(); ok {
				return endExited, c, nil
			}
		case <-activity:
			silence.Stop()
			silence = x.r.clock.NewTimer(SilentSocketLimit)
		case <-silence.C():
			return endIdle, 0, nil
		case <-x.cmdCtx.Done():
			return endStopped, 0, context.Cause(x.cmdCtx)
		}
	}
}

// catchUpAfter is how far a follow must have come before the exit is
// watched for a catch-up read: a command that printed that much prints in
// bulk, and no short command does.
const catchUpAfter = 256 << 10

// exitWatch is the first wait between the status reads that watch for the
// exit (the first read is made at once); it doubles, and after
// exitWatchMax the watch ends (eight reads over 1.3 s): a command that
// prints in bulk for longer is carried by the follow, as any long command.
const (
	exitWatch    = 10 * time.Millisecond
	exitWatchMax = 640 * time.Millisecond
)

// catchUp waits for the command's exit with status reads, then, with the
// follow's frames held, reads the log once into the follow's generation
// (offsets make the overlap with the follow harmless). The daemon records
// the exit only after the log holds all the output, so that read brings
// the end markers. It is taken whole before its text goes live, like a
// first read. A failed read changes nothing: the follow goes on.
func (x *run) catchUp(ctx context.Context, gen uint64, paused *sync.RWMutex) {
	for wait := time.Duration(0); ; wait = max(exitWatch, 2*wait) {
		if wait > exitWatchMax {
			return // a long command: the follow carries it
		}
		if wait > 0 && !sleep(ctx, x.r.clock, wait) {
			return
		}
		code, err := x.statusRead(ctx, x.eff, errObservationBound)
		if err != nil {
			return
		}
		if code != nil {
			break
		}
	}
	paused.Lock()
	defer paused.Unlock()
	_ = x.readLog(ctx, gen, x.eff, errObservationBound)
	x.out.publish() // nothing when the markers came: the command has ended
}

// exitAfterClose reads the exit code after a clean close: once, then after
// 50, 100 and 200 ms, each read bounded by the observation timeout.
func (x *run) exitAfterClose() (*int, error) {
	for i := 0; ; i++ {
		c, err := x.statusRead(x.cmdCtx, x.eff, errObservationBound)
		if err != nil {
			return nil, err
		}
		if c != nil || i == len(exitRetryDelays) {
			return c, nil
		}
		if !sleep(x.cmdCtx, x.r.clock, exitRetryDelays[i]) {
			return nil, context.Cause(x.cmdCtx)
		}
	}
}
