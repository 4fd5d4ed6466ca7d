package provider

import (
	"strings"
	"testing"

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
