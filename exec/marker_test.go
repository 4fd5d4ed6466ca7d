package exec

import (
	"bytes"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMarkerSplitAcrossFeedsNeverReachesTheSink: the end markers arrive cut
// at every possible point (and byte by byte); no byte of them reaches the
// sink or the result, the output before them is exact, and the exit status
// is read from the stdout marker.
func TestMarkerSplitAcrossFeedsNeverReachesTheSink(t *testing.T) {
	m := newEndMarker()
	out := append(append([]byte("out é"), m.tok...), "=7;1700000000.250000;1700000000.265500\n"...)
	errs := append(append([]byte("err"), m.tok...), '\n')
	check := func(t *testing.T, o *output, sl *sinkLog) {
		t.Helper()
		code, ok := o.ended()
		require.True(t, ok, "both markers seen")
		assert.Equal(t, 7, code)
		run, timed := o.runTime()
		assert.True(t, timed)
		assert.InDelta(t, 15500*time.Microsecond, run, float64(time.Microsecond))
		o.finish()
		stdout, stderr, _ := o.snapshot()
		assert.Equal(t, "out é", stdout)
		assert.Equal(t, "err", stderr)
		for _, c := range sl.calls {
			assert.NotContains(t, c[1], "\x1f", "a marker byte reached the sink")
		}
		assert.True(t, strings.HasPrefix("out é", sl.text("stdout")), "live %q", sl.text("stdout"))
		assert.True(t, strings.HasPrefix("err", sl.text("stderr")), "live %q", sl.text("stderr"))
	}
	for cut := 0; cut <= len(out); cut++ {
		t.Run(fmt.Sprintf("cut %d", cut), func(t *testing.T) {
			var sl sinkLog
			o := newOutput(sl.sink, 0)
			o.useMarker(m.tok)
			g := o.nextGen()
			o.feed(g, 0, 0, out[:cut])
			o.feed(g, 1, 0, errs[:min(cut, len(errs))])
			o.feed(g, 0, int64(cut), out[cut:])
			o.feed(g, 1, int64(min(cut, len(errs))), errs[min(cut, len(errs)):])
			check(t, o, &sl)
		})
	}
	t.Run("byte by byte", func(t *testing.T) {
		var sl sinkLog
		o := newOutput(sl.sink, 0)
		o.useMarker(m.tok)
		g := o.nextGen()
		for i := range max(len(out), len(errs)) {
			if i < len(out) {
				o.feed(g, 0, int64(i), out[i:i+1])
			}
			if i < len(errs) {
				o.feed(g, 1, int64(i), errs[i:i+1])
			}
		}
		check(t, o, &sl)
		assert.Equal(t, "out é", sl.text("stdout"), "the output before the marker went live as it came")
	})
}

// TestForgedMarkersAreOutput: text that only looks like an end marker (a
// token of the right shape but not this command's, the lead byte with a
// prefix of the real token that the next bytes contradict, the real token
// without a status after it) is the command's output, byte for byte, and
// does not end it.
func TestForgedMarkersAreOutput(t *testing.T) {
	m := newEndMarker()
	other := newEndMarker()
	for _, c := range []struct {
		name  string
		feeds []string
	}{
		{"another command's markers", []string{"a" + string(other.tok) + "=0\n", "b"}},
		{"a prefix of the token, then other bytes", []string{"a" + string(m.tok[:12]), "zz"}},
		{"the token without a status", []string{"a" + string(m.tok) + "x0\n"}},
		{"the token with a malformed status", []string{"a" + string(m.tok) + "=1a\n"}},
		{"the token with one clock reading", []string{"a" + string(m.tok) + "=1;2.5\n"}},
		{"the token with a clock that is not a number", []string{"a" + string(m.tok) + "=1;x;2\n"}},
		{"the token with a status line that never ends", []string{"a" + string(m.tok) + "=1;" + strings.Repeat("1", 70)}},
		{"a prefix of the token at the end of the output", []string{"a" + string(m.tok[:5])}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sl sinkLog
			o := newOutput(sl.sink, 0)
			o.useMarker(m.tok)
			g := o.nextGen()
			var want bytes.Buffer
			for _, f := range c.feeds {
				o.feed(g, 0, int64(want.Len()), []byte(f))
				want.WriteString(f)
			}
			_, ok := o.ended()
			assert.False(t, ok, "not the end")
			o.finish() // the exit came from the status read
			stdout, _, _ := o.snapshot()
			assert.Equal(t, want.String(), stdout)
			assert.Equal(t, stdout, sl.text("stdout"))
		})
	}
}

