package exec_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	cmdexec "github.com/daytonaworker/daytona-worker/exec"
)

// bulk prints n bytes of 'a' in lines of 1023, the last one cut short
// and without a newline (bulkStdout); bulkEnd then prints E on stderr and
// exits 4.
func bulk(n int) string {
	return "head -c " + strconv.Itoa(n) + " /dev/zero | tr '\\0' a | fold -w 1023"
}

const bulkEnd = "; printf E >&2; exit 4"

// assertBulkResult checks the result of a bulk command that printed
// stdout: every byte, the exit status, and live output a prefix of it.
func assertBulkResult(t *testing.T, rec *recorder, res cmdexec.Result, err error, stdout string) {
	t.Helper()
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode)
	assert.Equal(t, 4, *res.ExitCode)
	require.Equal(t, len(stdout), len(res.Stdout))
	assert.True(t, stdout == res.Stdout, "exact bytes")
	assert.Equal(t, "E", res.Stderr)
	assertLive(t, rec, res)
}

func bulkStdout(n int) string {
	line := strings.Repeat("a", 1023)
	var b strings.Builder
	for ; n >= 1023; n -= 1023 {
		b.WriteString(line)
		if n > 1023 {
			b.WriteByte('\n')
		}
	}
	b.WriteString(strings.Repeat("a", n))
	return b.String()
}

// exitWatches are the waits of the exit watch, shortest first.
func exitWatches() []time.Duration {
	var ds []time.Duration
	for d := cmdexec.ExitWatch; d <= cmdexec.ExitWatchMax; d *= 2 {
		ds = append(ds, d)
	}
	return ds
}

// awaitFollowedExit waits until the command was followed (so it is the
// last dispatch) and has exited: the fake clock moves only once the exit
// is there to see.
func (e *env) awaitFollowedExit() {
	e.t.Helper()
	require.NoError(e.t, e.srv.AwaitRequests(ctxT(e.t), "GET", rLogs, 1))
	e.awaitExited()
}

// driveWatch advances the fake clock through each wait of the exit watch
// as it is armed, until ch delivers.
func (e *env) driveWatch(ch <-chan execOut) (cmdexec.Result, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 60*time.Second) // a guard only
	defer cancel()
	got := make(chan execOut, 1)
	go func() {
		select {
		case o := <-ch:
			got <- o
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		d, err := e.clock.AwaitAnyTimer(ctx, exitWatches()...)
		if err != nil {
			break
		}
		e.clock.Advance(d)
	}
	select {
	case o := <-got:
		return o.res, o.err
	default:
		e.t.Fatal("execute did not return")
		return cmdexec.Result{}, nil
	}
}

// followBulk runs a command that prints 3 MiB in bulk and is followed
// from its dispatch, drives the fake clock through the exit watch once it
// has exited, and checks its result (every byte, the exit status, live
// output a prefix, observed by the follow). It returns the command's tag.
func (e *env) followBulk(t *testing.T) string {
	t.Helper()
	rec := newRecorder()
	id := tag()
	const n = 3 << 20
	ch := e.start(bashReq(bulk(n)+"; : "+id+bulkEnd), rec)
	e.awaitFollowedExit()
	res, err := e.driveWatch(ch)
	assertBulkResult(t, rec, res, err, bulkStdout(n))
	assert.Equal(t, "followed", res.Metadata["logStream"])
	return id
}

