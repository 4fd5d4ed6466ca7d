package exec

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
)

// run is one Execute in flight.
type run struct {
	r      *Runner
	t      Target
	req    Request
	lease  *lease
	start  time.Time
	eff    time.Duration
	git    bool
	script commandScript
	key    uint64 // the script's hash: its run-time history on the lease
	out    *output

	ctx    context.Context // caller + lease cancellation
	cmdCtx context.Context // + command deadline

	plan  plan
	mark  endMarker
	files [2]string // the files path's stdout and stderr files

	sess  *session
	cmdID string
	// sent is when the successful dispatch call was sent.
	sent time.Time
	// answered: a synchronous exec answered with the command's log.
	answered bool
	retire   bool // take the session out of service afterwards
	// observing: a follow connection closed cleanly or went silent, so
	// reads now observe a command that may have ended (timeoutScope).
	observing bool
	observed  string // the path the command took (metadata logStream)
	exited    bool   // a status read saw the exit code
	// seen is when, counted from sent, a look would have found the
	// command's end (0: not known; plan.go).
	seen time.Duration
	// first: the look under way is the plan's first.
	first bool
}

func (x *run) durationMs() int64 { return x.r.clock.Now().Sub(x.start).Milliseconds() }

func (x *run) effSeconds() int64 { return int64(math.Round(x.eff.Seconds())) }

// result builds the final result from the output buffer.
func (x *run) result(code *int) Result {
	stdout, stderr, truncated := x.out.snapshot()
	md := map[string]any{"durationMs": x.durationMs()}
	if x.observed != "" {
		md["logStream"] = x.observed
	}
	if truncated {
		md["outputTruncated"] = true
	}
	return Result{ExitCode: code, Stdout: stdout, Stderr: stderr, Metadata: md}
}

// Scopes of a timed-out result (metadata timeoutScope).
const (
	scopeCommand     = "command"
	scopeObservation = "session_log_observation"
)

// timeoutScope is the one rule, for both paths, that decides whether cause
// ends an execute as a timed-out result rather than an error, and in which
// scope ("" = not a timeout). observing is true for a status or log
// snapshot read made after a follow connection closed cleanly or went
// silent: the command may well have ended, so a read that stalls until the
// command deadline, or that the provider answers with a timeout (504, 408),
// is an observation timeout (exit unconfirmed, output kept), not a command
// timeout. Elsewhere a provider timeout is the command's own: the one-shot
// daemon answers 408 when it killed the command at its timeout.
func (x *run) timeoutScope(cause error, observing bool) string {
	switch {
	case errors.Is(cause, errObservationBound):
		return scopeObservation
	case errors.Is(cause, errReadStalled) && observing:
		return scopeObservation
	case errors.Is(cause, errCommandDeadline):
		return scopeCommand
	case errors.Is(cause, daytona.ErrTimeout) && observing:
		return scopeObservation
	case errors.Is(cause, daytona.ErrTimeout):
		return scopeCommand
	}
	return ""
}

// timeout is the timed-out result: partial output, the reason appended to
// stderr, and whether the command's exit is known. cause says what ran out
// (a bound of ours, or a provider timeout answer).
func (x *run) timeout(scope string, cause error, observedExit *int) Result {
	x.salvage()
	res := x.result(nil)
	res.TimedOut = true
	after := fmt.Sprintf("after %d s", x.effSeconds())
	if provider := !errors.Is(cause, errObservationBound) && !errors.Is(cause, errCommandDeadline); provider && scope == scopeObservation {
		after = "(the provider answered with a timeout)"
	}
	var msg string
	switch {
	case scope == scopeObservation && observedExit != nil:
		msg = "Session log observation timed out " + after + "; final output may be incomplete."
	case scope == scopeObservation:
		msg = "Session log observation timed out " + after + "; command exit remains unconfirmed."
	case x.git:
		msg = gitTimeoutMessage(x.effSeconds())
	default:
		msg = fmt.Sprintf("Command timed out after %d s.", x.effSeconds())
	}
	res.Stderr += msg + "\n"
	res.Metadata["timeoutScope"] = scope
	res.Metadata["commandExitConfirmed"] = observedExit != nil
	if observedExit != nil {
		res.Metadata["observedExitCode"] = *observedExit
	}
	if observedExit == nil && x.sess != nil {
		// The command may still run: retire its session so later commands
		// do not queue behind it, and delete it (killing the command) once
		// unused.
		x.retire = true
	}
	return res
}

