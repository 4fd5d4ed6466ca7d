package exec

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/daytonaworker/daytona-worker/daytona"
)

// inSession is the session path (docs/exec.md#the-plan): plan, dispatch
// once, observe, and remember what the command line did.
func (x *run) inSession() (Result, error) {
	x.plan = x.r.planFor(x.lease, x.key)
	x.mark = newEndMarker()
	x.out.useMarker(x.mark.tok)
	if x.plan.files {
		x.files = x.mark.outputFiles()
	}
	if err := x.dispatch(); err != nil {
		if x.cmdCtx.Err() != nil && x.cmdID == "" && !errors.Is(err, ErrDispatchUncertain) {
			return x.stopped(context.Cause(x.cmdCtx))
		}
		return x.result(nil), err
	}
	defer func() {
		if x.plan.files {
			x.removeFiles()
		}
		x.r.releaseSession(x.ctx, x.lease, x.sess, x.retire)
	}()
	res, err := x.observe()
	if d, ok := x.out.runTime(); ok {
		x.r.noteRun(x.lease, x.key, d, x.seen, x.out.received(), x.out.receivedLines(), x.out.garbled())
	}
	return res, err
}

// dispatch hands the command to the session exactly once. An answer that
// proves the shell did not take the command recreates the session and
// dispatches once more: a 404/410 (the session is gone), and
// daytona.ErrSessionEnded (the v0.190.0 daemon's 500 "session not found"
// after a restart, its 500 "broken pipe" when the shell died, a newer
// daemon's 410 SESSION_ENDED). Any other failure leaves the outcome
// unknown: the session's command list says whether the command got there
// (locate); if it did it is observed, if not the error is
// ErrDispatchUncertain. It is never sent twice.
func (x *run) dispatch() error {
	for attempt := 0; attempt < 2; attempt++ {
		s, err := x.r.acquireSession(x.cmdCtx, x.lease, x.t)
		if err != nil {
			return err
		}
		x.sess = s
		wrapped := x.wrapped()
		x.sent = x.r.clock.Now()
		if x.plan.sync {
			err = x.execSync(wrapped)
		} else {
			var resp *daytona.SessionExecuteResponse
			resp, _, err = x.t.Client.Toolbox.ExecuteSessionCommand(x.cmdCtx, x.t.Sandbox, s.id,
				&daytona.SessionExecuteRequest{Command: wrapped, RunAsync: true})
			if err == nil {
				x.cmdID = resp.CmdID
				x.r.noteRTT(x.lease, x.r.clock.Now().Sub(x.sent))
			}
		}
		if err == nil {
			return nil
		}
		x.sess = nil
		switch {
		case errors.Is(err, daytona.ErrSessionEnded):
			// The daemon may still hold the session (a dead shell and what
			// it left running): retire it, so it is deleted.
			x.r.releaseSession(x.ctx, x.lease, s, true)
			continue
		case sessionLost(err) && !errors.Is(err, daytona.ErrContainerMissing):
			x.r.sessionGone(x.lease, s)
			x.r.releaseSession(x.ctx, x.lease, s, false)
			continue
		}
		if x.cmdCtx.Err() != nil {
			err = context.Cause(x.cmdCtx)
		}
		// Outcome unknown: did the command reach the shell?
		if id, lerr := x.locate(s); lerr == nil && id != "" {
			x.sess, x.cmdID = s, id
			return nil
		}
		// The command may be running: retire the session so nothing
		// queues behind it; never dispatch again.
		x.r.releaseSession(x.ctx, x.lease, s, true)
		return fmt.Errorf("%w: %w", ErrDispatchUncertain, err)
	}
	return fmt.Errorf("exec: session lost twice while dispatching: %w", daytona.ErrNotFound)
}

// wrapped is the command as the session shell gets it: on the files path
// its streams go to x.files.
func (x *run) wrapped() string {
	noStdin := !x.script.hasStdin()
	if !x.plan.files {
		return x.mark.wrap(x.script.execLast(), noStdin)
	}
	return x.mark.wrapFiles(x.script.execLast(), noStdin, x.files[0], x.files[1])
}

// outputFiles names the files path's stdout and stderr files after the
// marker, so no two commands share them.
func (m endMarker) outputFiles() [2]string {
	base := path.Join(stdinDir, filesPrefix+m.half1+m.half2)
	return [2]string{base + ".out", base + ".err"}
}

// filesPrefix names the files path's output files in /tmp.
const filesPrefix = "paperclip-run-"

// execSync makes the synchronous exec. Its answer within liveWithin holds
// the whole log and the exit code: the command is done in one call. A
// command still running then is looked up (locate) and observed like an
// asynchronous one, so its output goes live; the synchronous call is
// abandoned (the daemon answers it into a closed connection later).
func (x *run) execSync(wrapped string) error {
	ctx, cancel := context.WithCancel(x.cmdCtx)
	type answer struct {
		resp *daytona.SessionExecuteResponse
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		resp, _, err := x.t.Client.Toolbox.ExecuteSessionCommand(ctx, x.t.Sandbox, x.sess.id,
			&daytona.SessionExecuteRequest{Command: wrapped})
		ch <- answer{resp, err}
	}()
	defer func() { cancel(); <-ch }()
	wait := x.r.clock.NewTimer(liveWithin)
	defer wait.Stop()
	select {
	case a := <-ch:
		ch <- a // for the deferred receive
		if a.err != nil {
			return a.err
		}
		x.cmdID, x.answered = a.resp.CmdID, true
		took := x.r.clock.Now().Sub(x.sent)
		if a.resp.Output != nil {
			x.feedLog(*a.resp.Output)
		}
		if run, ok := x.out.runTime(); ok {
			// The answer came a round trip plus the run rounded up to the
			// daemon's tick: what is left is the round trip, or less when
			// the run missed a tick (the next plan is then asynchronous,
			// and its exec measures the round trip again).
			x.r.noteRTT(x.lease, took-ceilTick(run+markMargin))
		}
		if a.resp.ExitCode == nil {
			x.answered = false // not what a synchronous answer is: observe it
		}
		return nil
	case <-wait.C():
	case <-x.cmdCtx.Done():
		return context.Cause(x.cmdCtx)
	}
	id, err := x.locate(x.sess)
	if err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("%w: the synchronous command is not in its session", daytona.ErrMalformedResponse)
	}
	x.cmdID = id
	return nil
}

// feedLog feeds a raw session log (with the daemon's stream labels) that
// came whole, as a snapshot does.
func (x *run) feedLog(raw string) {
	gen := x.out.nextGen()
	defer x.out.nextGen()
	d := daytona.NewDemuxer()
	emit := func(c daytona.LogChunk) { x.out.feedQuiet(gen, int(c.Stream)-1, c.Offset, c.Data) }
	d.Write([]byte(raw), emit)
	d.Flush(emit)
}

// locate finds the command in its session's command list by its marker
// (128 random bits no other command carries): its id, or "" when the
// command never reached the session.
func (x *run) locate(s *session) (string, error) {
	ctx, cancel := withBound(context.WithoutCancel(x.cmdCtx), x.r.clock, cleanupBound, errObservationBound)
	defer cancel()
	got, _, err := x.t.Client.Toolbox.GetSession(ctx, x.t.Sandbox, s.id)
	if err != nil {
		return "", err
	}
	for _, c := range got.Commands {
		if strings.Contains(c.Command, x.mark.half1) && strings.Contains(c.Command, x.mark.half2) {
			return c.ID, nil
		}
	}
	return "", nil
}
