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

	sess  *session
	cmdID string
	// sent is when the successful dispatch call was sent, dispatchRTT how
	// long it took.
	sent        time.Time
	dispatchRTT time.Duration
	// probed: the first read was a snapshot, sent lead after the dispatch.
	probed bool
	lead   time.Duration
	missed bool // the first read came before the end
	retire bool // take the session out of service afterwards
	// observing: a follow connection closed cleanly or went silent, so
	// reads now observe a command that may have ended (timeoutScope).
	observing bool
	observed  string // how output was observed (metadata logStream)
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

// inSession is the session path (docs/behavior.md#session-path, docs/behavior.md#exited-fast-path, docs/behavior.md#silent-socket).
func (x *run) inSession() (Result, error) {
	if err := x.dispatch(); err != nil {
		if x.cmdCtx.Err() != nil && x.cmdID == "" && !errors.Is(err, ErrDispatchUncertain) {
			return x.stopped(context.Cause(x.cmdCtx))
		}
		res := x.result(nil)
		return res, err
	}
	defer func() { x.r.releaseSession(x.ctx, x.lease, x.sess, x.retire) }()
	res, err := x.observe()
	if d, ok := x.out.runTime(); ok {
		x.r.noteRunTime(x.lease, x.key, d, x.probed, x.lead, !x.missed)
	}
	return res, err
}

// dispatch hands the command to the session exactly once. A 404/410 on
// the exec call proves the command was not started (the session died with
// a sandbox restart): the session is recreated and the dispatch made once
// more. Any other failure leaves the outcome unknown and is not retried.
func (x *run) dispatch() error {
	m := newEndMarker()
	x.out.useMarker(m.tok)
	wrapped := m.wrap(x.script.execLast())
	for attempt := 0; attempt < 2; attempt++ {
		s, err := x.r.acquireSession(x.cmdCtx, x.lease, x.t)
		if err != nil {
			return err
		}
		sent := x.r.clock.Now()
		resp, _, err := x.t.Client.Toolbox.ExecuteSessionCommand(x.cmdCtx, x.t.Sandbox, s.id,
			&daytona.SessionExecuteRequest{Command: wrapped, RunAsync: true})
		if err == nil && resp.CmdID != "" {
			x.sess, x.cmdID = s, resp.CmdID
			x.sent, x.dispatchRTT = sent, x.r.clock.Now().Sub(sent)
			return nil
		}
		if err != nil && sessionLost(err) && !errors.Is(err, daytona.ErrContainerMissing) {
			x.r.sessionGone(x.lease, s)
			x.r.releaseSession(x.ctx, x.lease, s, false)
			continue
		}
		// Outcome unknown: the command may be running. Retire the session
		// so nothing else queues behind it; never dispatch again.
		x.r.releaseSession(x.ctx, x.lease, s, true)
		if err == nil {
			err = fmt.Errorf("%w: exec answer without a command id", daytona.ErrMalformedResponse)
		}
		if x.cmdCtx.Err() != nil {
			err = fmt.Errorf("%w", context.Cause(x.cmdCtx))
		}
		return fmt.Errorf("%w: %w", ErrDispatchUncertain, err)
	}
	return fmt.Errorf("exec: session lost twice while dispatching: %w", daytona.ErrNotFound)
}

// FollowFirstRTT is the worker's Options.FollowFirstBelow: a dispatch
// answered within 10 ms comes from a network (loopback, same host or rack)
// so close that bash, which takes 15-45 ms to source the login profiles
// before the command runs, cannot have finished when a snapshot sent
// next arrives; at internet round trips (tens of ms) the snapshot stays
// first, because it reuses a pooled connection where the follow's
// WebSocket opens a new one.
const FollowFirstRTT = 10 * time.Millisecond