// TestMarkerWrapNeverSpellsTheToken: the script carries the token's digits
// in two halves, so a shell echoing or tracing its input never prints the
// marker; the command itself runs in its own subshell.
func TestMarkerWrapNeverSpellsTheToken(t *testing.T) {
	m := newEndMarker()
	w := m.wrap("echo hi", true)
	assert.NotContains(t, w, string(m.tok[1:]))
	assert.Contains(t, w, "; { ( exec 2>&9 9>&-; unset __paperclip_t0; unset -f __paperclip_end; echo hi ) </dev/null; } 9>&2 2>/dev/null; ", w)
	assert.Contains(t, w, m.half1+" "+m.half2)
	assert.NotEqual(t, string(m.tok), string(newEndMarker().tok), "a new token per command")
	assert.Len(t, m.tok, 33)
}

// TestStatusLine: the stdout marker's status line, whole or cut short
// (valid: it may still become one), with and without the shell's clock.
func TestStatusLine(t *testing.T) {
	for _, c := range []struct {
		in              string
		complete, valid bool
		code            int
		run             time.Duration // 0: untimed
	}{
		{"=7\n", true, true, 7, 0},
		{"=0;1700000000.500000;1700000000.520250\n", true, true, 0, 20250 * time.Microsecond},
		{"=3;1700000000,5;1700000001,0\n", true, true, 3, 500 * time.Millisecond},
		{"=0;;\n", true, true, 0, 0},       // a shell without $EPOCHREALTIME
		{"=0;2.0;1.0\n", true, true, 0, 0}, // the clock went back: not learned from
		{"=0;1.0;7201.0\n", true, true, 0, 2 * time.Hour},
		{"=0;1.0;99999999999999999999.0\n", true, true, 0, 0}, // not a duration: untimed
		{"=12\nmore", true, true, 12, 0},
		{"", false, true, 0, 0},
		{"=", false, true, 0, 0},
		{"=7", false, true, 0, 0},
		{"=7;", false, true, 0, 0},
		{"=7;1.5;", false, true, 0, 0},
		{"=7;1.5;1.6", false, true, 0, 0},
		{"=\n", false, false, 0, 0},
		{"=;1;2\n", false, false, 0, 0},
		{"=7;1.5\n", false, false, 0, 0},
		{"=7;1;2;3\n", false, false, 0, 0},
		{"=7;1e3;2\n", false, false, 0, 0},
		{"=12345678901\n", false, false, 0, 0},
		{"x", false, false, 0, 0},
		{"=7;" + strings.Repeat("1", 30) + ";1\n", false, false, 0, 0},
	} {
		st, complete, valid := parseStatus([]byte(c.in))
		assert.Equal(t, c.complete, complete, "%q complete", c.in)
		assert.Equal(t, c.valid, valid, "%q valid", c.in)
		if c.complete {
			assert.Equal(t, c.code, st.code, "%q code", c.in)
			assert.Equal(t, c.run != 0, st.timed, "%q timed", c.in)
			assert.InDelta(t, c.run, st.run, float64(time.Microsecond), "%q run time", c.in)
		}
	}
}

// TestWrapInEveryShell runs a wrapped script in each session shell the
// daemon may pick that this machine has (zsh, bash, sh): the output before
// the markers is exact, the exit status is the script's, the script sees
// no variable of the wrapper, and the run time comes with it where the
// shell has a clock (zsh and bash) and is absent, the status still
// proof, where it has none.
func TestWrapInEveryShell(t *testing.T) {
	for _, sh := range shells(t) {
		for _, files := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/files=%v", sh.name, files), func(t *testing.T) {
				m := newEndMarker()
				dir := t.TempDir()
				raw := filepath.Join(dir, "raw")
				require.NoError(t, os.WriteFile(raw, []byte("\x00\x01\x01\x01"), 0o600))
				script := `printf 'a\nb[%s]' "${__paperclip_t0-unset}"; cat ` + raw + `; printf E >&2; exit 3`
				outPath, errPath := filepath.Join(dir, "o"), filepath.Join(dir, "e")
				w := m.wrap(script, true)
				if files {
					w = m.wrapFiles(script, true, outPath, errPath)
				}
				cmd := osexec.Command(sh.path, "-c", w)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				var exit *osexec.ExitError
				require.ErrorAs(t, err, &exit)
				assert.Equal(t, 3, exit.ExitCode(), "the script's status")
				gotOut, gotErr := stdout.Bytes(), stderr.Bytes()
				if files {
					assert.Empty(t, stdout.String()+stderr.String(), "nothing reaches the log")
					gotOut, err = os.ReadFile(outPath)
					require.NoError(t, err)
					gotErr, err = os.ReadFile(errPath)
					require.NoError(t, err)
				}
				o := newOutput(nil, 0)
				o.useMarker(m.tok)
				g := o.nextGen()
				o.feed(g, 0, 0, gotOut)
				o.feed(g, 1, 0, gotErr)
				code, ok := o.ended()
				require.True(t, ok, "both markers: %q %q", gotOut, gotErr)
				assert.Equal(t, 3, code)
				_, timed := o.runTime()
				assert.Equal(t, sh.timed, timed, "run time in %q", gotOut)
				o.finish()
				out, errOut, _ := o.snapshot()
				assert.Equal(t, "a\nb[unset]\x00\x01\x01\x01", out, "the bytes as the shell wrote them")
				assert.Equal(t, "E", errOut)
			})
		}
	}
}

