package exec

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMarkerSplitAcrossFeedsNeverReachesTheSink: the end markers arrive cut
// at every possible point (and byte by byte); no byte of them reaches the
// sink or the result, the output before them is exact, and the exit status
// is read from the stdout marker.
func TestMarkerSplitAcrossFeedsNeverReachesTheSink(t *testing.T) {
	m := newEndMarker()
	out := append(append([]byte("out é"), m.tok...), "=7\n"...)
	errs := append(append([]byte("err"), m.tok...), '\n')
	check := func(t *testing.T, o *output, sl *sinkLog) {
		t.Helper()
		code, ok := o.ended()
		require.True(t, ok, "both markers seen")
		assert.Equal(t, 7, code)
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
	w := m.wrap("echo hi")
	assert.NotContains(t, w, string(m.tok[1:]))
	assert.True(t, strings.HasPrefix(w, "( ( echo hi ); "), w)
	assert.Contains(t, w, m.half1+" "+m.half2)
	assert.NotEqual(t, string(m.tok), string(newEndMarker().tok), "a new token per command")
	assert.Len(t, m.tok, 33)
}
