package exec_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	cmdexec "github.com/daytonaworker/daytona-worker/exec"
)

// hostText decodes bytes the way the runner (and encoding/json) does:
// each invalid byte becomes one U+FFFD.
func hostText(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			sb.WriteString("\uFFFD")
		} else {
			sb.Write(b[:n])
		}
		b = b[n:]
	}
	return sb.String()
}

func stdinFiles(t *testing.T, e *env) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(e.info.Root, "tmp", "paperclip-stdin-*"))
	require.NoError(t, err)
	return m
}

// needSandboxTmp skips a test that stages stdin in /tmp when the emulator
// fell back to the host layout, where /tmp is the host's and outside the
// sandbox's file APIs.
func needSandboxTmp(t *testing.T, e *env) {
	t.Helper()
	if ok, why := e.srv.Isolated(); !ok {
		t.Skip("the sandbox has no /tmp of its own: " + why)
	}
}

func TestStdinOfSeveralMiB(t *testing.T) {
	payload := make([]byte, 6<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/\n"
	for i := range payload {
		payload[i] = alphabet[rng.IntN(len(alphabet))]
	}
	stdin := string(payload) + "é🙂'\"$(x)`\\"
	sum := sha256.Sum256([]byte(stdin))
	want := hex.EncodeToString(sum[:]) + "  -\n"
	onBothPaths(t, func(t *testing.T, bypass bool) {
		e := newEnv(t)
		needSandboxTmp(t, e)
		id := tag()
		rec := newRecorder()
		res, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{
			Command: "sha256sum", Args: []string{"-"}, Stdin: &stdin, Timeout: time.Hour, BypassSession: bypass,
			Env: map[string]string{"TAG": id},
		}, rec.sink)
		require.NoError(t, err)
		assert.Equal(t, 0, *res.ExitCode)
		assert.Equal(t, want, res.Stdout)
		assertLiveOn(t, bypass, rec, res)
		assert.Empty(t, stdinFiles(t, e), "stdin file removed")
		assert.Equal(t, 1, e.srv.CountDispatches(id))
		assert.Equal(t, 1, e.count("DELETE", "/files"))
	})
}

func TestStdinFileRemovedWhenTheCommandFails(t *testing.T) {
	e := newEnv(t)
	needSandboxTmp(t, e)
	in := "x"
	e.srv.Inject(daytonatest.Fault{Route: rExec, Status: 500, Times: 1})
	_, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "cat", Stdin: &in}, nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, cmdexec.ErrDispatchUncertain)
	assert.Empty(t, stdinFiles(t, e))
	assert.Equal(t, 1, e.count("DELETE", "/files"))
}

func TestBinaryAndMultibyteOutput(t *testing.T) {
	// Invalid bytes, a lone continuation byte, truncated sequences, every
	// UTF-8 length, and a genuine U+FFFD.
	script := `printf 'A\377\376B\303\251C\360\237\231\202D\200E\342\230\203F\357\277\275G\360\237\231'; printf '\n'; printf 'err \303\n' >&2; : `
	onBothPaths(t, func(t *testing.T, bypass bool) {
		e := newEnv(t)
		id := tag()
		rec := newRecorder()
		req := bashReq(script + id)
		req.BypassSession = bypass
		res, err := e.runner.Execute(ctxT(t), e.target, req, rec.sink)
		require.NoError(t, err)
		assert.Equal(t, 0, *res.ExitCode)
		assertLiveOn(t, bypass, rec, res)
		for _, c := range rec.all() {
			assert.True(t, utf8.ValidString(c.text))
		}
		if bypass {
			assert.Contains(t, res.Stdout, "A\uFFFD\uFFFDBéC🙂D\uFFFDE☃F\uFFFDG\uFFFD")
			assert.Contains(t, res.Stdout, "err \uFFFD\n")
		} else {
			d := e.lastDispatch()
			c, ok := e.srv.Command(d.Sandbox, d.Session, d.CommandID)
			require.True(t, ok)
			assert.Equal(t, hostText([]byte(commandText(c.Stdout))), res.Stdout)
			assert.Equal(t, hostText([]byte(commandText(c.Stderr))), res.Stderr)
			assert.Equal(t, "A\uFFFD\uFFFDBéC🙂D\uFFFDE☃F\uFFFDG\uFFFD\uFFFD\uFFFD\n", res.Stdout)
			assert.Equal(t, "err \uFFFD\n", res.Stderr)
		}
		assert.Equal(t, 1, e.srv.CountDispatches(id))
	})
}

