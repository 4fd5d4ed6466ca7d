package exec_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	cmdexec "github.com/daytonaworker/daytona-worker/exec"
)

// streamedCase is one run of streamedScript on the session path: the
// faults injected before it starts, how the test takes it from its start
// to its result, and what only this case checks of the result. Each table
// below checks what its cases have in common.
type streamedCase struct {
	name      string
	fakeClock bool
	faults    []fault
	timeout   time.Duration // 0: bashReq's hour
	tail      string        // appended to the script
	// run takes the command to its result (nil: env.finish).
	run   func(t *testing.T, e *env, s *streamed) (cmdexec.Result, error)
	check func(t *testing.T, e *env, s *streamed, res cmdexec.Result)
}

func (c streamedCase) execute(t *testing.T) (*env, *streamed, cmdexec.Result, error) {
	var e *env
	if c.fakeClock {
		e = newEnv(t, withFakeClock)
	} else {
		e = newEnv(t)
	}
	for _, f := range c.faults {
		e.srv.Inject(f)
	}
	s := e.startStreamed(c.timeout, c.tail)
	run := c.run
	if run == nil {
		run = func(t *testing.T, e *env, s *streamed) (cmdexec.Result, error) { return e.finish(t, s) }
	}
	res, err := run(t, e, s)
	return e, s, res, err
}

// TestStreamedCommandCompletes: whatever happens to the log stream and the
// status reads, a command that exits gets a completed result with all of
// its output, the live output equal to it, dispatched exactly once.
func TestStreamedCommandCompletes(t *testing.T) {
	type completes struct {
		streamedCase
		ws        int    // follow connections (0: not checked)
		logStream string // metadata.logStream ("": not checked)
	}
	cases := []completes{{
		// The end markers in the stream end it: no status read, no final
		// snapshot.
		streamedCase: streamedCase{name: "one stream call, no status read", fakeClock: true,
			check: func(t *testing.T, e *env, _ *streamed, _ cmdexec.Result) {
				assert.Equal(t, 1, e.count("GET", rLogs), "the stream")
				assert.Equal(t, 0, e.count("GET", rStatus), "the markers carry the exit code")
			}},
		ws: 1, logStream: "followed",
	}, {
		// The final frame (it holds the end markers) never arrives; after
		// the clean close the exit is read and the final snapshot, read as
		// the raw log streamed (bounded memory whatever its size), fills it
		// in by byte offset without a second socket: the bytes written
		// after the socket closed are recovered.
		streamedCase: streamedCase{name: "final frame lost, reconciled by the streamed snapshot",
			faults: []fault{dropFinalFrame},
			run: func(t *testing.T, e *env, s *streamed) (cmdexec.Result, error) {
				s.gate.open(t)
				return e.wait(s.ch)
			},
			check: func(t *testing.T, e *env, _ *streamed, _ cmdexec.Result) {
				assert.Equal(t, 2, e.count("GET", rLogs), "the follow and one final snapshot")
				assert.Equal(t, 1, e.count("GET", rStatus), "the exit read after the close")
			}},
		ws: 1, // the snapshot is plain HTTP
	}}
	// A socket closed mid-line, mid-marker or mid-character: the log bytes
	// are 01 01 01 "l1 é🙂\n" (13 bytes) then the next marker and line.
	// Cuts: inside the first marker (1, 2), mid-line (5), inside the emoji
	// (9, 12), inside the second marker (14, 15), inside the second line
	// (17). One reconnect; its replayed prefix is dropped by byte offset.
	for _, cut := range []int{1, 2, 5, 9, 12, 14, 15, 17} {
		cases = append(cases, completes{streamedCase: streamedCase{name: fmt.Sprintf("socket closed after %d bytes", cut),
			faults: []fault{{Route: rLogs, WSClose: true, WSCloseAfterBytes: cut, Times: 1}},
			check: func(t *testing.T, _ *env, s *streamed, _ cmdexec.Result) {
				for _, c := range s.rec.all() {
					assert.NotContains(t, c.text, "\uFFFD")
				}
			}}, ws: 2})
	}
	// A socket that connects and never sends, and one that never connects:
	// after SilentSocketLimit the output written meanwhile arrives by
	// polling, and no second socket is opened.
	for _, f := range []struct {
		name  string
		fault fault
	}{
		{"socket connected but silent", fault{Route: rLogs, WSSilent: true, Times: 1}},
		{"socket never connects", fault{Method: "GET", Route: rLogs, Hang: true, Times: 1}},
	} {
		cases = append(cases, completes{streamedCase: streamedCase{name: f.name + ": polling after SilentSocketLimit", fakeClock: true,
			faults: []fault{f.fault},
			run: func(t *testing.T, e *env, s *streamed) (cmdexec.Result, error) {
				e.awaitTimer(silentSocketLimit)
				require.NoError(t, e.srv.AwaitRequests(ctxT(t), "GET", rLogs, 1))
				e.awaitOutput("l2 ok")
				e.clock.Advance(silentSocketLimit)
				s.awaitFirst(t)
				assert.Empty(t, s.rec.text("stdout")[len(streamedFirst):])
				s.gate.open(t)
				return e.drive(s.ch, pollInterval)
			}}, ws: 1, logStream: "polled"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, s, res, err := c.execute(t)
			require.NoError(t, err)
			require.NotNil(t, res.ExitCode)
			assert.Equal(t, 0, *res.ExitCode)
			assert.Equal(t, streamedOut, res.Stdout)
			assert.Equal(t, streamedErr, res.Stderr)
			assertLive(t, s.rec, res)
			assert.Equal(t, 1, e.srv.CountDispatches(s.id), "dispatched exactly once")
			if c.ws > 0 {
				assert.Equal(t, c.ws, e.wsCount(), "follow connections")
			}
			if c.logStream != "" {
				assert.Equal(t, c.logStream, res.Metadata["logStream"])
			}
			if c.check != nil {
				c.check(t, e, s, res)
			}
		})
	}
}

