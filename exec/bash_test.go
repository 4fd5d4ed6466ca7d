package exec_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// secretValue is an env value no result may ever show.
const secretValue = "s3cr3t-VALUE-9f27"

// bashCase is one command of the bash-equivalence table: what local bash
// gives for it is what the worker must give.
type bashCase struct {
	name   string
	script string
	stdin  *string
	// files are written to the sandbox home and the local directory first.
	files map[string]string
}

// bashCases are the commands of docs/exec.md#what-bash-gives. None prints
// a NUL byte or a label byte run (\x01\x01\x01, \x02\x02\x02): the
// daemon's session log cannot carry them (README, "Known limits").
func bashCases() []bashCase {
	var mixed strings.Builder // 1 MiB of mixed UTF-8
	for i := 0; mixed.Len() < 1<<20; i++ {
		mixed.WriteString(strings.Repeat("aé🙂☃ ", i%40))
		mixed.WriteString("\n")
	}
	long := strings.Repeat("0123456789abcdef", 16<<10) // a 256 KiB line
	hello := "hello\nworld"
	return []bashCase{
		{name: "prints nothing", script: "true"},
		{name: "no final newline", script: "printf abc; printf def >&2"},
		{name: "interleaved streams", script: `for i in $(seq 1 100); do printf "o$i "; printf "e$i\n" >&2; done`},
		{name: "carriage-return progress", script: `for p in 10 50 100; do printf "\r$p%%"; done; printf '\rdone\n'`},
		{name: "1 MiB of mixed UTF-8", script: "cat mixed.txt; head -c 1000 mixed.txt >&2", files: map[string]string{"mixed.txt": mixed.String()}},
		{name: "invalid UTF-8", script: `printf 'ok \xff\xfe end\n'; printf '\xc3(\n' >&2`},
		{name: "256 KiB lines", script: "cat long.txt; echo; cat long.txt >&2", files: map[string]string{"long.txt": long}},
		// The job waits for a file the test creates once the answer came,
		// at most 30 s: it never outlives the test for long.
		{name: "background job that prints later", script: `(for i in $(seq 600); do [ -e release ] && break; sleep 0.05; done; echo late) & echo early`},
		{name: "exec away the shell", script: "echo before; exec printf 'after\\n'"},
		{name: "kills itself with SIGKILL", script: `echo going; kill -9 $$; echo never`},
		{name: "kills itself with SIGTERM", script: `echo going >&2; kill -TERM $$`},
		{name: "closes stdout", script: `exec >&-; echo to-err >&2; echo to-out; exit 4`},
		{name: "trap EXIT", script: `trap 'echo bye; echo bye-err >&2' EXIT; echo hi; exit 3`},
		{name: "reads stdin, none given", script: `cat; read x; echo "read=$? [$x]"`},
		{name: "reads stdin given", script: `cat; echo "<end>"`, stdin: &hello},
		{name: "does not read its stdin", script: `echo ignored`, stdin: &hello},
		{name: "prints fake end markers", script: `printf '\037%s=0;1;2\n' 0123456789abcdef0123456789abcdef; printf '\037deadbeef\n' >&2; echo real`},
		{name: "exit status", script: "echo out; echo err >&2; exit 42"},
	}
}

// local is what bash itself gives for a case: separate streams, the
// combined stream, and the exit status, with output taken when the shell
// exits (a background job's later output is not part of it).
type local struct {
	stdout, stderr, combined string
	code                     int
	took                     time.Duration // the split run's wall time
}