func TestOutputCapTruncatesWithMarker(t *testing.T) {
	onBothPaths(t, func(t *testing.T, bypass bool) {
		e := newEnv(t, withCap(100))
		rec := newRecorder()
		req := bashReq(`head -c 5000 /dev/zero | tr '\0' a; echo; echo small >&2`)
		req.BypassSession = bypass
		res, err := e.runner.Execute(ctxT(t), e.target, req, rec.sink)
		require.NoError(t, err)
		assert.Equal(t, 0, *res.ExitCode)
		marker := "\n[daytona-worker: stdout truncated after 100 characters; further output was discarded]\n"
		assert.Equal(t, strings.Repeat("a", 100)+marker, res.Stdout)
		if !bypass {
			assert.Equal(t, "small\n", res.Stderr)
		}
		assert.Equal(t, true, res.Metadata["outputTruncated"])
		assertLiveOn(t, bypass, rec, res)
	})
}

func TestLargeOutputMemoryStaysBounded(t *testing.T) {
	e := newEnv(t, withCap(1<<20))
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rec := newRecorder()
	res, err := e.runner.Execute(ctxT(t), e.target, bashReq(`yes 0123456789012345678901234567890123456789012345678901234567890123456789 | head -c 8388608`), rec.sink)
	require.NoError(t, err)
	assert.Equal(t, 0, *res.ExitCode)
	assert.Equal(t, true, res.Metadata["outputTruncated"])
	assert.LessOrEqual(t, len(res.Stdout), 1<<20+200)
	assertLive(t, rec, res)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// The log is 8 MiB; what the runner keeps is bounded by the 1 MiB cap.
	t.Logf("heap in use before %d MiB, after %d MiB; metadata %v", before.HeapInuse>>20, after.HeapInuse>>20, res.Metadata)
}

func TestEnvCwdProfileAndGitDefaults(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.info.WriteFile(".profile", []byte("export FROM_PROFILE=profile-ok\n"), 0o600))
	require.NoError(t, e.info.WriteFile(".bashrc", []byte("export FROM_BASHRC=bashrc-ok\necho noisy\n"), 0o600))
	require.NoError(t, os.Mkdir(e.info.HostPath("sub dir"), 0o700))
	require.NoError(t, e.info.Own(e.info.HostPath("sub dir")))
	for _, bypass := range []bool{false, true} {
		res, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{
			Command: "bash", Args: []string{"-c", `pwd; echo "$FROM_PROFILE $FROM_BASHRC $GIT_TERMINAL_PROMPT $GCM_INTERACTIVE $GIT_ASKPASS $SSH_ASKPASS $SSH_ASKPASS_REQUIRE"; echo "$FOO"; echo "$GIT_ASKPASS_X"`},
			Cwd:     filepath.Join(e.info.HomeDir, "sub dir"),
			Env:     map[string]string{"FOO": "it's \"quoted\" $HOME", "GCM_INTERACTIVE": "Always"},
			Timeout: time.Hour, BypassSession: bypass,
		}, nil)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(e.info.HomeDir, "sub dir")+"\nprofile-ok bashrc-ok 0 Always echo echo force\nit's \"quoted\" $HOME\n\n", res.Stdout)
	}
}

