package provider

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/stretchr/testify/require"
)

// heldLeases fills a driver's bookkeeping with n held leases of one
// company and account (distinct sandbox ids), as n acquires would.
func heldLeases(d *Driver, fingerprint string, n int) {
	for i := range n {
		k := makeScopeKey(DriverKey, "company-1", "env-1", fmt.Sprintf("held-%d", i), fingerprint)
		d.scopes.open(k)
		d.idle.allocate(k)
	}
}

// Releasing a lease costs the same whatever the number of leases held: the
// allocation evidence is indexed by lease, so a destroy (and the sweep
// that names no environment) finds its entries directly. Counted in
// allocations, not time, so the machine's load cannot decide it. On the
// old code the sweep decoded every held lease's key under the lock that
// health and every Daytona request take.
func TestReleaseBookkeepingIsFlatInLeaseCount(t *testing.T) {
	allocsAt := func(n int) float64 {
		d := New(Options{})
		heldLeases(d, "fp", n)
		k := makeScopeKey(DriverKey, "company-1", "env-1", "sb-x", "fp")
		sweep := makeScopeKey(DriverKey, "company-1", "", "sb-x", "fp")
		return testing.AllocsPerRun(20, func() {
			d.scopes.open(k)
			d.idle.allocate(k)
			td := &teardown{d: d, k: k, id: "sb-x"}
			end := d.scopes.beginTeardown(k)
			td.observe()
			td.confirmed(true)
			end()
			d.idle.allocate(k)
			d.idle.releaseOrphaned(sweep) // the host's sweep
		})
	}
	small, large := allocsAt(100), allocsAt(10_000)
	require.Equal(t, small, large, "allocations per release with 100 leases held vs 10,000")
	d := New(Options{})
	heldLeases(d, "fp", 3)
	require.Equal(t, 3, d.idle.report().Allocations)
}

// health is answered on the worker's input loop, ahead of every other
// request: it must answer while the bookkeeping lock is held (here by the
// test, standing in for any slow path) and while a Daytona request is held
// by the provider, and it still reports that request.
func TestHealthAnswersWhileBookkeepingIsLockedAndARequestIsHeld(t *testing.T) {
	e, _, id := leased(t, nil)
	c, err := e.d.resolveAccount(mustJSON(t, e.cfg))
	require.NoError(t, err)
	gate := make(chan struct{})
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Gate: gate, Times: 1})
	got := make(chan error, 1)
	go func() {
		_, _, err := c.client.Sandboxes.Get(t.Context(), id)
		got <- err
	}()
	e.awaitRequests("GET", rSandbox, 1) // the request is held by the provider

	e.d.idle.mu.Lock()
	answer := e.async("health", map[string]any{})
	var r result
	select {
	case r = <-answer:
	case <-time.After(20 * time.Second): // a hang guard: the answer takes microseconds
	}
	e.d.idle.mu.Unlock()
	require.NotNil(t, r.raw, "health did not answer while the bookkeeping lock was held")
	require.NoError(t, r.err)
	var h rpc.HealthResult
	require.NoError(t, json.Unmarshal(r.raw, &h))
	idle := h.Details["idle"].(map[string]any)
	require.EqualValues(t, 1, idle["providerRequests"], "the held request is evidence")
	require.EqualValues(t, 1, idle["allocations"])
	require.Equal(t, false, idle["sleepAllowed"])

	close(gate)
	require.NoError(t, <-got)
	require.Zero(t, e.d.idle.report().ProviderRequests)
}

// benchLeases is a driver holding n leases, and a function that releases
// lease i%n through the release hook's bookkeeping (no Daytona round trip)
// and acquires it again.
func benchLeases(b *testing.B, n int) (*Driver, func(i int)) {
	d := New(Options{Env: func(string) (string, bool) { return "", false }})
	cfg := mustJSON(b, map[string]any{"apiKey": "dtn_bench", "apiUrl": "http://127.0.0.1:1/api"})
	c, err := d.resolveAccount(cfg)
	require.NoError(b, err)
	heldLeases(d, c.fingerprint, n)
	base := rpc.EnvironmentBase{DriverKey: DriverKey, CompanyID: "company-1", EnvironmentID: "env-1", Config: cfg}
	return d, func(i int) {
		id := fmt.Sprintf("held-%d", i%n)
		td, end, err := d.beginTeardown(rpc.ReleaseParams{EnvironmentBase: base, ProviderLeaseID: &id})
		if err != nil {
			panic(err) // the config parsed above
		}
		td.observe()
		td.receipt("destroyed")
		end()
		d.idle.releaseOrphaned(makeScopeKey(DriverKey, "company-1", "", id, c.fingerprint)) // the host's sweep
		d.scopes.open(td.k)                                                                 // the lease is acquired again
		d.idle.allocate(td.k)
	}
}

var benchSizes = []int{100, 1_000, 10_000}

// BenchmarkReleaseBookkeeping measures the worker's own part of a release
// with 100 to 10,000 leases held: the teardown frame the release hook runs
// (account, teardown gate, generation check, confirmed deletion clearing
// the allocation evidence), the host's sweep that names no environment,
// and the acquire's bookkeeping that puts the lease back. The Daytona
// round trips are left out: they do not depend on the lease count. The
// figure to track is the ratio between the sizes (bench/BENCHMARKS.md).
//
//	go test -run '^$' -bench 'ReleaseBookkeeping|HealthDuringReleases' -count 3 ./provider/
func BenchmarkReleaseBookkeeping(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			d, release := benchLeases(b, n)
			b.ResetTimer()
			for i := range b.N {
				release(i)
			}
			b.StopTimer()
			if got := d.idle.report().Allocations; got != n {
				b.Fatalf("%d allocations held, want %d", got, n)
			}
		})
	}
}

// BenchmarkHealthDuringReleases measures health (answered on the input
// loop) while another goroutine releases leases without pause: ns/op is
// the mean answer, max-µs the longest one.
func BenchmarkHealthDuringReleases(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			d, release := benchLeases(b, n)
			stop, stopped := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(stopped)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
						release(i)
					}
				}
			}()
			var longest time.Duration
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				_ = d.Health()
				longest = max(longest, time.Since(start))
			}
			b.StopTimer()
			close(stop)
			<-stopped
			b.ReportMetric(float64(longest.Microseconds()), "max-µs")
		})
	}
}