// stopped turns the reason a wait ended into the execute's outcome.
func (x *run) stopped(cause error) (Result, error) {
	x.salvage()
	if scope := x.timeoutScope(cause, false); scope != "" {
		return x.timeout(scope, cause, nil), nil
	}
	res := x.result(nil)
	if x.sess != nil && x.cmdID != "" {
		res.Metadata["commandExitConfirmed"] = false
		x.retire = true // it may still run: nothing may queue behind it
	}
	if errors.Is(cause, ErrLeaseNotActive) {
		return res, cause
	}
	return res, fmt.Errorf("exec: %w", cause)
}

// classify maps a failed read under rctx (a child of parent) to the bound
// or cancellation that ended it, or returns the provider error.
func classify(parent, rctx context.Context, err error) error {
	if parent.Err() != nil {
		return context.Cause(parent)
	}
	if rctx.Err() != nil {
		return context.Cause(rctx)
	}
	return err
}

// readFailure is classify for a status or snapshot read that began at
// started: when the command deadline ended a read that was already under
// way, the read stalled (errReadStalled); a deadline that had passed before
// the read began stays the command's own.
func (x *run) readFailure(parent, rctx context.Context, err error, started time.Time) error {
	cause := classify(parent, rctx, err)
	if errors.Is(cause, errCommandDeadline) && x.eff > 0 && started.Before(x.start.Add(x.eff)) {
		return fmt.Errorf("%w: %w", errReadStalled, cause)
	}
	return cause
}

// statusRead reads the command's exit code under parent, bounded by d.
func (x *run) statusRead(parent context.Context, d time.Duration, boundCause error) (*int, error) {
	started := x.r.clock.Now()
	rctx, cancel := withBound(parent, x.r.clock, d, boundCause)
	defer cancel()
	cmd, _, err := x.t.Client.Toolbox.GetSessionCommand(rctx, x.t.Sandbox, x.sess.id, x.cmdID)
	if err != nil {
		return nil, x.readFailure(parent, rctx, err, started)
	}
	return cmd.ExitCode, nil
}

// sessionLost reports a toolbox answer meaning the session is gone.
func sessionLost(err error) bool {
	return errors.Is(err, daytona.ErrNotFound) || errors.Is(err, daytona.ErrGone)
}

// readFailed handles an error of a status or snapshot read: timeouts
// (timeoutScope) and cancellations become their results, other provider
// errors are returned (a status 404 means the session died: it is
// forgotten).
func (x *run) readFailed(err error) (Result, error) {
	if scope := x.timeoutScope(err, x.observing); scope != "" {
		return x.timeout(scope, err, nil), nil
	}
	if errors.Is(err, ErrLeaseNotActive) || isContextErr(err) {
		return x.stopped(err)
	}
	if sessionLost(err) {
		x.r.sessionGone(x.lease, x.sess)
	}
	res := x.result(nil)
	res.Metadata["commandExitConfirmed"] = false
	return res, fmt.Errorf("exec: observe command: %w", err)
}

