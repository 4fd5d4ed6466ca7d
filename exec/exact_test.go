package exec_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	cmdexec "github.com/daytonaworker/daytona-worker/exec"
)

// TestSessionOutputIsByteExact: on the session path each stream of the
// result is exactly what the command wrote, whether or not its last line
// ends with a newline (the daemon terminates an unterminated last line;
// the end marker on that line tells the runner the newline was not the
// command's), and the live output is a prefix of it.
func TestSessionOutputIsByteExact(t *testing.T) {
	var mixed strings.Builder // 1 MiB of mixed UTF-8, lines of many lengths, no final newline
	for i := 0; mixed.Len() < 1<<20; i++ {
		fmt.Fprintf(&mixed, "%d aé🙂☃ %s\n", i, strings.Repeat("ß", i%50))
	}
	mixedText := strings.TrimSuffix(mixed.String(), "\n")
	longLine := strings.Repeat("x", 64<<10-4) + "€" + "y" // a 64 KiB line, no newline
	var interOut, interErr strings.Builder
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&interOut, "o%d ", i)
		fmt.Fprintf(&interErr, "e%d ", i)
	}
	for _, c := range []struct {
		name, script   string
		files          map[string]string // written to the sandbox home first
		stdout, stderr string
	}{
		{name: "no trailing newline", script: "printf abc; printf def >&2", stdout: "abc", stderr: "def"},
		{name: "lines, the last unterminated", script: `printf 'a\nb'; printf 'c\nd' >&2`, stdout: "a\nb", stderr: "c\nd"},
		{name: "terminated lines", script: `printf 'a\nb\n'; printf 'c\n' >&2`, stdout: "a\nb\n", stderr: "c\n"},
		{name: "only newlines", script: `printf '\n\n\n'; printf '\n' >&2`, stdout: "\n\n\n", stderr: "\n"},
		{name: "no output", script: "true", stdout: "", stderr: ""},
		{name: "carriage-return progress", script: `printf '10%%\r50%%\r100%%\rdone'; printf 'p\r' >&2`,
			stdout: "10%\r50%\r100%\rdone", stderr: "p\r"},
		{name: "1 MiB of mixed UTF-8", script: "cat mixed.txt; cat mixed.txt >&2", files: map[string]string{"mixed.txt": mixedText},
			stdout: mixedText, stderr: mixedText},
		{name: "a 64 KiB line without newline", script: "cat long.txt; cat long.txt >&2", files: map[string]string{"long.txt": longLine},
			stdout: longLine, stderr: longLine},
		{name: "both streams interleaved", script: `for i in $(seq 1 200); do printf "o$i "; printf "e$i " >&2; done`,
			stdout: interOut.String(), stderr: interErr.String()},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			for name, text := range c.files {
				require.NoError(t, e.info.WriteFile(name, []byte(text), 0o600))
			}
			rec := newRecorder()
			id := tag()
			res, err := e.runner.Execute(ctxT(t), e.target, bashReq(c.script+"; : "+id), rec.sink)
			require.NoError(t, err)
			require.NotNil(t, res.ExitCode)
			assert.Equal(t, 0, *res.ExitCode)
			assert.True(t, res.Stdout == c.stdout, "stdout: %d bytes, want %d; ends %q", len(res.Stdout), len(c.stdout), tail(res.Stdout))
			assert.True(t, res.Stderr == c.stderr, "stderr: %d bytes, want %d; ends %q", len(res.Stderr), len(c.stderr), tail(res.Stderr))
			assertLive(t, rec, res)
			assert.Equal(t, 1, e.srv.CountDispatches(id))
		})
	}
}

func tail(s string) string { return s[max(0, len(s)-16):] }

