package provider

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/internal/testenv"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// BenchmarkLifecycle measures, per lifecycle step, the Daytona round trips
// (from the emulator's request log) and the worker's wall time against the
// emulator on loopback, with the production client defaults (poll back-off
// 100 ms ×1.1, default retries). BENCH_NOTES.md puts the numbers next to the
// reference plugin's call sequence.
//
//	go test -run '^$' -bench Lifecycle -benchtime 20x ./provider/
func BenchmarkLifecycle(b *testing.B) {
	srv := testenv.Server(b)
	d := New(Options{Env: func(string) (string, bool) { return "", false }, HTTPClient: &http.Client{}})
	reg := registryOf(d)
	cfg := map[string]any{"apiKey": srv.APIKey(), "apiUrl": srv.URL(), "timeoutMs": 60000}
	base := func(extra map[string]any) map[string]any {
		c := with(cfg)
		for k, v := range extra {
			c[k] = v
		}
		return map[string]any{"driverKey": "daytona", "companyId": "company-1", "environmentId": "env-1", "config": c}
	}
	type stat struct {
		calls, gets int
		took        time.Duration
	}
	stats := map[string]*stat{}
	var order []string
	step := func(name, method string, params map[string]any) json.RawMessage {
		b.Helper()
		h, _ := reg.Lookup(method)
		srv.ResetRequests()
		start := time.Now()
		res, err := h(context.Background(), mustJSON(b, params))
		took := time.Since(start)
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		s := stats[name]
		if s == nil {
			s = &stat{}
			stats[name] = s
			order = append(order, name)
		}
		for _, r := range srv.Requests() {
			s.calls++
			if r.Method == "GET" && r.Route == rSandbox {
				s.gets++
			}
		}
		s.took += took
		return mustJSON(b, res)
	}
	leaseOf := func(raw json.RawMessage) (string, map[string]any) {
		var l rpc.Lease
		if err := json.Unmarshal(raw, &l); err != nil || l.ProviderLeaseID == nil {
			b.Fatalf("no lease: %s", raw)
		}
		return *l.ProviderLeaseID, l.Metadata
	}
	leaseParams := func(id string, md map[string]any, extra map[string]any) map[string]any {
		c := with(cfg)
		for k, v := range md {
			c[k] = v
		}
		for k, v := range extra {
			c[k] = v
		}
		return map[string]any{"driverKey": "daytona", "companyId": "company-1", "environmentId": "env-1",
			"config": c, "providerLeaseId": id, "leaseMetadata": md}
	}
	acquire := func(name string, extra map[string]any) (string, map[string]any) {
		p := with(base(extra), "runId", "run-1", "agentId", "agent-1", "executionWorkspaceId", "ws-1", "adapterType", "claude_local")
		return leaseOf(step(name, "environmentAcquireLease", p))
	}
	b.ResetTimer()
	for range b.N {
		// Reusable: acquire, realize, release (stop), resume (from stopped),
		// resume (running), destroy.
		reuse := map[string]any{"reuseLease": true}
		id, md := acquire("acquire", reuse)
		step("realize", "environmentRealizeWorkspace", with(base(reuse), "lease", map[string]any{"providerLeaseId": id, "metadata": md}, "workspace", map[string]any{}))
		step("release reusable (stop)", "environmentReleaseLease", leaseParams(id, md, nil))
		step("resume (stopped)", "environmentResumeLease", with(base(reuse), "providerLeaseId", id, "leaseMetadata", md))
		step("resume (running)", "environmentResumeLease", with(base(reuse), "providerLeaseId", id, "leaseMetadata", md))
		step("destroy", "environmentDestroyLease", leaseParams(id, md, nil))
		// Ephemeral: acquire, release (delete and wait).
		id, md = acquire("acquire ephemeral", nil)
		step("release ephemeral (delete)", "environmentReleaseLease", leaseParams(id, md, nil))
		// Stop lease (stop-only preservation), then clean up.
		id, md = acquire("acquire ephemeral", nil)
		step("stop lease", "environmentStopLease", leaseParams(id, md, nil))
		step("destroy (stopped)", "environmentDestroyLease", leaseParams(id, md, nil))
	}
	b.StopTimer()
	for _, name := range order {
		s := stats[name]
		n := float64(b.N)
		if name == "acquire ephemeral" {
			n *= 2
		}
		b.Logf("%-28s %5.1f round trips (%4.1f of them sandbox reads)  %7.1f ms", name,
			float64(s.calls)/n, float64(s.gets)/n, float64(s.took.Microseconds())/1000/n)
	}
	for _, name := range []string{"acquire", "resume (stopped)", "release reusable (stop)", "destroy"} {
		s := stats[name]
		b.ReportMetric(float64(s.calls)/float64(b.N), shortName(name)+"-rt/op")
	}
}

func shortName(s string) string {
	switch s {
	case "release reusable (stop)":
		return "release"
	case "resume (stopped)":
		return "resume"
	}
	return s
}