func (x *run) observe() (Result, error) {
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
	// large (laterReads). A command slower than that is followed.
	settle, second := x.r.settleFor(x.lease, x.key)
	if settle > 0 {
		if wait := x.sent.Add(settle).Sub(x.r.clock.Now()); wait > 0 && !sleep(x.cmdCtx, x.r.clock, wait) {
			return x.stopped(context.Cause(x.cmdCtx))
		}
	}
	if settle > 0 || x.r.followFirst <= 0 || x.dispatchRTT >= x.r.followFirst {
		x.probed, x.lead = true, x.r.clock.Now().Sub(x.sent)
		if res, done, err := x.fastPath(); done {
			return res, err
		}
		x.missed = true
		if settle > 0 {
			if res, done, err := x.laterReads(second); done {
				return res, err
			}
		}
	}
	x.observed = "followed"
	for attempt := 0; attempt < maxStreamAttempts; attempt++ {
		end, code, cause := x.follow()
		switch end {
		case endExited:
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

// laterReads makes the reads after a timed first read that came before
// the command's end (docs/exec.md#later-reads): the second read, when the
// slowest of the recent short runs would have ended (second after the
// dispatch was sent), then reads laterReadGap, 2×, 4× … that after the
// second, while that is at most twice second. A read whose time passed
// while the one before it was under way is skipped, so a slow network adds
// no read that would go out right after the last. Once the log holds
// largeLog bytes, each of these reads is a status read (exitRead):
// every snapshot brings the whole log again, so the log is read once more
// only after the exit. Each of these reads costs one call over a pooled
// connection, where the follow costs a new connection (a TLS handshake on
// the real API) and waits for the daemon's 20 ms log tail; a command
// still running at the last of them is most likely a long one, and the
// follow then carries its live output.
func (x *run) laterReads(second time.Duration) (res Result, done bool, err error) {
	for i, at := 0, second; at <= 2*second; at, i = second+laterReadGap<<i, i+1 {
		wait := x.sent.Add(at).Sub(x.r.clock.Now())
		if wait <= 0 {
			continue // its time passed while the read before it was under way
		}
		if !sleep(x.cmdCtx, x.r.clock, wait) {
			res, err = x.stopped(context.Cause(x.cmdCtx))
			return res, true, err
		}
		if x.out.received() >= largeLog {
			if res, done, err = x.exitRead(); done || err != nil {
				return res, true, err
			}
			continue
		}
		if res, done, err = x.fastPath(); done {
			return res, done, err
		}
	}
	return Result{}, false, nil
}

// exitRead is a later read of a command whose log is large: a status
// read, and after the exit one snapshot for the rest of the output (the
// daemon records the exit only after the log holds all of it), the
// reference's fast path. done when the command's result is in; a failed
// read (err nil, not done) leaves the command to the follow.
func (x *run) exitRead() (res Result, done bool, err error) {
	code, rerr := x.statusRead(x.cmdCtx, FastPathBound, errFastPathBound)
	if x.cmdCtx.Err() != nil {
		res, err = x.stopped(context.Cause(x.cmdCtx))
		return res, true, err
	}
	if rerr != nil || code == nil {
		return Result{}, false, nil
	}
	x.observed = "fast_path"
	res, err = x.complete(*code)
	return res, true, err
}

// laterReadGap is how long after the second read the next one comes
// (then twice, four times … as long after it). From largeLog bytes of
// log on, the second and later reads are status reads.
const (
	laterReadGap = 4 * time.Millisecond
	largeLog     = 256 << 10
)

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

// fastPath reads one snapshot; done when it held both end markers (the
// result) or the command's context ended. Otherwise what it brought goes
// live.
func (x *run) fastPath() (res Result, done bool, err error) {
	_ = x.rawSnapshot(x.cmdCtx, FastPathBound, errFastPathBound)
	if x.cmdCtx.Err() != nil {
		res, err = x.stopped(context.Cause(x.cmdCtx))
		return res, true, err
	}
	if code, ok := x.out.ended(); ok {
		x.observed = "fast_path"
		res, err = x.complete(code)
		return res, true, err
	}
	x.out.publish()
	return Result{}, false, nil
}

// complete finishes a command whose exit code is recorded. Its output
// now goes to the result only. Unless the end markers already proved the
// output complete, one final separated snapshot reconciles what the stream
// missed; it runs outside the command deadline (the command is over) but
// under the observation bound.
func (x *run) complete(code int) (Result, error) {
	x.out.stopLive()
	if _, marked := x.out.ended(); !marked && !x.out.bothCapped() {
		if err := x.rawSnapshot(x.ctx, x.eff, errObservationBound); err != nil {
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
	x.observed = "polled"
	for {
		code, err := x.statusRead(x.cmdCtx, x.eff, errObservationBound)
		if err != nil {
			return x.readFailed(err)
		}
		if code != nil {
			x.out.stopLive()
		}
		if !x.out.bothCapped() {
			if err := x.rawSnapshot(x.cmdCtx, x.eff, errObservationBound); err != nil {
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
		if !sleep(x.cmdCtx, x.r.clock, PollInterval) {
			return x.stopped(context.Cause(x.cmdCtx))
		}
	}
}

// oneShot is the bypass path (docs/behavior.md#one-shot): POST /process/execute with combined
// output, reported as stdout. The daemon kills the command at the timeout
// (408, output lost); the client call is bounded a little later in case the
// daemon never answers. The answer (one JSON value holding everything the
// command printed) is decoded as it arrives into the same capped output as
// the session path, so a command that prints more than the cap still gets
// its exit code and a truncated result, with memory bounded by the cap.
func (x *run) oneShot() (Result, error) {
	x.observed = "one_shot"
	sec := 0
	bound := time.Duration(0)
	if x.eff > 0 {
		sec = toTimeoutSeconds(x.eff)
		bound = time.Duration(sec)*time.Second + 5*time.Second
	}
	rctx, cancel := withBound(x.ctx, x.r.clock, bound, errCommandDeadline)
	defer cancel()
	gen := x.out.nextGen()
	var off int64
	code, _, err := x.t.Client.Toolbox.ExecuteStream(rctx, x.t.Sandbox, &daytona.ExecuteRequest{Command: x.script.String(), Timeout: sec},
		func(p []byte) error {
			x.out.feed(gen, 0, off, p)
			off += int64(len(p))
			return nil
		})
	if err != nil {
		cause := classify(x.ctx, rctx, err)
		if x.timeoutScope(cause, false) != "" || errors.Is(cause, ErrLeaseNotActive) || isContextErr(cause) {
			return x.stopped(cause)
		}
		// The answer was lost part way: what arrived is returned with the
		// error, as on every failed execute.
		return x.result(nil), fmt.Errorf("exec: one-shot execute: %w", err)
	}
	x.out.finish()
	return x.result(&code), nil
}