// TestFinishedCommandDoesNotWaitForTheSocketClose: the daemon closes a log
// follow only about a second after the command's exit. A followed command
// (its last run was a long one) returns as soon as its end markers
// arrive: the emulator holds every follow of the session open until the
// test releases it, and the execute returns anyway, with no status read.
func TestFinishedCommandDoesNotWaitForTheSocketClose(t *testing.T) {
	e := newEnv(t, withFakeClock)
	e.holdFollowClose(t)
	req := bashReq("echo hi; echo err >&2; exit 4")
	e.long(req)
	rec := newRecorder()
	res, err := e.wait(e.start(req, rec))
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode)
	assert.Equal(t, 4, *res.ExitCode)
	assert.Equal(t, "hi\n", res.Stdout)
	assert.Equal(t, "err\n", res.Stderr)
	assert.Equal(t, "followed", res.Metadata["logStream"])
	assert.Equal(t, 1, e.wsCount(), "one follow, left before its close")
	assert.Equal(t, 0, e.count("GET", rStatus), "no status read")
	assert.Equal(t, 1, e.count("GET", rLogs), "the follow; no final snapshot")
	assertLive(t, rec, res)
}

// TestDeadShellIsNoticed: a command whose session shell dies (here it
// kills the shell's whole process group, as the OOM killer may) never
// gets an exit code from the daemon and its follow never closes. After
// the silent-socket limit the runner checks the shell once, learns it is
// dead, and answers with an error that says so and keeps the output; the
// dead session is deleted and the next command runs in a new one.
func TestDeadShellIsNoticed(t *testing.T) {
	e := newEnv(t, withFakeClock)
	rec := newRecorder()
	id := tag()
	// `kill -9 0`: the session shell's whole process group, as the OOM
	// killer may.
	req := bashReq("printf 'a\\nb'; printf E >&2; : " + id + "; kill -9 0")
	e.long(req)
	ch := e.start(req, rec)
	require.NoError(t, e.srv.Await(ctxT(t), func() bool {
		ds := e.srv.Dispatches()
		return len(ds) > 0 && e.srv.SessionShellExited(e.sb.ID, ds[0].Session)
	}))
	res, err := e.drive(ch, silentSocketLimit)
	require.ErrorIs(t, err, cmdexec.ErrShellDied)
	var died *cmdexec.ShellDiedError
	require.ErrorAs(t, err, &died)
	assert.Contains(t, err.Error(), "shell died")
	assert.Nil(t, res.ExitCode)
	assert.False(t, res.TimedOut)
	assert.Equal(t, true, res.Metadata["sessionShellDied"])
	// The shell's whole process group died, the daemon's labelers with
	// it: what they had not yet written to the log is lost (a held
	// unfinished line is kept with the newline the daemon appends).
	assert.True(t, strings.HasPrefix("a\nb\n", res.Stdout), "stdout %q", res.Stdout)
	assert.True(t, strings.HasPrefix("E\n", res.Stderr), "stderr %q", res.Stderr)
	assert.Equal(t, res.Stdout, died.Stdout)
	assertLivePrefix(t, rec, res)
	assert.Equal(t, 1, e.srv.CountDispatches(id))
	assert.Equal(t, 2, e.count("POST", rExec), "the command's dispatch and one check of the shell")
	e.assertDeletes(t, 1, "the dead session is deleted")
	next := cmdexec.Request{Command: "echo", Args: []string{"next"}}
	e.long(next) // followed: no look waits on the fake clock
	res, err = e.runner.Execute(ctxT(t), e.target, next, nil)
	require.NoError(t, err)
	assert.Equal(t, "next\n", res.Stdout)
	assert.Equal(t, 2, e.count("POST", rSession), "a new session")
}