func TestInvalidEnvKeyRejectedBeforeAnyCall(t *testing.T) {
	e := newEnv(t)
	before := len(e.srv.Requests())
	for _, k := range []string{"1A", "A-B", "", "A B", "A=B"} {
		_, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{Command: "true", Env: map[string]string{k: "v"}}, nil)
		require.ErrorIs(t, err, cmdexec.ErrInvalidEnvKey)
		assert.Equal(t, "Invalid sandbox environment variable key: "+k, err.Error())
	}
	assert.Equal(t, before, len(e.srv.Requests()))
}

// TestTruncationMarkerStatesKeptCharacters: the number in the marker is
// the number of characters (Unicode code points) kept before it, whatever
// the text: plain ASCII, text dense with characters the cap counts as
// several units (quotes, newlines, control characters), and multibyte
// UTF-8 (2-, 3- and 4-byte characters), on both paths.
func TestTruncationMarkerStatesKeptCharacters(t *testing.T) {
	markerRE := regexp.MustCompile(`\n\[daytona-worker: stdout truncated after (\d+) characters; further output was discarded\]\n$`)
	for _, c := range []struct{ name, unit string }{
		{"ascii", `a`},
		{"escapes", `\"\n\x01\t\\<`},
		{"multibyte", `é€🙂x`},
	} {
		t.Run(c.name, func(t *testing.T) {
			onBothPaths(t, func(t *testing.T, bypass bool) {
				e := newEnv(t, withCap(1000))
				req := bashReq(fmt.Sprintf(`for i in $(seq 1500); do printf '%s'; done`, c.unit))
				req.BypassSession = bypass
				res, err := e.runner.Execute(ctxT(t), e.target, req, nil)
				require.NoError(t, err)
				assert.Equal(t, true, res.Metadata["outputTruncated"])
				m := markerRE.FindStringSubmatchIndex(res.Stdout)
				require.NotNil(t, m, "%q", res.Stdout)
				stated, err := strconv.Atoi(res.Stdout[m[2]:m[3]])
				require.NoError(t, err)
				kept := res.Stdout[:m[0]]
				assert.Equal(t, utf8.RuneCountInString(kept), stated)
				assert.Greater(t, stated, 0)
			})
		})
	}
}

// TestOneShotCombinedOutput: one-shot output comes back combined in
// stdout, and only in the result: the one-shot API answers once, so the
// runner sends no live output (the host would get it twice).
func TestOneShotCombinedOutput(t *testing.T) {
	e := newEnv(t)
	id := tag()
	rec := newRecorder()
	res, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{
		Command: "bash", Args: []string{"-c", "echo out; echo err >&2; exit 4", id}, BypassSession: true, Timeout: time.Hour,
	}, rec.sink)
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode, "%+v", res)
	assert.Equal(t, 4, *res.ExitCode)
	assert.Equal(t, "out\nerr\n", res.Stdout)
	assert.Equal(t, "", res.Stderr)
	assertNoLive(t, rec)
	assert.Equal(t, 1, e.srv.CountDispatches(id))
	d := e.lastDispatch()
	assert.Equal(t, "", d.Session)
	assert.NotContains(t, d.Command, "bwrap")
}

func TestOneShotDaemonTimeout(t *testing.T) {
	e := newEnv(t)
	res, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{
		Command: "sleep", Args: []string{"30"}, BypassSession: true, Timeout: time.Second,
	}, nil)
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.Nil(t, res.ExitCode)
	assert.Equal(t, "", res.Stdout)
	assert.Equal(t, "Command timed out after 1 s.\n", res.Stderr)
	assert.Contains(t, res.Metadata, "durationMs")
}

