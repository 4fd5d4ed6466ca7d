package provider

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/stretchr/testify/require"
)

// TestSpentBudgetReportsTheRunningPhase: when the acquisition budget runs
// out, the envelope's diagnostic names the step that was running, always one
// the host accepts; a budget spent during inline cleanup names the step whose
// failure started the cleanup.
func TestSpentBudgetReportsTheRunningPhase(t *testing.T) {
	hangExec := func(skip int) daytonatest.Fault {
		return daytonatest.Fault{Route: rExecute, Hang: true, Skip: skip, Times: 1}
	}
	cases := []struct {
		name, phase string
		faults      []daytonatest.Fault // the last one hangs
		extra       []any
	}{
		{name: "workspace", phase: "workspace", faults: []daytonatest.Fault{hangExec(0)}},
		{name: "shell", phase: "shell", faults: []daytonatest.Fault{hangExec(1)}},
		{name: "expiry", phase: "expiry", faults: []daytonatest.Fault{{Method: "POST", Route: "/sandbox/{sandboxIdOrName}/ttl/{minutes}", Hang: true}},
			extra: []any{"requestedExpiresAt", time.Now().Add(3 * time.Hour).Format(time.RFC3339)}},
		{name: "sentinel", phase: "sentinel", faults: []daytonatest.Fault{hangExec(2)}},
		{name: "inline cleanup", phase: "workspace", faults: []daytonatest.Fault{
			{Route: rExecute, Status: 500, Times: 1}, {Method: "DELETE", Route: rSandbox, Hang: true}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEnv(t, nil)
			var hang *daytonatest.FaultHandle
			for _, f := range c.faults {
				hang = e.srv.Inject(f)
			}
			ce := envelopeOf(t, e.acquireExpiringWhen(func() bool { return hang.Hits() > 0 }, c.extra...))
			require.Equal(t, "Daytona lease acquisition timed out; allocation cleanup is pending", ce.Message)
			require.NotEmpty(t, ce.Envelope.ObservedProviderLeaseID)
			// On the wire: what the host validates and journals.
			b, err := json.Marshal(ce.RPCData())
			require.NoError(t, err)
			var data struct {
				Diagnostic *struct {
					Phase    string `json:"phase"`
					BudgetMs int64  `json:"budgetMs"`
				} `json:"acquisitionDiagnostic"`
			}
			require.NoError(t, json.Unmarshal(b, &data))
			require.NotNil(t, data.Diagnostic, "the diagnostic reaches the host: %s", b)
			require.Equal(t, c.phase, data.Diagnostic.Phase)
			require.EqualValues(t, 20000, data.Diagnostic.BudgetMs)
		})
	}
}