func runLocal(t *testing.T, c bashCase) local {
	t.Helper()
	var l local
	// Each run has a directory of its own: a background job that waits
	// for "release" sees only its own run's.
	run := func(split bool) (string, string, int) {
		dir := t.TempDir()
		for name, text := range c.files {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
		}
		out, err := os.CreateTemp(dir, "out")
		require.NoError(t, err)
		defer out.Close()
		errf := out
		if split {
			errf, err = os.CreateTemp(dir, "err")
			require.NoError(t, err)
			defer errf.Close()
		}
		cmd := osexec.Command("bash", "-c", c.script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SECRET_TOKEN="+secretValue)
		cmd.Stdout, cmd.Stderr = out, errf
		if c.stdin != nil {
			cmd.Stdin = strings.NewReader(*c.stdin)
		}
		begin := time.Now()
		err = cmd.Run()
		if split {
			l.took = time.Since(begin)
		}
		code := 0
		var ee *osexec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		} else {
			require.NoError(t, err)
		}
		o, err := os.ReadFile(out.Name())
		require.NoError(t, err)
		e := []byte(nil)
		if split {
			e, err = os.ReadFile(errf.Name())
			require.NoError(t, err)
		}
		// Let this run's background job go.
		require.NoError(t, os.WriteFile(filepath.Join(dir, "release"), nil, 0o600))
		return hostText(o), hostText(e), code
	}
	l.stdout, l.stderr, l.code = run(true)
	l.combined, _, _ = run(false)
	return l
}

// TestCommandsGiveWhatBashGives: through the runner with the worker's own
// options, on both paths, every command of the table gives what local
// bash gives: the exact bytes of each stream on the session path (the
// combined bytes one-shot), the exit status, no timeout, live output a
// prefix of the result, and no env value anywhere (a signal death makes
// the shell print a job-status line that quotes the whole command).
// A background job that prints later does not hold the answer: it waits
// for a file the test creates only after the answer came.
func TestCommandsGiveWhatBashGives(t *testing.T) {
	for _, c := range bashCases() {
		want := runLocal(t, c)
		t.Run(c.name, func(t *testing.T) {
			onBothPaths(t, func(t *testing.T, bypass bool) {
				e := newDaemonEnv(t)
				dir := e.workDir(t)
				for name, text := range c.files {
					_, err := e.client.Files.UploadFile(ctxT(t), e.target.Sandbox, dir+"/"+name, strings.NewReader(text))
					require.NoError(t, err)
				}
				req := bashReq(c.script)
				req.Cwd, req.Stdin, req.BypassSession = dir, c.stdin, bypass
				req.Env = map[string]string{"SECRET_TOKEN": secretValue}
				rec := newRecorder()
				begin := time.Now()
				res, err := e.runner.Execute(ctxT(t), e.target, req, rec.sink)
				// A measurement for the record (docs/emulator.md#the-fidelity-tier), not a bound.
				t.Logf("took %v through the runner, %v in local bash", time.Since(begin).Round(time.Millisecond), want.took.Round(time.Millisecond))
				release(t, e, dir)
				require.NoError(t, err)
				require.False(t, res.TimedOut)
				require.NotNil(t, res.ExitCode)
				assert.Equal(t, want.code, *res.ExitCode, "exit status")
				if bypass {
					assert.True(t, res.Stdout == want.combined, "combined output: got %d bytes %q…, want %d bytes %q…", len(res.Stdout), head(res.Stdout), len(want.combined), head(want.combined))
					assert.Empty(t, res.Stderr)
				} else {
					assert.True(t, res.Stdout == want.stdout, "stdout: got %d bytes %q…, want %d bytes %q…", len(res.Stdout), head(res.Stdout), len(want.stdout), head(want.stdout))
					assert.True(t, res.Stderr == want.stderr, "stderr: got %d bytes %q…, want %d bytes %q…", len(res.Stderr), head(res.Stderr), len(want.stderr), head(want.stderr))
				}
				assertLiveOn(t, bypass, rec, res)
				assert.NotContains(t, res.Stdout+res.Stderr+rec.text("stdout")+rec.text("stderr"), secretValue)
			})
		})
	}
}

func head(s string) string { return s[:min(len(s), 40)] }

// release lets a case's background job end (it waits for the file).
func release(t *testing.T, e *env, dir string) {
	t.Helper()
	_, err := e.client.Files.UploadFile(ctxT(t), e.target.Sandbox, dir+"/release", strings.NewReader(""))
	require.NoError(t, err)
}

// workDir makes a directory of the test's own in the sandbox, through
// the toolbox (a real daemon's sandbox is this machine: it must not be
// shared between tests), and removes it at the end.
func (e *env) workDir(t *testing.T) string {
	t.Helper()
	dir := "/tmp/exec-test-" + tag()
	_, err := e.client.Files.CreateFolder(ctxT(t), e.target.Sandbox, dir, "700")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = e.client.Files.Delete(context.Background(), e.target.Sandbox, dir, true) })
	return dir
}