// complete finishes a command whose exit code is recorded. Its output
// now goes to the result only. Unless the end markers already proved the
// output complete, one final separated snapshot reconciles what the stream
// missed; it runs outside the command deadline (the command is over) but
// under the observation bound.
func (x *run) complete(code int) (Result, error) {
	x.out.stopLive()
	if _, marked := x.out.ended(); !marked && !x.out.bothCapped() {
		if err := x.read(x.ctx, x.eff, errObservationBound); err != nil {
			if x.timeoutScope(err, true) != "" {
				return x.timeout(scopeObservation, err, &code), nil
			}
			res := x.result(nil)
			res.Metadata["observedExitCode"] = code
			res.Metadata["commandExitConfirmed"] = true
			if sessionLost(err) {
				x.r.sessionGone(x.lease, x.sess)
			}
			if errors.Is(err, ErrLeaseNotActive) {
				return res, err
			}
			return res, fmt.Errorf("exec: final log snapshot: %w", err)
		}
	}
	x.out.finish()
	return x.result(&code), nil
}

// rawSnapshot reads the whole log as the raw marked bytes, streamed
// (memory stays bounded whatever the command printed), bounded by d
// (boundCause), and feeds what is new by per-stream byte offset, exactly
// as a reconnect does. Byte offsets of the raw log are the follow
// socket's, so the reconciliation is exact even for binary output; the
// JSON snapshot would have to be held whole, and it renders invalid bytes
// as U+FFFD. Nothing goes live here: the caller publishes the text if the
// command still runs.
func (x *run) rawSnapshot(parent context.Context, d time.Duration, boundCause error) error {
	gen := x.out.nextGen()
	defer x.out.nextGen() // late callbacks of this read are ignored
	return x.readLog(parent, gen, d, boundCause)
}

// readLog reads the whole raw log into the output's generation gen,
// quietly (the caller decides what goes live), bounded by d.
func (x *run) readLog(parent context.Context, gen uint64, d time.Duration, boundCause error) error {
	started := x.r.clock.Now()
	rctx, cancel := withBound(parent, x.r.clock, d, boundCause)
	defer cancel()
	err := x.t.Client.Toolbox.StreamSessionCommandLogs(rctx, x.t.Sandbox, x.sess.id, x.cmdID, func(c daytona.LogChunk) error {
		x.out.feedQuiet(gen, int(c.Stream)-1, c.Offset, c.Data)
		return nil
	})
	if err != nil {
		return x.readFailure(parent, rctx, err, started)
	}
	return nil
}

// poll is the fallback: status, then snapshot, at most once per
// PollInterval, until the exit is read or the command deadline passes.
// That deadline is the only lifetime of the session path: the fallback
// after two failed connections gets no fresh budget of its own, unlike the
// reference (a deliberate deviation, README.md "Deviations from the
// reference": the host stops waiting at the timeout anyway).
func (x *run) poll() (Result, error) {
	x.observed = pathPolled
	// The poll starts after SilentSocketLimit without a frame, or after a
	// close without the end markers: either way the shell is checked at
	// once, and again after each doubling of the silence (at most every
	// probeEveryMax), since every check queues a no-op in a live shell.
	seen, quiet, next := x.out.received(), x.r.clock.Now(), time.Duration(0)
	for {
		code, err := x.statusRead(x.cmdCtx, x.eff, errObservationBound)
		if err != nil {
			return x.readFailed(err)
		}
		if code != nil {
			x.out.stopLive()
			x.exited = true
		}
		// The files path's output is read once, after the exit.
		if !x.out.bothCapped() && (!x.plan.files || code != nil) {
			if err := x.read(x.cmdCtx, x.eff, errObservationBound); err != nil {
				return x.readFailed(err)
			}
		}
		if c, ok := x.out.ended(); ok {
			code = &c // the markers are proof even if the status read came first
		}
		if code != nil {
			x.out.finish()
			return x.result(code), nil
		}
		x.out.publish()
		now := x.r.clock.Now()
		if got := x.out.received(); got != seen {
			seen, quiet = got, now
			if next != 0 { // the first check is still due
				next = SilentSocketLimit
			}
		}
		if now.Sub(quiet) >= next {
			if !x.shellAlive() {
				return x.shellDied()
			}
			next = min(max(2*next, SilentSocketLimit), probeEveryMax)
		}
		if !sleep(x.cmdCtx, x.r.clock, PollInterval) {
			return x.stopped(context.Cause(x.cmdCtx))
		}
	}
}