// TestTimedOutCommandKeepsPartialOutput: a command or an observation that
// runs out of time gives a timed-out result without an exit code, its
// stderr ending with the reason, the live output a prefix of it,
// dispatched exactly once.
func TestTimedOutCommandKeepsPartialOutput(t *testing.T) {
	var first string // the session before the deadline of "command deadline…"
	agedRelease := []chan struct{}{make(chan struct{}), make(chan struct{})}
	for _, c := range []struct {
		streamedCase
		reason    string // the line stderr ends with
		confirmed bool   // metadata.commandExitConfirmed
	}{{
		// The poll fallback after two failed streams runs out of the
		// command's budget; the session of the runaway command is deleted.
		streamedCase: streamedCase{name: "poll fallback", fakeClock: true, timeout: time.Minute,
			faults: []fault{{Route: rLogs, WSClose: true, WSCloseAfterBytes: 0, Times: 2}},
			run: func(t *testing.T, e *env, s *streamed) (cmdexec.Result, error) {
				e.awaitTimer(pollInterval)
				e.awaitOutput("l2 ok")
				e.clock.Advance(pollInterval)
				s.awaitFirst(t)
				e.awaitTimer(pollInterval)
				e.clock.Advance(time.Minute)
				return e.wait(s.ch)
			},
			check: func(t *testing.T, e *env, _ *streamed, res cmdexec.Result) {
				assert.True(t, strings.HasPrefix(res.Stdout, streamedFirst), res.Stdout)
				e.assertDeletes(t, 1, "session of the runaway command deleted")
			}},
		reason: "Command timed out after 60 s.\n",
	}, {
		// Both connections are held 10 s each before they fail, so the
		// fallback begins 20 s after the start. It gets no fresh budget
		// (the deliberate deviation of README.md): the command deadline,
		// 60 s after the start, ends it with the output polled so far.
		streamedCase: streamedCase{name: "poll fallback after aged failed streams ends at the command deadline", fakeClock: true, timeout: time.Minute,
			faults: []fault{
				{Method: "GET", Route: rLogs, Gate: agedRelease[0], WSClose: true, WSCloseAfterBytes: 0, Times: 1},
				{Method: "GET", Route: rLogs, Gate: agedRelease[1], WSClose: true, WSCloseAfterBytes: 0, Times: 1},
			},
			run: func(t *testing.T, e *env, s *streamed) (cmdexec.Result, error) {
				for i, release := range agedRelease {
					require.NoError(t, e.srv.AwaitRequests(ctxT(t), "GET", rLogs, i+1))
					e.awaitTimer(silentSocketLimit)
					e.clock.Advance(10 * time.Second)
					close(release)
				}
				e.awaitTimer(pollInterval) // polling, 20 s after the start
				e.awaitOutput("l2 ok")
				e.clock.Advance(pollInterval)
				s.awaitFirst(t)
				e.awaitTimer(pollInterval)
				e.clock.Advance(time.Minute - 21*time.Second)
				return e.wait(s.ch)
			},
			check: func(t *testing.T, e *env, _ *streamed, res cmdexec.Result) {
				assert.True(t, strings.HasPrefix(res.Stdout, streamedFirst), res.Stdout)
				assert.Equal(t, int64(60_000), res.Metadata["durationMs"], "ended at the command deadline")
				assert.Equal(t, "command", res.Metadata["timeoutScope"])
				assert.Equal(t, 2, e.wsCount())
			}},
		reason: "Command timed out after 60 s.\n",
	}, {
		// The socket goes silent after the first part, the runner polls,
		// and the log snapshot of the poll stalls until the command
		// deadline: an observation timeout with the output so far.
		streamedCase: streamedCase{name: "poll snapshot stalls after a silent socket", fakeClock: true, timeout: 10 * time.Minute,
			faults: []fault{{Method: "GET", Route: rLogs, Skip: 1, Times: 1, Hang: true}},
			run: func(t *testing.T, e *env, s *streamed) (cmdexec.Result, error) {
				s.awaitFirst(t)
				s.rec.await(t, "stderr", "e1 ☃\n")
				e.silenceUntilRequests("GET", rLogs, 2)
				e.clock.Advance(10 * time.Minute)
				return e.wait(s.ch)
			},
			check: func(t *testing.T, _ *env, _ *streamed, res cmdexec.Result) {
				assert.Equal(t, streamedFirst, res.Stdout)
				assert.Equal(t, "e1 ☃\n"+observationTimeout600, res.Stderr)
				assert.Equal(t, "session_log_observation", res.Metadata["timeoutScope"])
			}},
		reason: observationTimeout600,
	}, {
		// The deadline retires the session and deletes it, which kills the
		// command; the next command gets a fresh session and does not
		// queue behind it.
		streamedCase: streamedCase{name: "command deadline retires the session and kills the command", fakeClock: true, timeout: 2 * time.Hour,
			run: func(t *testing.T, e *env, s *streamed) (cmdexec.Result, error) {
				s.awaitFirst(t)
				s.rec.await(t, "stderr", "e1 ☃\n")
				first = e.runner.SessionID(e.target.LeaseKey)
				require.NoError(t, e.clock.AwaitTimer(ctxT(t), 2*time.Hour))
				e.clock.Advance(2 * time.Hour)
				return e.wait(s.ch)
			},
			check: func(t *testing.T, e *env, _ *streamed, res cmdexec.Result) {
				assert.Equal(t, streamedFirst, res.Stdout, "partial output")
				assert.Equal(t, "e1 ☃\nCommand timed out after 7200 s.\n", res.Stderr)
				assert.Equal(t, "command", res.Metadata["timeoutScope"])
				e.assertDeletes(t, 1, "timed-out command's session deleted")
				next := cmdexec.Request{Command: "echo", Args: []string{"next"}, Timeout: time.Hour}
				e.long(next) // followed: no look waits on the fake clock
				res2, err := e.runner.Execute(ctxT(t), e.target, next, nil)
				require.NoError(t, err)
				assert.Equal(t, "next\n", res2.Stdout)
				assert.NotEqual(t, first, e.runner.SessionID(e.target.LeaseKey))
			}},
		reason: "Command timed out after 7200 s.\n",
	}} {
		t.Run(c.name, func(t *testing.T) {
			e, s, res, err := c.execute(t)
			require.NoError(t, err)
			assert.True(t, res.TimedOut)
			assert.Nil(t, res.ExitCode)
			assert.True(t, strings.HasSuffix(res.Stderr, c.reason), "stderr ends with the reason: %q", res.Stderr)
			assert.Equal(t, c.confirmed, res.Metadata["commandExitConfirmed"])
			assertLivePrefix(t, s.rec, res)
			assert.Equal(t, 1, e.srv.CountDispatches(s.id), "dispatched exactly once")
			c.check(t, e, s, res)
		})
	}
}