// shells returns the session shells the daemon may pick that this machine
// has, with whether they have a clock.
func shells(t *testing.T) []struct {
	name, path string
	timed      bool
} {
	var out []struct {
		name, path string
		timed      bool
	}
	for _, c := range []struct {
		name  string
		timed bool
	}{{"zsh", true}, {"bash", true}, {"dash", false}} {
		path, err := osexec.LookPath(c.name)
		if err != nil {
			t.Logf("%s: not installed here", c.name)
			continue
		}
		out = append(out, struct {
			name, path string
			timed      bool
		}{c.name, path, c.timed})
	}
	require.NotEmpty(t, out, "no shell to run the wrapper in")
	return out
}

// TestWrappedCommandIsTheSessionShellsChild: between the session shell and
// the command there is exactly one process creation (the subshell that
// keeps exit from the session shell, which then becomes the command), so a
// short command costs the sandbox no more processes than it must. Each
// costs milliseconds there; before, the wrapper made three.
func TestWrappedCommandIsTheSessionShellsChild(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(sh.name, func(t *testing.T) {
			m := newEndMarker()
			script := buildScript("sh", []string{"-c", "echo parent=$PPID"}, t.TempDir(), nil, "")
			cmd := osexec.Command(sh.path, "-c", "echo shell=$$; "+m.wrap(script.execLast(), true))
			cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
			out, err := cmd.Output()
			require.NoError(t, err, "%s", out)
			var shellPID, parent int
			for _, line := range strings.Split(string(out), "\n") {
				_, _ = fmt.Sscanf(line, "shell=%d", &shellPID)
				_, _ = fmt.Sscanf(line, "parent=%d", &parent)
			}
			require.NotZero(t, shellPID, "%s", out)
			assert.Equal(t, shellPID, parent, "the command's parent is the session shell: %s", out)
		})
	}
}

// TestWrapLeavesTheSessionShellAsItWas: after a wrapped command the session
// shell has no variable or function of the wrapper's, whatever the
// command's status, and its $? is the command's.
func TestWrapLeavesTheSessionShellAsItWas(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(sh.name, func(t *testing.T) {
			m := newEndMarker()
			check := `; echo "rc=$?"; for v in __paperclip_t0 __paperclip_s; do eval "[ -z \"\${$v+set}\" ]" || echo "left:$v"; done; ` +
				`command -v __paperclip_end >/dev/null 2>&1 && echo left:__paperclip_end; exit 0`
			cmd := osexec.Command(sh.path, "-c", m.wrap("exit 5", true)+check)
			out, err := cmd.Output()
			require.NoError(t, err, "%s", out)
			assert.Contains(t, string(out), "rc=5\n")
			assert.NotContains(t, string(out), "left:")
		})
	}
}

// TestCrossedMarkerAfterTheStreamsOwn: the status marker the log moved to
// stderr may come after stderr's own marker (the two labelers write the
// log in their own order): it still ends the command.
func TestCrossedMarkerAfterTheStreamsOwn(t *testing.T) {
	m := newEndMarker()
	o := newOutput(nil, 0)
	o.useMarker(m.tok)
	g := o.nextGen()
	bare := append(append([]byte{}, m.tok...), '\n')
	status := append(append([]byte{}, m.tok...), "=7;1.0;1.5\n"...)
	o.feed(g, 0, 0, []byte("a\x01\x01\x01"))
	o.feed(g, 1, 0, append([]byte("e"), bare...))
	_, ok := o.ended()
	require.False(t, ok)
	o.feed(g, 1, int64(1+len(bare)), status)
	code, ok := o.ended()
	require.True(t, ok, "both markers")
	assert.Equal(t, 7, code)
	assert.True(t, o.garbled())
	o.finish()
	stdout, stderr, _ := o.snapshot()
	assert.Equal(t, "a\x01\x01\x01", stdout)
	assert.Equal(t, "e", stderr, "nothing after stderr's own marker is output")
}
