package exec

import (
	"context"

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
// the next frame tells; a follow that closed without the markers (frames
// lost) is settled by the status read after the close, a silent socket (a
// dead shell's follow never closes) by the 15 s switch and its check of
// the shell. The connection has ended when follow returns; its late
// callbacks are ignored.
func (x *run) follow() (end streamEnd, code int, cause error) {
	gen := x.out.nextGen()
	actx, acancel := context.WithCancel(x.cmdCtx)
	activity := make(chan struct{}, 1)
	marked := make(chan struct{}, 1) // both end markers arrived
	done := make(chan error, 1)
	go func() {
		done <- x.t.Client.Toolbox.FollowSessionCommandLogs(actx, x.t.Sandbox, x.sess.id, x.cmdID, nil,
			func(c daytona.LogChunk) error {
				if x.out.feed(gen, int(c.Stream)-1, c.Offset, c.Data) {
					signal(activity)
					if _, ok := x.out.ended(); ok {
						signal(marked)
					}
				}
				return nil
			})
	}()
	silence := x.r.clock.NewTimer(SilentSocketLimit)
	defer func() {
		x.out.nextGen() // late callbacks of this connection are ignored
		acancel()
		silence.Stop()
		if done != nil {
			<-done
		}
	}()
	for {
		select {
		case err := <-done:
			done = nil
			if c, ok := x.out.ended(); ok {
				return endExited, c, nil
			}
			if x.cmdCtx.Err() != nil {
				return endStopped, 0, context.Cause(x.cmdCtx)
			}
			if err == nil {
				return endClean, 0, nil
			}
			return endRejected, 0, nil
		case <-marked:
			// The markers prove the output complete: the socket's close
			// (about a second after the exit) is not waited for.
			c, _ := x.out.ended()
			return endExited, c, nil
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

// signal notes an event on a channel of one, without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
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
