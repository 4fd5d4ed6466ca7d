package channel

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The channels' integration tests run through the driver's registry
// against the emulator (provider/channels_test.go, loginpty_test.go); the
// pure parts are tested here.

// The launch wrapper quotes every word and the diagnostics path.
func TestDuplexLaunchQuotes(t *testing.T) {
	line, err := duplexLaunch([]string{"node", "/a b/$(x)'y"}, "/tmp/d'$x.log", "AB")
	require.NoError(t, err)
	require.Equal(t, `exec 2>'/tmp/d'"'"'$x.log'; stty raw -echo; printf '\101\102'; exec 'node' '/a b/$(x)'"'"'y'`+"\r", line)
	_, err = duplexLaunch([]string{"a\x00b"}, "/tmp/x", "AB")
	require.Error(t, err)
}

// Output stops at the route's total: the chunk that would pass it is cut
// there and the channel ends.
func TestDuplexDataStopsAtTheRouteTotal(t *testing.T) {
	ch := &channel{}
	ds := &duplexState{}
	ds.total.Store(MaxDuplexTotal - 3)
	require.True(t, ch.duplexData(ds, []byte("abc")))
	require.False(t, ch.duplexData(ds, []byte("d")))
	require.Equal(t, int64(MaxDuplexTotal), ds.total.Load())
}

// Terminal output is decoded as UTF-8 across reads: a character split
// between two reads stays whole, an invalid byte becomes U+FFFD.
func TestLoginTextStream(t *testing.T) {
	var ts textStream
	e := []byte("é😀")
	require.Equal(t, "a", ts.decode(append([]byte("a"), e[0])))
	require.Equal(t, "é", ts.decode(e[1:2]))
	require.Equal(t, "", ts.decode(e[2:4]))
	require.Equal(t, "😀b", ts.decode(append(e[4:], 'b')))
	require.Equal(t, "\uFFFDc", ts.decode([]byte{0xff, 'c'}))
	require.Equal(t, "", ts.decode(e[2:3]))
	require.Equal(t, "\uFFFD", ts.flush())
	require.True(t, ts.charge(strings.Repeat("x", MaxLoginTotalChars-2)))
	require.False(t, ts.charge("😀x"), "😀 is two JavaScript characters")
	require.True(t, ts.charge("😀"))
}

// The launch lines are the first-party plugin's, each ending the terminal
// when the shell cannot exec the CLI.
func TestLoginLaunchLines(t *testing.T) {
	home := "/tmp/paperclip-adapter-login/11111111-2222-4333-8444-555555555555"
	for key, want := range map[string]string{
		"claude": "exec claude setup-token || exit $?",
		"codex":  "exec env CODEX_HOME='" + home + "' codex login --device-auth || exit $?",
		"grok":   "exec env GROK_HOME='" + home + "' grok login --device-auth || exit $?",
	} {
		got, ok := loginLaunch(key, home)
		require.True(t, ok, key)
		require.Equal(t, want, got)
	}
	_, ok := loginLaunch("gemini", home)
	require.False(t, ok)
}
