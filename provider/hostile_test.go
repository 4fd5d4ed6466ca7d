package provider

import (
	"strings"
	"testing"

	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/stretchr/testify/require"
)

// Hostile and absurd input through the driver: huge numbers, NUL bytes,
// megabyte-sized values.

func TestExecuteWithAHugeTimeoutRunsTheCommand(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	for _, ms := range []float64{1e13, 9e15} {
		for _, bypass := range []bool{false, true} {
			r, err := e.execute(l, "echo", []string{"ran"}, "timeoutMs", ms, "bypassSession", bypass)
			require.NoError(t, err, "timeoutMs %g bypass %v", ms, bypass)
			require.False(t, r.TimedOut, "timeoutMs %g bypass %v", ms, bypass)
			require.Equal(t, 0, *r.ExitCode, "timeoutMs %g bypass %v", ms, bypass)
			require.Contains(t, r.Stdout, "ran")
		}
	}
}

func TestAHugeConfiguredTimeoutSendsABoundedValue(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	p := with(e.base(with(l.Metadata, "timeoutMs", 1e13)), "lease", l, "command", "echo", "args", []string{"bounded"}, "bypassSession", true)
	raw, err := e.call("environmentExecute", p)
	require.NoError(t, err)
	r := decode[execResult](t, raw)
	require.Equal(t, 0, *r.ExitCode)
	require.Contains(t, r.Stdout, "bounded")
	var seen bool
	for _, d := range e.srv.Dispatches() {
		if d.Session == "" && strings.Contains(d.Command, "bounded") {
			seen = true
			require.Equal(t, 86400, d.Timeout, "the toolbox timeout is clamped to one day")
		}
	}
	require.True(t, seen, "a one-shot dispatch")
}

func TestExecuteRejectsNULBytesNamingTheField(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	before := len(e.srv.Dispatches())
	for _, c := range []struct {
		field   string
		command string
		extra   []any
	}{
		{"command", "ec\u0000ho", nil},
		{"args[1]", "echo", []any{"args", []string{"ok", "a\u0000b"}}},
		{`env["GREETING"]`, "echo", []any{"env", map[string]string{"A": "fine", "GREETING": "hi\u0000there"}}},
		{"cwd", "echo", []any{"cwd", "/tmp/a\u0000b"}},
	} {
		args := []string{"x"}
		extra := c.extra
		if len(extra) == 2 && extra[0] == "args" {
			args, extra = extra[1].([]string), nil
		}
		_, err := e.execute(l, c.command, args, extra...)
		require.ErrorIs(t, err, rpc.ErrInvalidParams, c.field)
		require.Contains(t, err.Error(), c.field+" contains a NUL byte")
	}
	// A lease whose saved remote cwd carries a NUL is refused the same way.
	bad := lease{ProviderLeaseID: l.ProviderLeaseID, Metadata: with(l.Metadata, "remoteCwd", "/home/a\u0000b")}
	_, err := e.execute(bad, "echo", nil)
	require.ErrorIs(t, err, rpc.ErrInvalidParams)
	require.Contains(t, err.Error(), "lease.metadata.remoteCwd contains a NUL byte")
	require.Len(t, e.srv.Dispatches(), before, "nothing ran")
}
