package daytonatest_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}

// A session that fails to start (here: the sandbox's home directory is
// gone, so the shell cannot start in it) answers 500 and costs the
// emulator no descriptor: its pipes are closed on every error path, or a
// long run of failed starts would exhaust the emulator's descriptors.
func TestFailedSessionStartsLeakNoDescriptors(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	info, ok := c.srv.Sandbox(sb.ID)
	require.True(t, ok)
	require.NoError(t, os.RemoveAll(info.HostPath(info.HomeDir)))
	start := func(sid string) {
		st, b := c.tb(sb.ID, "POST", "/process/session", map[string]string{"sessionId": sid})
		require.Equal(t, 500, st, string(b))
		require.Contains(t, string(b), "failed to start session")
	}
	start("warm-up") // the client's connection is open from here on
	before := openFDs(t)
	const n = 50
	for i := range n {
		start("s" + strings.Repeat("x", i))
	}
	after := openFDs(t)
	// A leak is six descriptors per start (three pipes); a few more or
	// fewer come and go with the runtime and the HTTP connection.
	require.Less(t, after-before, 6, "descriptors open after %d failed session starts: %d before, %d after", n, before, after)
	require.Empty(t, c.srv.Sessions(sb.ID))
}
