package exec

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type sinkLog struct {
	calls [][2]string
}

func (s *sinkLog) sink(stream, text string) error {
	s.calls = append(s.calls, [2]string{stream, text})
	return nil
}

func (s *sinkLog) text(stream string) string {
	var b strings.Builder
	for _, c := range s.calls {
		if c[0] == stream {
			b.WriteString(c[1])
		}
	}
	return b.String()
}

// chunk is one feed of stdout at a byte offset.
type chunk struct {
	off  int64
	data string
}

func TestOutputDedupesReplaysByOffset(t *testing.T) {
	var sl sinkLog
	o := newOutput(sl.sink, 0)
	g := o.nextGen()
	o.feed(g, 0, 0, []byte("hello "))
	o.feed(g, 1, 0, []byte("warn"))
	// Reconnect: the new connection replays from 0.
	g = o.nextGen()
	o.feed(g, 0, 0, []byte("hel"))
	o.feed(g, 0, 3, []byte("lo wor"))
	o.feed(g, 0, 9, []byte("ld"))
	o.feed(g, 1, 0, []byte("warn!"))
	assert.False(t, o.feed(g-1, 0, 11, []byte("LATE")), "late callback of an abandoned connection")
	o.feed(g, 0, 20, []byte("gap")) // beyond what we have: dropped
	stdout, stderr, _ := o.snapshot()
	assert.Equal(t, "hello world", stdout)
	assert.Equal(t, "warn!", stderr)
	assert.Equal(t, stdout, sl.text("stdout"))
	assert.Equal(t, []string{"hello ", "wor", "ld"}, func() (r []string) {
		for _, c := range sl.calls {
			if c[0] == "stdout" {
				r = append(r, c[1])
			}
		}
		return
	}())
}

// TestOutputFinishedStdout feeds stdout in one connection, finishes it and
// checks the result (and that the live text equals it) case by case.
func TestOutputFinishedStdout(t *testing.T) {
	for _, c := range []struct {
		name      string
		limit     int64
		feeds     []chunk
		want      string
		truncated bool
		// beforeFinish and after check what only their case is about.
		beforeFinish func(t *testing.T, sl *sinkLog)
		after        func(t *testing.T, o *output)
	}{{
		name:  "incomplete tail withheld until the exit, then genuine",
		feeds: []chunk{{0, "A\xf0\x9f"}},
		beforeFinish: func(t *testing.T, sl *sinkLog) {
			assert.Equal(t, "A", sl.text("stdout"), "incomplete character withheld")
		},
		// The exit is confirmed and nothing followed: the tail is genuine.
		want: "A\uFFFD\uFFFD",
	}, {
		// 'a' 1, '"' 2, '\x01' 6 = 9; '🙂' (2) would make 11: cut before it.
		name:  "cap counts host characters",
		limit: 10,
		feeds: []chunk{{0, "a\"\x01🙂b"}, {9, "more"}},
		want:  "a\"\x01" + truncationMarker("stdout", 3), truncated: true,
		after: func(t *testing.T, o *output) {
			assert.True(t, o.streams[0].capped)
			assert.False(t, o.bothCapped())
		},
	}, {
		// The fast path for plain ASCII cuts at the cap exactly where the
		// rune-by-rune path would.
		name:  "cap inside an ASCII run",
		limit: 5,
		feeds: []chunk{{0, "abcdefgh"}},
		want:  "abcde" + truncationMarker("stdout", 5), truncated: true,
		after: func(t *testing.T, o *output) { assert.EqualValues(t, 3, o.streams[0].dropped) },
	}, {
		// Runs broken by characters that cost more still add up exactly.
		name:  "ASCII runs broken by costlier characters",
		feeds: []chunk{{0, "ab\"c<d\né\x01z"}},
		want:  "ab\"c<d\né\x01z",
		after: func(t *testing.T, o *output) { assert.EqualValues(t, 1+1+2+1+6+1+2+1+6+1, o.streams[0].cost) },
	}} {
		t.Run(c.name, func(t *testing.T) {
			var sl sinkLog
			o := newOutput(sl.sink, c.limit)
			g := o.nextGen()
			for _, f := range c.feeds {
				o.feed(g, 0, f.off, []byte(f.data))
			}
			if c.beforeFinish != nil {
				c.beforeFinish(t, &sl)
			}
			o.finish()
			stdout, _, truncated := o.snapshot()
			assert.Equal(t, c.truncated, truncated)
			assert.Equal(t, c.want, stdout)
			assert.Equal(t, stdout, sl.text("stdout"))
			if c.after != nil {
				c.after(t, o)
			}
		})
	}
}

func TestOutputNeverSplitsACharacter(t *testing.T) {
	text := "aé🙂☃\uFFFDz"
	raw := []byte(text)
	for cut1 := 0; cut1 <= len(raw); cut1++ {
		for cut2 := cut1; cut2 <= len(raw); cut2++ {
			var sl sinkLog
			o := newOutput(sl.sink, 0)
			g := o.nextGen()
			o.feed(g, 0, 0, raw[:cut1])
			o.feed(g, 0, int64(cut1), raw[cut1:cut2])
			o.feed(g, 0, int64(cut2), raw[cut2:])
			o.finish()
			for _, c := range sl.calls {
				require.True(t, utf8.ValidString(c[1]))
			}
			stdout, _, _ := o.snapshot()
			require.Equal(t, text, stdout)
			require.Equal(t, text, sl.text("stdout"))
		}
	}
}

func TestOutputSinkChunksAreBounded(t *testing.T) {
	var sl sinkLog
	o := newOutput(sl.sink, 0)
	big := strings.Repeat("é", maxSinkChunk) // 2 bytes each
	o.feed(o.nextGen(), 0, 0, []byte("x"+big))
	for _, c := range sl.calls {
		assert.LessOrEqual(t, len(c[1]), maxSinkChunk)
		assert.True(t, utf8.ValidString(c[1]))
	}
	assert.Equal(t, "x"+big, sl.text("stdout"))
	assert.Greater(t, len(sl.calls), 2)
}

func TestFailingSinkStopsLiveOutputOnly(t *testing.T) {
	n := 0
	o := newOutput(func(string, string) error { n++; return assert.AnError }, 0)
	g := o.nextGen()
	o.feed(g, 0, 0, []byte("a"))
	o.feed(g, 0, 1, []byte("b"))
	stdout, _, _ := o.snapshot()
	assert.Equal(t, "ab", stdout)
	assert.Equal(t, 1, n)
}
