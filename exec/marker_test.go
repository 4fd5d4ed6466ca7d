package exec

import (
	"bytes"
	"fmt"
	"os"
	osexec "os/exec"
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
		{"=0;;\n", true, true, 0, 0},          // a shell without $EPOCHREALTIME
		{"=0;2.0;1.0\n", true, true, 0, 0},    // the clock went back: not learned from
		{"=0;1.0;7201.0\n", true, true, 0, 0}, // longer than an hour: not learned from
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

// TestSettleFromRunTimes: the wait before a first read is the run time 80 %
// of the lease's recent short commands (of the last 8) stayed within, plus
// the margin (1 ms to start with); none while nothing is known or while
// most recent commands are long ones.
func TestSettleFromRunTimes(t *testing.T) {
	ms := time.Millisecond
	var r runTimes
	assert.Equal(t, time.Duration(0), first(r.settleCommand(0)), "nothing known")
	r.add(2 * time.Second)
	assert.Equal(t, time.Duration(0), first(r.settleCommand(0)), "a long command only")
	r.add(20 * ms)
	assert.Equal(t, 21*ms, first(r.settleCommand(0)), "half are short: the short one")
	r.add(30 * ms)
	assert.Equal(t, 31*ms, first(r.settleCommand(0)), "few samples: the largest short one")
	for _, d := range []time.Duration{22, 21, 25, 23, 24} {
		r.add(d * ms)
	}
	// 2 s, then 20 21 22 23 24 25 30: the 6th of the 7 short ones
	assert.Equal(t, 26*ms, first(r.settleCommand(0)))
	r.add(400 * ms) // replaces the 2 s
	assert.Equal(t, 26*ms, first(r.settleCommand(0)))
	for range 3 {
		r.add(5 * time.Second)
	}
	// 21 23 24 25 400 5s 5s 5s: half short, the 4th of 4
	assert.Equal(t, 26*ms, first(r.settleCommand(0)))
	r.add(5 * time.Second)
	// 23 24 25 400 5s 5s 5s 5s: most are long
	assert.Equal(t, time.Duration(0), first(r.settleCommand(0)))
	for range runTimeSamples {
		r.add(10 * ms)
	}
	assert.Equal(t, 11*ms, first(r.settleCommand(0)), "the oldest samples are gone")
}

// TestSettleFromTheCommandsOwnRunTimes: a command line that ran on the
// lease is timed from its own latest run times (the largest of up to
// three, the second largest of four: one slow run does not count), one
// that did not from the lease's; the lease keeps the histories of its 64
// most recently used command lines.
func TestSettleFromTheCommandsOwnRunTimes(t *testing.T) {
	ms := time.Millisecond
	var r runTimes
	for _, d := range []time.Duration{40, 45, 50} {
		r.addCommand(1, d*ms, false) // a slow setup step
	}
	assert.Equal(t, 51*ms, first(r.settleCommand(2)), "a new command: the lease's")
	r.addCommand(2, 20*ms, false)
	assert.Equal(t, 21*ms, first(r.settleCommand(2)), "its own run")
	assert.Equal(t, 51*ms, first(r.settleCommand(3)), "another new one: the lease's")
	r.addCommand(2, 22*ms, false)
	assert.Equal(t, 23*ms, first(r.settleCommand(2)), "the larger of two")
	r.addCommand(2, 90*ms, false)
	assert.Equal(t, 91*ms, first(r.settleCommand(2)), "the largest of three")
	r.addCommand(2, 21*ms, false)
	assert.Equal(t, 23*ms, first(r.settleCommand(2)), "of four, one slow run does not count")
	for _, d := range []time.Duration{30, 22, 21, 23, 20} {
		r.addCommand(2, d*ms, false)
	}
	assert.Equal(t, 23*ms, first(r.settleCommand(2)), "its last four: 22 21 23 20")
	_, slowest := r.settleCommand(2)
	assert.Equal(t, 24*ms, slowest, "the second read: the slowest of them")
	r.addCommand(4, 2*time.Second, false)
	r.addCommand(4, 3*time.Second, false)
	assert.Equal(t, time.Duration(0), first(r.settleCommand(4)), "a long command is not timed")
	for k := uint64(100); k < 100+commandHistories-3; k++ {
		r.addCommand(k, 5*ms, false)
	}
	r.addCommand(2, 20*ms, false) // used again: the least recently used is now 1
	r.addCommand(99, 5*ms, false)
	assert.Len(t, r.byCommand, commandHistories)
	assert.NotContains(t, r.byCommand, uint64(1), "the least recently used history went")
	assert.Contains(t, r.byCommand, uint64(2))
	r.addCommand(98, 5*ms, false)
	assert.NotContains(t, r.byCommand, uint64(4))
	assert.Equal(t, 22*ms, first(r.settleCommand(2)), "its last four: 21 23 20 20")
}

// TestBulkRunsOfACommandLineThatPrintsALot: a command line is watched as a
// bulk one only while its last run left a large log and most of its runs
// are short (up to 250 ms), from its fastest run to its slowest; its own
// runs up to 250 ms also time its first read.
func TestBulkRunsOfACommandLineThatPrintsALot(t *testing.T) {
	ms := time.Millisecond
	var r runTimes
	r.addCommand(1, 120*ms, true)
	r.addCommand(1, 180*ms, true)
	fastest, slowest, ok := r.bulkRuns(1)
	assert.True(t, ok)
	assert.Equal(t, 121*ms, fastest)
	assert.Equal(t, 181*ms, slowest)
	assert.Equal(t, 181*ms, first(r.settleCommand(1)), "its own runs time its read up to 250 ms")
	r.addCommand(1, 150*ms, false)
	_, _, ok = r.bulkRuns(1)
	assert.False(t, ok, "its last run left a small log")
	r.addCommand(1, time.Second, true)
	r.addCommand(1, 2*time.Second, true)
	r.addCommand(1, 3*time.Second, true)
	_, _, ok = r.bulkRuns(1)
	assert.False(t, ok, "most of its runs are long")
	_, _, ok = r.bulkRuns(2)
	assert.False(t, ok, "a command line never run")
	r.addCommand(3, 300*ms, false)
	assert.Equal(t, time.Duration(0), first(r.settleCommand(3)), "beyond 250 ms: not timed")
}

// first is the first of two results.
func first[A, B any](a A, _ B) A { return a }

// TestSettleMarginLearnsFromFirstReads: a first read that found a command
// unfinished although the command ran no longer than the read's lead
// grows the margin past that lead (the command's time outside its run
// was longer); a read that found a long command unfinished teaches
// nothing; reads that found the command finished shrink it back slowly,
// never below 1 ms nor above 50 ms.
func TestSettleMarginLearnsFromFirstReads(t *testing.T) {
	ms := time.Millisecond
	var r runTimes
	r.add(30 * ms)
	assert.Equal(t, 31*ms, first(r.settleCommand(0)))
	r.learn(31*ms, 30*ms, false) // 1 ms of lead was not enough
	assert.Equal(t, 33*ms, first(r.settleCommand(0)))
	r.learn(40*ms, 30*ms, false) // nor were 10 ms
	assert.Equal(t, 42*ms, first(r.settleCommand(0)))
	r.learn(42*ms, 80*ms, false) // a long command: no lesson
	assert.Equal(t, 42*ms, first(r.settleCommand(0)))
	r.learn(42*ms, 30*ms, true)
	assert.Equal(t, 41*ms+ms/2, first(r.settleCommand(0)), "a hit takes half a millisecond off")
	for range 100 {
		r.learn(42*ms, 30*ms, true)
	}
	assert.Equal(t, 31*ms, first(r.settleCommand(0)), "never below the floor")
	r.learn(time.Second, 30*ms, false)
	assert.Equal(t, 80*ms, first(r.settleCommand(0)), "never above 50 ms")
}

// TestWrapInEveryShell runs a wrapped script in each session shell the
// daemon may pick that this machine has (zsh, bash, sh): the output before
// the markers is exact, the exit status is the script's, the script sees
// no variable of the wrapper, and the run time comes with it where the
// shell has a clock (zsh and bash) and is absent, the status still
// proof, where it has none.
func TestWrapInEveryShell(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(sh.name, func(t *testing.T) {
			m := newEndMarker()
			w := m.wrap(`printf 'a\nb[%s]' "${__paperclip_t0-unset}"; printf E >&2; exit 3`, true)
			cmd := osexec.Command(sh.path, "-c", w)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *osexec.ExitError
			require.ErrorAs(t, err, &exit)
			assert.Equal(t, 3, exit.ExitCode(), "the script's status")
			o := newOutput(nil, 0)
			o.useMarker(m.tok)
			g := o.nextGen()
			o.feed(g, 0, 0, stdout.Bytes())
			o.feed(g, 1, 0, stderr.Bytes())
			code, ok := o.ended()
			require.True(t, ok, "both markers: %q %q", stdout.String(), stderr.String())
			assert.Equal(t, 3, code)
			run, timed := o.runTime()
			assert.Equal(t, sh.timed, timed, "run time in %q", stdout.String())
			assert.Less(t, run, maxRunTime)
			o.finish()
			out, errOut, _ := o.snapshot()
			assert.Equal(t, "a\nb[unset]", out)
			assert.Equal(t, "E", errOut)
		})
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