// TestInterruptedCommandKeepsPartialOutput: a command whose exit is not
// known (its caller or its lease gave up, the sandbox stopped, the status
// read failed) ends with an error, never a made-up exit code, and the
// output that arrived, dispatched exactly once.
func TestInterruptedCommandKeepsPartialOutput(t *testing.T) {
	for _, c := range []struct {
		streamedCase
		errIs  error // nil: any error
		stdout string
	}{{
		// The abandoned command's session is retired; the lease stays.
		streamedCase: streamedCase{name: "caller context cancelled ends promptly",
			run: func(t *testing.T, e *env, s *streamed) (cmdexec.Result, error) {
				s.awaitFirst(t)
				s.cancel()
				return e.wait(s.ch)
			},
			check: func(t *testing.T, e *env, _ *streamed, _ cmdexec.Result) {
				e.assertDeletes(t, 1, "the abandoned command's session is retired")
				assert.True(t, e.runner.LeaseActive(e.target.LeaseKey))
			}},
		errIs: context.Canceled, stdout: streamedFirst,
	}, {
		// No exit code was recorded: not a completed result. Once the
		// sandbox runs again, the next command gets a new session.
		streamedCase: streamedCase{name: "sandbox stopped mid-command",
			run: func(t *testing.T, e *env, s *streamed) (cmdexec.Result, error) {
				s.awaitFirst(t)
				require.NoError(t, e.srv.StopSandbox(e.sb.ID))
				return e.wait(s.ch)
			},
			check: func(t *testing.T, e *env, _ *streamed, res cmdexec.Result) {
				t.Logf("metadata %v", res.Metadata)
				assert.Equal(t, false, res.Metadata["commandExitConfirmed"])
				e.startAgain()
				res, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "echo", Args: []string{"again"}}, nil)
				require.NoError(t, err)
				assert.Equal(t, "again\n", res.Stdout)
				assert.Equal(t, 2, e.count("POST", rSession))
			}},
		stdout: streamedFirst,
	}, {
		// CancelLease ends the in-flight execute at once and refuses later
		// ones before any provider call, until ReopenLease; teardown still
		// deletes the session and the tombstone stays.
		streamedCase: streamedCase{name: "lease cancelled",
			run: func(t *testing.T, e *env, s *streamed) (cmdexec.Result, error) {
				s.awaitFirst(t)
				e.runner.CancelLease(e.target.LeaseKey)
				return e.wait(s.ch)
			},
			check: func(t *testing.T, e *env, _ *streamed, _ cmdexec.Result) {
				assert.False(t, e.runner.LeaseActive(e.target.LeaseKey))
				before := len(e.srv.Requests())
				_, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "true"}, nil)
				assert.ErrorIs(t, err, cmdexec.ErrLeaseNotActive)
				_, err = e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "true", BypassSession: true}, nil)
				assert.ErrorIs(t, err, cmdexec.ErrLeaseNotActive)
				assert.Equal(t, before, len(e.srv.Requests()), "refused before any provider call")
				var lerr *cmdexec.LeaseNotActiveError
				assert.True(t, errors.As(err, &lerr))

				require.NoError(t, e.runner.CloseLease(ctxT(t), e.target.LeaseKey))
				e.assertDeletes(t, 1)
				assert.False(t, e.runner.LeaseActive(e.target.LeaseKey))
				e.runner.ReopenLease(e.target.LeaseKey)
				res, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "echo", Args: []string{"back"}}, nil)
				require.NoError(t, err)
				assert.Equal(t, "back\n", res.Stdout)
			}},
		errIs: cmdexec.ErrLeaseNotActive, stdout: streamedFirst,
	}} {
		t.Run(c.name, func(t *testing.T) {
			e, s, res, err := c.execute(t)
			require.Error(t, err)
			t.Logf("error: %v", err)
			assert.Nil(t, res.ExitCode)
			assert.Equal(t, c.stdout, res.Stdout, "the output that arrived")
			assertLivePrefix(t, s.rec, res)
			if c.errIs != nil {
				require.ErrorIs(t, err, c.errIs)
			}
			c.check(t, e, s, res)
			assert.Equal(t, 1, e.srv.CountDispatches(s.id), "dispatched exactly once")
		})
	}
}

