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
	for _, bypass := range []bool{false, true} {
		t.Run(map[bool]string{false: "session", true: "one-shot"}[bypass], func(t *testing.T) {
			e := newEnv(t)
			id := tag()
			rec := newRecorder()
			res, err := e.runner.Execute(ctxT(t), e.target, cmdexec.Request{
				Command: "sha256sum", Args: []string{"-"}, Stdin: &stdin, Timeout: time.Hour, BypassSession: bypass,
				Env: map[string]string{"TAG": id},
			}, rec.sink)
			require.NoError(t, err)
			assert.Equal(t, 0, *res.ExitCode)
			assert.Equal(t, want, res.Stdout)
			assertLive(t, rec, res)
			assert.Empty(t, stdinFiles(t, e), "stdin file removed")
			assert.Equal(t, 1, e.srv.CountDispatches(id))
			assert.Equal(t, 1, e.count("DELETE", "/files"))
		})
	}
}

func TestStdinFileRemovedWhenTheCommandFails(t *testing.T) {
	e := newEnv(t)
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
	for _, bypass := range []bool{false, true} {
		t.Run(map[bool]string{false: "session", true: "one-shot"}[bypass], func(t *testing.T) {
			e := newEnv(t)
			id := tag()
			rec := newRecorder()
			req := bashReq(script + id)
			req.BypassSession = bypass
			res, err := e.runner.Execute(ctxT(t), e.target, req, rec.sink)
			require.NoError(t, err)
			assert.Equal(t, 0, *res.ExitCode)
			assertLive(t, rec, res)
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
				assert.Equal(t, hostText(c.Stdout), res.Stdout)
				assert.Equal(t, hostText(c.Stderr), res.Stderr)
				assert.Equal(t, "A\uFFFD\uFFFDBéC🙂D\uFFFDE☃F\uFFFDG\uFFFD\uFFFD\uFFFD\n", res.Stdout)
				assert.Equal(t, "err \uFFFD\n", res.Stderr)
			}
			assert.Equal(t, 1, e.srv.CountDispatches(id))
		})
	}
}

func TestOutputCapTruncatesWithMarker(t *testing.T) {
	for _, bypass := range []bool{false, true} {
		t.Run(map[bool]string{false: "session", true: "one-shot"}[bypass], func(t *testing.T) {
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
			assertLive(t, rec, res)
		})
	}
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
	require.NoError(t, os.WriteFile(filepath.Join(e.info.HomeDir, ".profile"), []byte("export FROM_PROFILE=profile-ok\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(e.info.HomeDir, ".bashrc"), []byte("export FROM_BASHRC=bashrc-ok\necho noisy\n"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(e.info.HomeDir, "sub dir"), 0o700))
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
		for _, bypass := range []bool{false, true} {
			t.Run(c.name+map[bool]string{false: "/session", true: "/one-shot"}[bypass], func(t *testing.T) {
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
		}
	}
}
