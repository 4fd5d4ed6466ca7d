package testenv

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
)

func TestStartSandboxIsStartedAndNamed(t *testing.T) {
	e := New(t)
	sb := e.StartSandbox(t, nil)
	require.Equal(t, daytona.SandboxState(daytonatest.StateStarted), sb.State)
	require.NotEmpty(t, sb.Name)
	require.Equal(t, daytonatest.StateStarted, sb.Info.State)
	fi, err := os.Stat(sb.Info.HostPath(sb.Info.HomeDir))
	require.NoError(t, err)
	require.True(t, fi.IsDir(), "the home dir is a real host directory")

	named := e.StartSandbox(t, &daytona.CreateSandboxRequest{Name: "given"})
	require.Equal(t, "given", named.Name)
}

func TestWithLatencyHoldsRequests(t *testing.T) {
	const latency = 30 * time.Millisecond
	e := New(t, WithLatency(latency))
	e.StartSandbox(t, nil)
	reqs := e.Server.Requests()
	require.NotEmpty(t, reqs)
	for _, r := range reqs {
		require.GreaterOrEqual(t, r.Handled.Sub(r.Time), latency, "%s %s", r.Method, r.Route)
	}
}

func TestStartSimServesOutOfProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/daytona-sim")
	}
	sim := StartSim(t, "-latency", "1ms")
	sb := StartSandbox(t, sim.Client, nil)
	require.Equal(t, daytona.SandboxState(daytonatest.StateStarted), sb.State)
	reqs := sim.Requests(t, 0)
	require.NotEmpty(t, reqs)
	require.Equal(t, daytonatest.SimRequest{Method: "POST", Route: "/sandbox", Status: 200, NewConn: true, Sandbox: sb.ID}, reqs[0])
	require.Equal(t, reqs[1:], sim.Requests(t, 1))
}

func TestPeakSeesAnAllocation(t *testing.T) {
	p := StartPeak()
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = 1
	}
	heap, rss := p.Done()
	require.Equal(t, byte(1), buf[len(buf)-1])
	require.GreaterOrEqual(t, heap, 64.0, "the live 64 MiB buffer was sampled")
	if _, err := os.Stat("/proc/self/status"); err == nil {
		require.GreaterOrEqual(t, rss, 64.0, "the touched 64 MiB are resident")
	}
}