// TestFastPathCommandExitedBeforeFirstSnapshot: a command that has exited
// before the first log snapshot returns its own exit code, zero or not,
// and its exact bytes (no newline added to an unterminated last line) from
// that one read: two API calls in all (dispatch and snapshot), no status
// read, no follow socket, and no live output (the command had ended).
func TestFastPathCommandExitedBeforeFirstSnapshot(t *testing.T) {
	for _, code := range []int{0, 1, 42} {
		t.Run(fmt.Sprintf("exit %d", code), func(t *testing.T) {
			// Fake clock: the held read's 500 ms bound must not run out
			// while a loaded machine runs the command (the read would then
			// fail and the follow path would be taken).
			e := newEnv(t, withFakeClock)
			release := make(chan struct{})
			e.srv.Inject(fault{Method: "GET", Route: rLogs, Times: 1, Gate: release})
			rec := newRecorder()
			id := tag()
			ch := e.start(bashReq(fmt.Sprintf("printf 'a\\nb'; printf 'E' >&2; : %s; exit %d", id, code)), rec)
			// The first look of a line the lease does not know comes
			// markMargin after the dispatch; it is held until the command
			// has finished.
			require.NoError(t, e.srv.Await(ctxT(t), func() bool { return e.srv.CountDispatches(id) == 1 }))
			require.NoError(t, e.clock.AwaitTimer(ctxT(t), cmdexec.MarkMargin))
			e.clock.Advance(cmdexec.MarkMargin)
			e.awaitExited()
			close(release)
			res, err := e.wait(ch)
			require.NoError(t, err)
			require.NotNil(t, res.ExitCode)
			assert.Equal(t, code, *res.ExitCode, "the command's own exit code")
			assert.False(t, res.TimedOut)
			assert.Equal(t, "a\nb", res.Stdout, "exact bytes: no newline added")
			assert.Equal(t, "E", res.Stderr)
			assert.Equal(t, "read", res.Metadata["logStream"])
			assert.Equal(t, 0, e.wsCount(), "no follow socket")
			assert.Equal(t, 0, e.count("GET", rStatus), "no status read")
			assert.Equal(t, 1, e.count("GET", rLogs), "one snapshot")
			assert.Equal(t, 2, e.commandCalls(), "dispatch and snapshot")
			assert.Empty(t, rec.all(), "output of an ended command goes to the result only")
			assert.Equal(t, 1, e.srv.CountDispatches(id))
		})
	}
}

