package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/google/uuid"

	"github.com/daytonaworker/daytona-worker/daytona"
)

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
	outPath := path.Join(stdinDir, oneShotOutPrefix+uuid.NewString())
	code, _, err := x.t.Client.Toolbox.ExecuteStream(rctx, x.t.Sandbox, &daytona.ExecuteRequest{Command: x.script.oneShot(outPath), Timeout: sec},
		func(p []byte) error {
			x.out.feed(gen, 0, off, p)
			off += int64(len(p))
			return nil
		})
	if err != nil {
		cause := classify(x.ctx, rctx, err)
		if x.timeoutScope(cause, false) != "" {
			// The daemon killed the command before its output file was
			// printed: what it wrote so far is still in the file.
			if off == 0 {
				x.recoverOutput(gen, outPath)
			}
			return x.stopped(cause)
		}
		if errors.Is(cause, ErrLeaseNotActive) || isContextErr(cause) {
			return x.stopped(cause)
		}
		// The answer was lost part way: what arrived is returned with the
		// error, as on every failed execute.
		return x.result(nil), fmt.Errorf("exec: one-shot execute: %w", err)
	}
	x.out.finish()
	return x.result(&code), nil
}

// oneShotOutPrefix names the one-shot output files in /tmp.
const oneShotOutPrefix = "paperclip-out-"

// recoverOutput reads a timed-out one-shot command's output file into the
// result and removes it, best effort and within cleanupBound: a timed-out
// command keeps what it printed, as it does in a terminal.
func (x *run) recoverOutput(gen uint64, outPath string) {
	ctx, cancel := withBound(context.WithoutCancel(x.ctx), x.r.clock, cleanupBound, context.DeadlineExceeded)
	defer cancel()
	defer func() { _, _ = x.t.Client.Files.Delete(ctx, x.t.Sandbox, outPath, false) }()
	body, _, err := x.t.Client.Files.Download(ctx, x.t.Sandbox, outPath)
	if err != nil {
		return
	}
	defer body.Close()
	// One stream's output is bounded by the cap: past it the rest is only
	// counted, so a huge file is read through without being kept.
	_, _ = io.Copy(&feeder{o: x.out, gen: gen}, body)
}