// TestConcurrentCommandsOnOneLease: commands run at once on one lease each
// give their own output and status, on both paths.
func TestConcurrentCommandsOnOneLease(t *testing.T) {
	e := newDaemonEnv(t)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := bashReq("printf 'out-%d'; printf 'err-%d' >&2; exit %d")
			req.Args[1] = strings.NewReplacer("%d", string(rune('0'+i))).Replace(req.Args[1])
			req.BypassSession = i%2 == 1
			res, err := e.runner.Execute(ctxT(t), e.target, req, nil)
			if !assert.NoError(t, err) || !assert.NotNil(t, res.ExitCode) {
				return
			}
			n := string(rune('0' + i))
			assert.Equal(t, i, *res.ExitCode)
			if req.BypassSession {
				assert.Equal(t, "out-"+n+"err-"+n, res.Stdout)
			} else {
				assert.Equal(t, "out-"+n, res.Stdout)
				assert.Equal(t, "err-"+n, res.Stderr)
			}
		}()
	}
	wg.Wait()
}

// TestTimedOutCommandAnswersBeforeItsCleanup: a command that ignores
// SIGTERM times out; the answer does not wait for its session's delete
// (the daemon holds a DELETE for its 5 s grace before SIGKILL): the
// emulator holds the delete until the answer has come. The output so far
// is kept, and the teardown waits for the delete. The deadline is the
// fake clock's, passed once the runner has the command's output.
func TestTimedOutCommandAnswersBeforeItsCleanup(t *testing.T) {
	e := newEnv(t, withFakeClock)
	gate := make(chan struct{})
	e.srv.Inject(fault{Method: "DELETE", Route: rSessionD, Gate: gate})
	req := bashReq(`trap '' TERM; echo started; exec sleep 60`)
	req.Timeout = 3 * time.Second
	e.long(req)
	rec := newRecorder()
	ch := e.start(req, rec)
	rec.await(t, "stdout", "started\n") // the runner has it
	e.clock.Advance(req.Timeout)
	res, err := e.wait(ch)
	close(gate)
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.Nil(t, res.ExitCode)
	assert.True(t, strings.HasPrefix(res.Stdout, "started\n"), "output so far kept: %q", res.Stdout)
	require.NoError(t, e.runner.CloseLease(ctxT(t), e.target.LeaseKey))
	assert.Equal(t, 1, e.count("DELETE", rSessionD), "the retired session is deleted by the teardown at the latest")
}

// TestTimedOutOneShotKeepsItsOutput: the daemon answers a one-shot command
// that outlives its timeout with a 408 and no output; the runner reads
// what the command wrote from its output file, and removes the file.
func TestTimedOutOneShotKeepsItsOutput(t *testing.T) {
	e := newDaemonEnv(t)
	dir := e.workDir(t)
	// 5 s: time enough for bash to start and print on a loaded machine.
	req := bashReq(`echo started; echo err >&2; exec sleep 60`)
	req.Timeout, req.BypassSession, req.Cwd = 5*time.Second, true, dir
	res, err := e.runner.Execute(ctxT(t), e.target, req, nil)
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.Nil(t, res.ExitCode)
	assert.True(t, strings.HasPrefix(res.Stdout, "started\nerr\n"), "output so far kept: %q", res.Stdout)
	assert.Equal(t, 1, e.count("DELETE", "/files"), "the output file is removed")
}

// TestNULBytesOneShot: the one-shot path keeps NUL bytes (the session
// path cannot: README, "Known limits").
func TestNULBytesOneShot(t *testing.T) {
	e := newDaemonEnv(t)
	req := bashReq(`printf 'x\0y'`)
	req.BypassSession = true
	res, err := e.runner.Execute(ctxT(t), e.target, req, nil)
	require.NoError(t, err)
	assert.Equal(t, "x\x00y", res.Stdout)
	assert.True(t, bytes.Equal([]byte(res.Stdout), []byte("x\x00y")))
}