// What stderr ends with when a status or snapshot read after a clean close
// or a silent socket stalls until the 600 s deadline.
const observationTimeout600 = "Session log observation timed out after 600 s; command exit remains unconfirmed.\n"

// TestProviderTimeoutOnAnObservationReadKeepsTheOutput: the provider
// answers a status or log snapshot read with a timeout (504 Gateway
// Timeout, 408 Request Timeout) once the stream has closed cleanly or gone
// silent. The execute does not fail and lose the output: it is a timed-out
// result in the observation scope with everything buffered so far, the
// command's exit unconfirmed (or, for the final snapshot of an exited
// command, confirmed with its code), and the session of a command that may
// still run retired. The one-shot path treats the same answer as a
// timeout too (TestOneShotDaemonTimeout).
func TestProviderTimeoutOnAnObservationReadKeepsTheOutput(t *testing.T) {
	const (
		unconfirmed = "Session log observation timed out (the provider answered with a timeout); command exit remains unconfirmed.\n"
	)
	for _, status := range []int{504, 408} {
		for _, c := range []struct {
			name   string
			faults []fault
			tail   string
			idle   bool // the socket goes silent (the runner polls) instead of closing at the exit
			stdout string
			stderr string
			exit   *int // metadata.observedExitCode (and commandExitConfirmed)
		}{{
			// Every status read times out (the poll's read is the first).
			name:   "status read of the poll after a silent socket",
			faults: []fault{{Method: "GET", Route: rStatus, Status: status}},
			idle:   true,
			stdout: streamedFirst, stderr: "e1 ☃\n" + unconfirmed,
		}, {
			// Skip the follow.
			name:   "snapshot of the poll after a silent socket",
			faults: []fault{{Method: "GET", Route: rLogs, Skip: 1, Status: status}},
			idle:   true,
			stdout: streamedFirst, stderr: "e1 ☃\n" + unconfirmed,
		}} {
			t.Run(fmt.Sprintf("%d %s", status, c.name), func(t *testing.T) {
				e := newEnv(t, withFakeClock)
				for _, f := range c.faults {
					e.srv.Inject(f)
				}
				s := e.startStreamed(0, c.tail)
				s.awaitFirst(t)
				s.rec.await(t, "stderr", "e1 ☃\n")
				var res cmdexec.Result
				var err error
				if c.idle {
					res, err = e.drive(s.ch, silentSocketLimit)
				} else {
					s.gate.open(t)
					res, err = e.wait(s.ch)
				}
				require.NoError(t, err, "a provider timeout is a timed-out result, not an error")
				assert.True(t, res.TimedOut)
				assert.Nil(t, res.ExitCode)
				assert.Equal(t, c.stdout, res.Stdout, "the buffered output is kept")
				assert.Equal(t, c.stderr, res.Stderr)
				assert.Equal(t, "session_log_observation", res.Metadata["timeoutScope"])
				assert.Equal(t, c.exit != nil, res.Metadata["commandExitConfirmed"])
				if c.exit != nil {
					assert.Equal(t, *c.exit, res.Metadata["observedExitCode"])
					assert.Equal(t, 0, e.count("DELETE", rSessionD), "an exited command keeps its session")
				} else {
					assert.NotContains(t, res.Metadata, "observedExitCode")
					e.assertDeletes(t, 1, "the session of a command that may still run is retired")
				}
				assertLivePrefix(t, s.rec, res)
				assert.Equal(t, 1, e.srv.CountDispatches(s.id), "dispatched exactly once")
			})
		}
	}
}