// TestOneShotProviderTimeout: the provider answers a one-shot execute with
// a timeout (408 from the daemon that killed the command, or a 504) after
// 1.5 s on the injected clock: a timed-out result, not an error, with no
// exit code, the reason in stderr, the duration of the call and the
// command-scope metadata, the same rule as the session path's timeouts.
func TestOneShotProviderTimeout(t *testing.T) {
	for _, status := range []int{408, 504} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			e := newEnv(t, withFakeClock)
			release := make(chan struct{})
			e.srv.Inject(daytonatest.Fault{Route: rExecute, Gate: release, Status: status, Times: 1})
			rec := newRecorder()
			ch := e.start(cmdexec.Request{Command: "echo", Args: []string{"never"}, BypassSession: true, Timeout: 30 * time.Second}, rec)
			require.NoError(t, e.srv.AwaitRequests(ctxT(t), "POST", rExecute, 1))
			e.clock.Advance(1500 * time.Millisecond)
			close(release)
			res, err := e.wait(ch)
			require.NoError(t, err, "a provider timeout is a timed-out result")
			assert.True(t, res.TimedOut)
			assert.Nil(t, res.ExitCode)
			assert.Equal(t, "", res.Stdout)
			assert.Equal(t, "Command timed out after 30 s.\n", res.Stderr)
			assert.Equal(t, int64(1500), res.Metadata["durationMs"])
			assert.Equal(t, "command", res.Metadata["timeoutScope"])
			assert.Equal(t, false, res.Metadata["commandExitConfirmed"])
			assertNoLive(t, rec)
		})
	}
}

func TestGitNetworkCommandCappedAndExplained(t *testing.T) {
	e := newEnv(t, withFakeClock)
	e.srv.Inject(daytonatest.Fault{Route: rExecute, Hang: true, Times: 1})
	ch := e.start(cmdexec.Request{Command: "/usr/bin/git", Args: []string{"-C", "repo", "fetch", "origin"}, BypassSession: true, Timeout: 3 * time.Hour}, nil)
	// 120 s cap plus the client's 5 s margin over the daemon's own timeout.
	e.awaitTimer(125 * time.Second)
	e.clock.Advance(125 * time.Second)
	res, err := e.wait(ch)
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.Equal(t, "Git network operation timed out after 120 s — the remote may be unreachable or noninteractive credentials are not configured.\n", res.Stderr)
}

// TestOneShotBeyondTheAnswerLimit: a one-shot command printing 34 MiB (more
// than the 32 MiB a buffered JSON answer may have) is not an error after
// the fact: its exit code comes back with the output truncated at the
// per-stream cap (1 MiB here, to keep the test light; the answer is read
// through whatever the cap), the marker and metadata.outputTruncated, and
// the live output is the same prefix.
func TestOneShotBeyondTheAnswerLimit(t *testing.T) {
	const limit = 1 << 20
	e := newEnv(t, withCap(limit))
	rec := newRecorder()
	req := bashReq(`head -c 35651584 /dev/zero | tr '\0' a; exit 3`)
	req.BypassSession = true
	// No deadline: 34 MiB through the emulator under the race detector on
	// a loaded machine takes what it takes; the test checks the outcome.
	res, err := e.runner.Execute(t.Context(), e.target, req, rec.sink)
	require.NoError(t, err)
	require.NotNil(t, res.ExitCode)
	assert.Equal(t, 3, *res.ExitCode)
	assert.Equal(t, true, res.Metadata["outputTruncated"])
	marker := "\n[daytona-worker: stdout truncated after 1048576 characters; further output was discarded]\n"
	assert.Equal(t, strings.Repeat("a", limit)+marker, res.Stdout)
	assertNoLive(t, rec)
}

// TestOneShotAnswerCutShort: a one-shot answer lost part way is an error
// (never a result with a made-up exit code); the output that arrived is
// returned with it.
func TestOneShotAnswerCutShort(t *testing.T) {
	e := newEnv(t)
	e.srv.Inject(daytonatest.Fault{Route: rExecute, Status: 200, Body: `{"exitCode":0,"result":"partial out`, Times: 1})
	req := bashReq(`echo never`)
	req.BypassSession = true
	res, err := e.runner.Execute(ctxT(t), e.target, req, nil)
	require.ErrorIs(t, err, daytona.ErrMalformedResponse)
	assert.Nil(t, res.ExitCode)
	assert.Equal(t, "partial out", res.Stdout)
}
