package provider

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/stretchr/testify/require"
)

// prepareIdle asks the worker for an idle hold and returns backgroundWork;
// a granted hold is released again, so the test goes on.
func (h *chanHost) prepareIdle(owner string) string {
	h.t.Helper()
	hold := map[string]any{"ownerId": owner, "expiresAt": time.Now().Add(time.Minute).UnixMilli()}
	f := h.call("prepareIdleSleep", hold)
	require.Nil(h.t, f.Error)
	var res map[string]any
	require.NoError(h.t, json.Unmarshal(f.Result, &res))
	if res["backgroundWork"] == "none" {
		require.NotNil(h.t, h.call("health", nil).Error, "a granted hold refuses other requests")
		require.Nil(h.t, h.call("releaseIdleSleep", map[string]any{"ownerId": owner}).Error)
	}
	return res["backgroundWork"].(string)
}

// The worker advertises idle sleep and grants it only when nothing of its
// own keeps it awake: nothing held is "none"; a lease in use, an open
// terminal, an execute in flight and an uncertain cleanup are each
// "present" (docs/host.md#idle-sleep).
func TestPrepareIdleSleepFollowsTheWorkersEvidence(t *testing.T) {
	e := newTestEnv(t, nil)
	h := newChanHost(t, e, rpc.Options{IdleWork: e.d.IdleWork})
	init := h.call("initialize", map[string]any{})
	require.Nil(t, init.Error)
	require.Contains(t, string(init.Result), `"prepareIdleSleep"`)
	require.Contains(t, string(init.Result), `"releaseIdleSleep"`)

	// A request of the set-up may still be under way on a loaded
	// machine: nothing is held once it has ended.
	require.Eventually(t, func() bool { return e.d.idle.report().SleepAllowed }, time.Minute, time.Millisecond)
	require.Equal(t, "none", h.prepareIdle("nothing-held"))

	l := e.acquire(nil)
	require.Equal(t, 1, e.d.idle.report().Allocations)
	require.Equal(t, "present", h.prepareIdle("lease-in-use"))

	// An open terminal, on top of the lease.
	r := h.openDuplex(l, "duplex-idle-1", "cat")
	require.Equal(t, 1, e.d.idle.report().OpenTerminals)
	require.Equal(t, "present", h.prepareIdle("open-terminal"))
	h.call("duplexChannelClose", map[string]any{"hostRouteId": r.HostRouteID})

	// An execute in flight: its Daytona request is held.
	gate := make(chan struct{})
	e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rExecute, Gate: gate, Times: 1})
	before := e.srv.CountRequests("POST", rExecute)
	done := e.async("environmentExecute", with(e.base(l.Metadata), "lease", l, "command", "true", "bypassSession", true))
	e.awaitRequests("POST", rExecute, before+1)
	require.Equal(t, 1, e.d.idle.report().PendingHooks)
	require.Equal(t, "present", h.prepareIdle("execute-in-flight"))
	close(gate)
	require.NoError(t, wait(t, done).err)

	// The lease released: nothing held again.
	_, err := e.call("environmentReleaseLease", with(e.base(nil), "providerLeaseId", *l.ProviderLeaseID))
	require.NoError(t, err)
	require.Equal(t, rpc.IdleReport{SleepAllowed: true}, e.d.idle.report())
	require.Equal(t, "none", h.prepareIdle("released"))

	// An uncertain cleanup: a create whose outcome is unknown.
	e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rCreate, Status: 408, Times: 1})
	envelopeOf(t, e.acquireErr(nil))
	require.Equal(t, 1, e.d.idle.report().UncertainCleanups)
	require.Equal(t, "present", h.prepareIdle("uncertain-cleanup"))
}