// TestTimingIsTheReferences: the poll interval, the bound of the fast-path
// snapshot and the silent-socket limit are the reference's
// values; the tables above assert the behaviour with these values.
func TestTimingIsTheReferences(t *testing.T) {
	assert.Equal(t, time.Second, cmdexec.PollInterval)
	assert.Equal(t, 500*time.Millisecond, cmdexec.FastPathBound)
	assert.Equal(t, 15*time.Second, cmdexec.SilentSocketLimit)
	assert.Equal(t, pollInterval, cmdexec.PollInterval)
	assert.Equal(t, fastPathBound, cmdexec.FastPathBound)
	assert.Equal(t, silentSocketLimit, cmdexec.SilentSocketLimit)
}

// TestHealthyStreamHasNoLifetimeCap: a follow stream that keeps delivering
// output (a line every 14 s, under the silent-socket limit) is never cut,
// however long it lives (an hour here). The command's own
// exit code comes back with all of its output, nothing is polled, and no
// timer is left behind. The injected clock makes the hours free.
func TestHealthyStreamHasNoLifetimeCap(t *testing.T) {
	const (
		tick  = 14 * time.Second
		ticks = 258 // just over an hour
	)
	e := newEnv(t, withFakeClock)
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	// until: a read that found the previous writer still there gets EOF and
	// must wait for the next line.
	req := bashReq(fmt.Sprintf("for i in $(seq 1 %d); do until read _ < %s; do :; done; printf 't%%04d\\n' $i; done; : %s; exit 3", ticks, g.name, id))
	req.Timeout = 3 * time.Hour
	e.long(req)
	ch := e.start(req, rec)
	var want strings.Builder
	for i := 1; i <= ticks; i++ {
		g.open(t)
		line := fmt.Sprintf("t%04d\n", i)
		want.WriteString(line)
		if i == ticks {
			break // the last line may come with the end markers: result only
		}
		rec.await(t, "stdout", line)
		// The silence watchdog was re-armed by this line: moving 14 s on
		// never lets it fire.
		require.NoError(t, e.clock.AwaitFreshTimer(ctxT(t), silentSocketLimit), "tick %d", i)
		e.clock.Advance(tick)
	}
	res, err := e.wait(ch)
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode)
	assert.Equal(t, 3, *res.ExitCode)
	assert.False(t, res.TimedOut)
	assert.Equal(t, want.String(), res.Stdout)
	assert.GreaterOrEqual(t, res.Metadata["durationMs"], int64((ticks-1)*tick/time.Millisecond))
	assert.Equal(t, "followed", res.Metadata["logStream"], "never switched to polling")
	assert.Equal(t, 1, e.wsCount(), "one follow connection")
	assertLive(t, rec, res)
	assert.Equal(t, 1, e.srv.CountDispatches(id), "dispatched exactly once")
	require.NoError(t, e.clock.AwaitNoTimers(ctxT(t)), "no timer left: %v", e.clock.Pending())
}