// TestLostSessionIsRecreated: after the daemon lost the session (a
// restart), its exec answers are the v0.190.0 500s, or a newer daemon's
// 410 SESSION_ENDED: each proves the command did not start, so the session
// is recreated and the command dispatched once more, and it succeeds.
func TestLostSessionIsRecreated(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		body   string
	}{
		{"session not found (v0.190.0)", 500, `{"statusCode":500,"message":"failed to execute command: not found: session not found","timestamp":"0001-01-01T00:00:00Z","path":""}`},
		{"broken pipe of a dead shell (v0.190.0)", 500, `{"statusCode":500,"message":"failed to execute command: bad request: failed to write command: write |1: broken pipe","timestamp":"0001-01-01T00:00:00Z","path":""}`},
		{"SESSION_ENDED (newer daemons)", 410, `{"statusCode":410,"message":"session has ended","code":"SESSION_ENDED","timestamp":"2026-01-01T00:00:00Z","path":"/process/session/s/exec","method":"POST"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.srv.Inject(fault{Method: "POST", Route: rExec, Times: 1, Status: c.status, Body: c.body})
			id := tag()
			res, err := e.runner.Execute(ctxT(t), e.target, bashReq("echo ok; : "+id), nil)
			require.NoError(t, err)
			assert.Equal(t, "ok\n", res.Stdout)
			assert.Equal(t, 2, e.count("POST", rSession), "a new session")
			assert.Equal(t, 1, e.srv.CountDispatches(id), "the one dispatch that reached a shell")
		})
	}
	// A plain 500 proves nothing: the outcome stays unknown, never re-run.
	e := newEnv(t)
	e.srv.Inject(fault{Method: "POST", Route: rExec, Times: 1, Status: 500, Body: `{"statusCode":500,"message":"boom"}`})
	_, err := e.runner.Execute(ctxT(t), e.target, bashReq("echo ok"), nil)
	require.ErrorIs(t, err, cmdexec.ErrDispatchUncertain)
	assert.Equal(t, 1, e.count("POST", rExec))
}

// TestLostSessionAfterRestart: the emulator itself answers an exec on a
// session its restarted sandbox no longer has with the daemon's 500; the
// runner still holding the old session id recreates it.
func TestLostSessionAfterRestart(t *testing.T) {
	e := newEnv(t)
	_, err := e.runner.Execute(ctxT(t), e.target, bashReq("echo first"), nil)
	require.NoError(t, err)
	_, _, err = e.client.Sandboxes.Stop(ctxT(t), e.sb.ID, false)
	require.NoError(t, err)
	e.startAgain()
	res, err := e.runner.Execute(ctxT(t), e.target, bashReq("echo second"), nil)
	require.NoError(t, err)
	assert.Equal(t, "second\n", res.Stdout)
	assert.Equal(t, 2, e.count("POST", rSession))
}

// TestForgedMarkerDoesNotEndTheCommand: a command that prints text shaped
// like the end markers (a token of the right form, a lone lead byte) is not
// taken to have ended: that text streams live as output, the command runs
// on until it really exits, and the result holds every byte.
func TestForgedMarkerDoesNotEndTheCommand(t *testing.T) {
	const fake = "0123456789abcdef0123456789abcdef"
	e := newEnv(t)
	g := e.newGate()
	rec := newRecorder()
	id := tag()
	script := fmt.Sprintf(`printf 'x\037%%s=0\n' %s; printf '\037%%s\n' %s >&2; printf 'half\037xyz\n'; %s; printf after; : %s; exit 3`,
		fake, fake, g.shell(), id)
	ch := e.start(bashReq(script), rec)
	rec.await(t, "stdout", "x\x1f"+fake+"=0\nhalf\x1fxyz\n") // live: the runner took it for output
	rec.await(t, "stderr", "\x1f"+fake+"\n")
	select {
	case o := <-ch:
		t.Fatalf("the execute ended before the command: %+v", o)
	default:
	}
	g.open(t)
	res, err := e.wait(ch)
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode)
	assert.Equal(t, 3, *res.ExitCode)
	assert.Equal(t, "x\x1f"+fake+"=0\nhalf\x1fxyz\nafter", res.Stdout)
	assert.Equal(t, "\x1f"+fake+"\n", res.Stderr)
	assertLive(t, rec, res)
}