// TestCatchUpReadEndsABulkFollow: a follow that has delivered
// CatchUpAfter bytes follows a command that prints in bulk, and its 1 KiB
// frames are the slow way to the end; the exit is watched with status
// reads, and one snapshot after it brings the whole log. Here the follow
// stalls for good after 1.5 MiB (the fake clock keeps the 15 s silence
// from ever ending it): the catch-up read alone brings the rest and the
// end markers, with exact bytes and live output a prefix of the result.
// Without it the command would wait on the stalled follow.
func TestCatchUpReadEndsABulkFollow(t *testing.T) {
	e := newEnv(t, withFakeClock, withFollowFirst(cmdexec.FollowFirstRTT))
	e.holdFollowClose(t)
	e.srv.Inject(daytonatest.Fault{Route: rLogs, Times: 1, WSStall: true, WSStallAfterBytes: 3 << 19})
	id := e.followBulk(t)
	assert.Equal(t, 1, e.wsCount(), "one follow")
	assert.Equal(t, 2, e.count("GET", rLogs), "the follow and one catch-up read")
	assert.GreaterOrEqual(t, e.count("GET", rStatus), 1, "the exit was seen")
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

// TestExitWatchEndsForALongBulkCommand: a command that prints in bulk and
// then runs on is watched for ExitWatchMax only (a few status reads), and
// then carried by the follow like any long command: the result is exact
// and no catch-up read is made.
func TestExitWatchEndsForALongBulkCommand(t *testing.T) {
	e := newEnv(t, withFakeClock, withFollowFirst(cmdexec.FollowFirstRTT))
	e.holdFollowClose(t)
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	const n = 1 << 20
	ch := e.start(bashReq(bulk(n)+"; : "+id+"; echo; "+g.shell()+bulkEnd), rec)
	for _, d := range exitWatches() {
		e.awaitTimer(d)
		e.clock.Advance(d)
	}
	// A status read at once and one after each wait.
	require.NoError(t, e.srv.AwaitRequests(ctxT(t), "GET", rStatus, len(exitWatches())+1))
	reads := e.count("GET", rStatus)
	g.open(t)
	res, err := e.wait(ch)
	assertBulkResult(t, rec, res, err, bulkStdout(n)+"\n")
	assert.Equal(t, reads, e.count("GET", rStatus), "the watch ended")
	assert.Equal(t, 1, e.count("GET", rLogs), "the follow only")
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}

// TestFailedCatchUpReadLeavesTheFollow: a catch-up read that fails changes
// nothing; the follow carries the command on. Here the follow stalls for
// good after 1.5 MiB and the catch-up read after the exit fails, so the
// follow's silence hands the command to the poll, which brings every
// byte: the read is made once, fails, and loses nothing. (With a follow
// that does not stall, its frames may bring the end markers before the
// catch-up read is made, and the failure would never be tried.)
func TestFailedCatchUpReadLeavesTheFollow(t *testing.T) {
	e := newEnv(t, withFakeClock, withFollowFirst(cmdexec.FollowFirstRTT))
	e.holdFollowClose(t)
	e.srv.Inject(daytonatest.Fault{Route: rLogs, Times: 1, WSStall: true, WSStallAfterBytes: 3 << 19})
	// The follow's upgrade is taken by the fault above; the next log
	// request is the catch-up read.
	failed := e.srv.Inject(daytonatest.Fault{Route: rLogs, Times: 1, Status: 503})
	rec := newRecorder()
	id := tag()
	const n = 3 << 20
	ch := e.start(bashReq(bulk(n)+"; : "+id+bulkEnd), rec)
	e.awaitFollowedExit()
	// The exit watch's status reads, until one sees the exit and the
	// catch-up read is made.
	ctx, cancel := context.WithCancel(ctxT(t))
	read := make(chan error, 1)
	go func() {
		read <- e.srv.Await(ctx, func() bool { return failed.Hits() == 1 })
		cancel()
	}()
	for {
		d, err := e.clock.AwaitAnyTimer(ctx, exitWatches()...)
		if err != nil {
			break
		}
		e.clock.Advance(d)
	}
	require.NoError(t, <-read, "the catch-up read")
	e.silenceUntilRequests("GET", rLogs, 3) // the follow, the failed read, the poll's snapshot
	res, err := e.wait(ch)
	assertBulkResult(t, rec, res, err, bulkStdout(n))
	assert.Equal(t, 1, failed.Hits(), "one catch-up read")
	assert.Equal(t, 1, e.wsCount(), "one follow")
	assert.Equal(t, 1, e.srv.CountDispatches(id))
}
