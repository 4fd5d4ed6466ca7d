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
		{"args[0]", "echo", []any{"args", []string{"\u0000b"}}}, // at the first byte
		{"command", "\u0000echo", nil},
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

// TestErrorsEchoABoundedSliceOfHostileInput sends a huge value in each
// string the host controls and requires every error (and the probe's
// summary) to quote at most 512 bytes of it. Three values are 10 MB, the
// rest 256 KiB: a request line cannot carry more, and pushing megabytes
// through every hook under the race detector would only measure the
// machine.
func TestErrorsEchoABoundedSliceOfHostileInput(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	huge := strings.Repeat("Q", 10<<20)
	big := huge[:256<<10]
	lp := func(extra ...any) map[string]any { return e.leaseParams(l, nil, extra...) }
	withLease := func(id string) lease { return lease{ProviderLeaseID: &id, Metadata: l.Metadata} }
	acq := func(extra ...any) map[string]any {
		return with(e.base(nil), append([]any{"runId", "run-1", "agentId", "agent-1", "executionWorkspaceId", "ws-1"}, extra...)...)
	}
	envelope := func(labelKey string) map[string]any {
		return map[string]any{"failedCreateCleanup": map[string]any{"labels": map[string]any{labelKey: "v"}}}
	}
	cases := []struct {
		name, method string
		params       map[string]any
	}{
		{"probe apiUrl path", "environmentProbe", e.base(map[string]any{"apiUrl": "http://127.0.0.1:9/" + big})},
		{"acquire companyId", "environmentAcquireLease", with(acq(), "companyId", huge)},
		{"acquire environmentId", "environmentAcquireLease", with(acq(), "environmentId", big)},
		{"acquire runId", "environmentAcquireLease", acq("runId", big)},
		{"acquire creationOperationId", "environmentAcquireLease", acq("creationOperationId", big)},
		{"acquire image", "environmentAcquireLease", with(acq(), "config", with(e.cfg, "image", big))},
		{"resume id", "environmentResumeLease", lp("providerLeaseId", big)},
		{"realize id", "environmentRealizeWorkspace", with(e.realizeParams(l), "lease", withLease(big))},
		{"execute id", "environmentExecute", with(e.base(l.Metadata), "lease", withLease(big), "command", "true")},
		{"release id", "environmentReleaseLease", lp("providerLeaseId", big)},
		{"destroy id", "environmentDestroyLease", lp("providerLeaseId", big)},
		{"stop id", "environmentStopLease", lp("providerLeaseId", big)},
		// After the teardowns the scope is closed: late work is refused
		// with an error naming the lease.
		{"realize closed id", "environmentRealizeWorkspace", with(e.realizeParams(l), "lease", withLease(big))},
		{"execute closed id", "environmentExecute", with(e.base(l.Metadata), "lease", withLease(big), "command", "true")},
		{"destroy envelope label", "environmentDestroyLease", lp("leaseMetadata", envelope(big))},
		{"execute env key", "environmentExecute", with(e.base(l.Metadata), "lease", l, "command", "true", "env", map[string]string{"BAD " + huge: "v"})},
		{"execute command", "environmentExecute", with(e.base(l.Metadata), "lease", l, "command", big+"\u0000")},
		{"type error", "environmentExecute", with(e.base(l.Metadata), "lease", l, "command", "true", "timeoutMs", "1"+huge)},
	}
	for _, c := range cases {
		raw, err := e.call(c.method, c.params)
		msg := ""
		switch {
		case err != nil:
			msg = err.Error()
		case c.method == "environmentProbe":
			msg = string(raw) // results may echo ids; the probe's summary must not
		}
		if strings.Contains(msg, strings.Repeat("Q", 513)) || len(msg) > 4096 {
			t.Errorf("%s: a %d-byte message echoes its input: %.200q", c.name, len(msg), msg)
		}
	}
}

func TestTypedErrorsQuoteABoundedLeaseID(t *testing.T) {
	huge := strings.Repeat("Q", 10<<20)
	for _, err := range []error{
		&StopError{ProviderLeaseID: huge, Reason: StopUnrecoverable},
		&StopError{ProviderLeaseID: huge, Reason: StopErrorAfterRecover},
		&StopError{ProviderLeaseID: huge, Reason: StopRecoverUnfinished},
		&LeaseInactiveError{LeaseID: huge},
		&HandleMismatchError{Got: huge, Want: huge},
	} {
		require.LessOrEqual(t, len(err.Error()), 2048, "%T", err)
	}
}
