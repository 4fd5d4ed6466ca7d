package exec

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShellQuote(t *testing.T) {
	assert.Equal(t, `'abc'`, shellQuote("abc"))
	assert.Equal(t, `''`, shellQuote(""))
	assert.Equal(t, `'it'"'"'s'`, shellQuote("it's"))
	assert.Equal(t, `'$(rm -rf /) `+"`x`"+` "q"'`, shellQuote("$(rm -rf /) `x` \"q\""))
}

func TestBuildScriptExact(t *testing.T) {
	got := buildScript("printf", []string{"hello"}, "/workspace", map[string]string{"FOO": "bar"}, "")
	want := profilePrelude + ` && cd '/workspace' && env GIT_TERMINAL_PROMPT='0' GCM_INTERACTIVE='Never' GIT_ASKPASS='echo' SSH_ASKPASS='echo' SSH_ASKPASS_REQUIRE='force' FOO='bar' 'printf' 'hello'`
	assert.Equal(t, want, got)
	assert.True(t, strings.HasPrefix(got, "if [ -f /etc/profile ]; then"))
	assert.NotContains(t, got, "nvm.sh")
	assert.NotContains(t, got, "exec ")

	got = buildScript("cat", nil, "", map[string]string{"GIT_ASKPASS": "my helper", "B": "2", "A": "1"}, "/tmp/paperclip-stdin-x")
	assert.True(t, strings.HasSuffix(got, ` && env GIT_TERMINAL_PROMPT='0' GCM_INTERACTIVE='Never' GIT_ASKPASS='my helper' SSH_ASKPASS='echo' SSH_ASKPASS_REQUIRE='force' A='1' B='2' 'cat' < '/tmp/paperclip-stdin-x'`), got)
	assert.NotContains(t, got, " && cd ")
}

func TestGitNetworkDetection(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		args []string
		want bool
	}{
		{"git", []string{"push"}, true},
		{"/usr/bin/git", []string{"fetch", "origin"}, true},
		{"git", []string{"-C", "repo", "pull"}, true},
		{"git", []string{"-c", "http.x=y", "--git-dir", "d", "--work-tree", "w", "clone", "u"}, true},
		{"git", []string{"--no-pager", "ls-remote"}, true},
		{"git", []string{"remote", "update"}, true},
		{"git", []string{"submodule", "update", "--init"}, true},
		{"git", []string{"remote", "-v"}, false},
		{"git", []string{"status"}, false},
		{"git", []string{"-C", "push"}, false},
		{"git", nil, false},
		{"gitx", []string{"push"}, false},
		{"sh", []string{"-c", "git push"}, false},
	} {
		assert.Equal(t, c.want, isGitNetworkCommand(c.cmd, c.args), "%s %v", c.cmd, c.args)
	}
}

func TestToTimeoutSeconds(t *testing.T) {
	assert.Equal(t, 1, toTimeoutSeconds(time.Millisecond))
	assert.Equal(t, 1, toTimeoutSeconds(time.Second))
	assert.Equal(t, 2, toTimeoutSeconds(1001*time.Millisecond))
	assert.Equal(t, 7200, toTimeoutSeconds(2*time.Hour))
}

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

func TestOutputWithheldIncompleteTail(t *testing.T) {
	var sl sinkLog
	o := newOutput(sl.sink, 0)
	g := o.nextGen()
	o.feed(g, 0, 0, []byte("A\xf0\x9f"))
	assert.Equal(t, "A", sl.text("stdout"), "incomplete character withheld")
	// The exit is confirmed and nothing followed: the tail is genuine.
	o.finish()
	stdout, _, _ := o.snapshot()
	assert.Equal(t, "A\uFFFD\uFFFD", stdout)
	assert.Equal(t, stdout, sl.text("stdout"))
}

func TestOutputCapCountsHostCharacters(t *testing.T) {
	var sl sinkLog
	o := newOutput(sl.sink, 10)
	g := o.nextGen()
	// 'a' 1, '"' 2, '\x01' 6 = 9; '🙂' (2) would make 11: cut before it.
	o.feed(g, 0, 0, []byte("a\"\x01🙂b"))
	o.feed(g, 0, 9, []byte("more"))
	o.finish()
	stdout, _, truncated := o.snapshot()
	assert.True(t, truncated)
	assert.Equal(t, "a\"\x01"+truncationMarker("stdout", 3), stdout)
	assert.Equal(t, stdout, sl.text("stdout"))
	assert.True(t, o.streams[0].capped)
	assert.False(t, o.bothCapped())
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

// TestOutputCapInsideAnASCIIRun: the fast path for plain ASCII cuts at the
// cap exactly where the rune-by-rune path would.
func TestOutputCapInsideAnASCIIRun(t *testing.T) {
	var sl sinkLog
	o := newOutput(sl.sink, 5)
	g := o.nextGen()
	o.feed(g, 0, 0, []byte("abcdefgh"))
	o.finish()
	stdout, _, truncated := o.snapshot()
	assert.True(t, truncated)
	assert.Equal(t, "abcde"+truncationMarker("stdout", 5), stdout)
	assert.Equal(t, stdout, sl.text("stdout"))
	assert.EqualValues(t, 3, o.streams[0].dropped)

	// Runs broken by characters that cost more still add up exactly.
	o2 := newOutput(nil, 0)
	g = o2.nextGen()
	o2.feed(g, 0, 0, []byte("ab\"c<d\né\x01z"))
	o2.finish()
	s2, _, _ := o2.snapshot()
	assert.Equal(t, "ab\"c<d\né\x01z", s2)
	assert.EqualValues(t, 1+1+2+1+6+1+2+1+6+1, o2.streams[0].cost)
}
