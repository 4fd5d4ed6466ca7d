package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/stretchr/testify/require"
)

// The load run: one worker process, driven over stdio as the host drives
// it, holding many leases of the emulator at once under a fixed load of
// concurrent executes and syncs. The short run (200 leases) is part of
// every `go test`; the flags give the long runs bench/BENCHMARKS.md reports:
//
//	go test -run 'TestLoad$' -v ./cmd/daytona-worker/ -args -load.leases 200,500,1000,8000
//	go test -run TestEmulatorSurvivesLeaseCycles -v ./cmd/daytona-worker/ -args -load.cycles 5000
var (
	loadLeases = flag.String("load.leases", "", "comma-separated lease counts for TestLoad (default: one short run at 200)")
	loadCycles = flag.Int("load.cycles", 0, "acquire+execute+release cycles for TestEmulatorSurvivesLeaseCycles (0: skip)")
)

const (
	loadExecutors    = 50 // executes in flight at once
	loadSyncers      = 10 // syncs in flight at once
	loadSetupWorkers = 16 // acquires and releases in flight at once
	// loadGuard is a hang guard for conditions the test waits on: it
	// fails a run that never settles, it does not time one that does.
	loadGuard = 2 * time.Minute
)

// loadMethods are the test worker's view of its own runtime, for the load
// run's counts: goroutines, and the heap after a collection that also
// returns freed memory to the system (so RSS can come back down).
func loadMethods(reg *rpc.Registry) {
	reg.Register("test.runtime", func(context.Context, json.RawMessage) (any, error) {
		runtime.GC()
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		buf := make([]byte, 1<<22)
		stacks := string(buf[:runtime.Stack(buf, true)])
		return map[string]any{
			"goroutines": runtime.NumGoroutine(),
			"connLoops":  strings.Count(stacks, "net/http.(*persistConn).readLoop"),
			"heapBytes":  ms.HeapAlloc,
		}, nil
	})
}

// host drives a worker process with many calls in flight, matching
// answers to calls by id; notifications (execute.log) are dropped.
type host struct {
	t    *testing.T
	w    *workerProc
	wmu  sync.Mutex // serializes frames on the worker's stdin
	mu   sync.Mutex // guards next and wait; never held while writing, so
	next int        // the reader can always take answers off stdout
	wait map[int]chan answer
}

type answer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func newHost(t *testing.T, w *workerProc) *host {
	h := &host{t: t, w: w, wait: map[int]chan answer{}}
	go func() {
		for line := range w.frames {
			var f struct {
				ID *int `json:"id"`
				answer
			}
			if json.Unmarshal(line, &f) != nil || f.ID == nil {
				continue
			}
			if ch := h.take(*f.ID); ch != nil {
				ch <- f.answer
			}
		}
	}()
	return h
}

// take removes and returns the channel waiting for the answer to id.
func (h *host) take(id int) chan answer {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.wait[id]
	delete(h.wait, id)
	return ch
}

// call sends one request and waits for its answer; it may run off the
// test goroutine.
func (h *host) call(method string, params any) (json.RawMessage, time.Duration, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, 0, err
	}
	ch := make(chan answer, 1)
	h.mu.Lock()
	h.next++
	id := h.next
	h.wait[id] = ch
	h.mu.Unlock()
	frame := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, b)
	h.wmu.Lock()
	start := time.Now()
	_, err = h.w.stdin.Write([]byte(frame))
	h.wmu.Unlock()
	if err != nil {
		return nil, 0, err
	}
	select {
	case a := <-ch:
		took := time.Since(start)
		if a.Error != nil {
			return nil, took, fmt.Errorf("%s: %d %s", method, a.Error.Code, a.Error.Message)
		}
		return a.Result, took, nil
	case <-h.w.eof:
		return nil, 0, fmt.Errorf("%s: the worker exited; stderr:\n%s", method, h.w.stderr.String())
	case <-time.After(loadGuard):
		return nil, 0, fmt.Errorf("%s: no answer in %v", method, loadGuard)
	}
}

// workerStats are the worker process's resources.
type workerStats struct {
	Goroutines, ConnLoops, FDs, Threads int
	RSS, Heap                           int64 // bytes
}

func (h *host) stats() workerStats {
	h.t.Helper()
	raw, _, err := h.call("test.runtime", map[string]any{})
	require.NoError(h.t, err)
	var rt struct{ Goroutines, ConnLoops, HeapBytes int64 }
	require.NoError(h.t, json.Unmarshal(raw, &rt))
	pid := h.w.cmd.Process.Pid
	s := workerStats{Goroutines: int(rt.Goroutines), ConnLoops: int(rt.ConnLoops), Heap: rt.HeapBytes}
	var err2 error
	s.FDs, s.RSS, s.Threads, err2 = procStats(pid)
	if err2 != nil {
		h.t.Skip("no /proc:", err2)
	}
	return s
}

// procStats reads a process's open descriptors, resident set and threads.
func procStats(pid int) (fds int, rss int64, threads int, err error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	for line := range strings.Lines(string(status)) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "VmRSS:":
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb << 10
		case len(f) >= 2 && f[0] == "Threads:":
			threads, _ = strconv.Atoi(f[1])
		}
	}
	return len(ents), rss, threads, nil
}

// settle cuts every connection between the worker and the emulator and
// waits until the worker has let go of them, so counts do not include its
// idle connection pool.
func (h *host) settle(hs *httptest.Server, done func(workerStats) bool) workerStats {
	h.t.Helper()
	deadline := time.Now().Add(loadGuard)
	for {
		hs.CloseClientConnections()
		s := h.stats() // this call's own answer needs no connection
		if s.ConnLoops == 0 && (done == nil || done(s)) {
			return s
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the worker did not settle in %v: %+v", loadGuard, s)
		}
		runtime.Gosched()
	}
}

// loadEnv is one worker against one emulator served by the test.
type loadEnv struct {
	t   *testing.T
	srv *daytonatest.Server
	hs  *httptest.Server
	h   *host
	cfg map[string]any
}

func newLoadEnv(t *testing.T) *loadEnv {
	srv := daytonatest.New(daytonatest.WithDir(t.TempDir()))
	// The emulator as a handler of the test's own server, so the test can
	// cut client connections; the URLs it hands out follow the request.
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	w := startWorker(t)
	h := newHost(t, w)
	_, _, err := h.call("initialize", map[string]any{"apiVersion": 1, "config": map[string]any{}})
	require.NoError(t, err)
	return &loadEnv{t: t, srv: srv, hs: hs, h: h,
		cfg: map[string]any{"apiKey": srv.APIKey(), "apiUrl": hs.URL + daytonatest.APIPrefix, "timeoutMs": 120000}}
}

type loadLease struct {
	ID       string         `json:"providerLeaseId"`
	Metadata map[string]any `json:"metadata"`
}

func (e *loadEnv) base(extra map[string]any) map[string]any {
	cfg := map[string]any{}
	for _, m := range []map[string]any{e.cfg, extra} {
		for k, v := range m {
			cfg[k] = v
		}
	}
	return map[string]any{"driverKey": "daytona", "companyId": "company-1", "environmentId": "env-1", "config": cfg}
}

func (e *loadEnv) params(base map[string]any, kv ...any) map[string]any {
	for i := 0; i < len(kv); i += 2 {
		base[kv[i].(string)] = kv[i+1]
	}
	return base
}

func (e *loadEnv) acquire(i int) (loadLease, error) {
	raw, _, err := e.h.call("environmentAcquireLease", e.params(e.base(nil), "runId", fmt.Sprint("run-", i),
		"agentId", "agent-1", "executionWorkspaceId", fmt.Sprint("ws-", i), "adapterType", "claude_local"))
	var l loadLease
	if err == nil {
		err = json.Unmarshal(raw, &l)
	}
	return l, err
}

func (e *loadEnv) release(l loadLease) error {
	_, _, err := e.h.call("environmentReleaseLease", e.params(e.base(l.Metadata), "providerLeaseId", l.ID, "leaseMetadata", l.Metadata))
	return err
}

// echo runs `echo hi` in the lease and checks what it printed.
func (e *loadEnv) echo(l loadLease) (time.Duration, error) {
	raw, took, err := e.h.call("environmentExecute", e.params(e.base(l.Metadata), "lease", l, "command", "echo", "args", []string{"hi"}))
	if err != nil {
		return took, err
	}
	var r struct {
		ExitCode *int   `json:"exitCode"`
		Stdout   string `json:"stdout"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.ExitCode == nil || *r.ExitCode != 0 || r.Stdout != "hi\n" {
		return took, fmt.Errorf("echo hi answered %s", raw)
	}
	return took, nil
}

// syncIn uploads a small tree into the lease.
func (e *loadEnv) syncIn(l loadLease, src string, n int) error {
	remote, _ := l.Metadata["remoteCwd"].(string)
	op := map[string]any{"operationId": fmt.Sprint("in-", n), "files": []any{map[string]any{
		"sourcePath": src, "targetPath": remote + "/tree", "kind": "directory"}}}
	_, _, err := e.h.call("environmentSyncIn", e.params(e.base(nil), "lease", l, "operations", []any{op}))
	return err
}

// each runs f(i) for i in [0,n) on workers goroutines and returns the
// first error.
func each(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && first.Load() == nil; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(d))
	return s[min(len(s)-1, len(s)*p/100)]
}

// sampleHealth calls health over and over once start closes, until the
// returned stop is called; stop returns the latencies. A failed health
// call fails the test.
func (e *loadEnv) sampleHealth(start <-chan struct{}) (stop func() []time.Duration) {
	done := make(chan struct{})
	out := make(chan []time.Duration, 1)
	var failed error
	go func() {
		var ds []time.Duration
		defer func() { out <- ds }()
		<-start
		for {
			select {
			case <-done:
				return
			default:
			}
			_, d, err := e.h.call("health", map[string]any{})
			if err != nil {
				failed = err
				return
			}
			ds = append(ds, d)
		}
	}()
	return func() []time.Duration {
		close(done)
		ds := <-out
		require.NoError(e.t, failed, "health")
		return ds
	}
}

// loadReport is one run's figures.
type loadReport struct {
	leases                       int
	base, held, peak, after      workerStats
	echoIdle, echoLoad, health   []time.Duration
	healthIdle, healthRelease    []time.Duration
	executes, syncs, healthCalls int
	took, acquired, loaded       time.Duration // whole run; acquires; the load
	released                     time.Duration
}

// runLoad is one load run at n leases: baseline, acquire n, hold them
// under the fixed load, release them all, back to baseline.
func runLoad(t *testing.T, n, execsEach, syncsEach int) loadReport {
	start := time.Now()
	e := newLoadEnv(t)
	r := loadReport{leases: n}
	// Warm up one full cycle, so lazily started parts of the worker are in
	// the baseline; then the baseline, without connections.
	warm, err := e.acquire(-1)
	require.NoError(t, err)
	_, err = e.echo(warm)
	require.NoError(t, err)
	tree := t.TempDir()
	for i := range 3 {
		require.NoError(t, os.WriteFile(filepath.Join(tree, fmt.Sprint("f", i)), []byte(strings.Repeat("x", 512*i)), 0o600))
	}
	require.NoError(t, e.syncIn(warm, tree, -1))
	require.NoError(t, e.release(warm))
	r.base = e.h.settle(e.hs, nil)

	leases := make([]loadLease, n)
	phase := time.Now()
	require.NoError(t, each(n, loadSetupWorkers, func(i int) (err error) {
		leases[i], err = e.acquire(i)
		return err
	}))
	r.acquired = time.Since(phase)
	// Latency without load, same run: sequential echo hi and health.
	for range 20 {
		d, err := e.echo(leases[0])
		require.NoError(t, err)
		r.echoIdle = append(r.echoIdle, d)
	}
	for range 200 {
		_, d, err := e.h.call("health", map[string]any{})
		require.NoError(t, err)
		r.healthIdle = append(r.healthIdle, d)
	}
	// Held, idle, no connections: what n leases cost the worker.
	r.held = e.h.settle(e.hs, nil)
	t.Logf("%d leases held: %+v (baseline %+v)", n, r.held, r.base)
	require.Less(t, r.held.Goroutines-r.base.Goroutines, max(n/4, 20), "no goroutine per lease held")
	require.Less(t, r.held.FDs-r.base.FDs, max(n/4, 20), "no descriptor per lease held")

	// The load: 50 executes and 10 syncs in flight at once, health calls
	// all along; every one answered.
	var mu sync.Mutex
	gate := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, loadExecutors+loadSyncers+1)
	for x := range loadExecutors {
		wg.Go(func() {
			<-gate
			for range execsEach {
				d, err := e.echo(leases[x%n])
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				r.echoLoad = append(r.echoLoad, d)
				r.executes++
				mu.Unlock()
			}
		})
	}
	for y := range loadSyncers {
		wg.Go(func() {
			<-gate
			for k := range syncsEach {
				if err := e.syncIn(leases[(loadExecutors+y)%n], tree, k); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				r.syncs++
				mu.Unlock()
			}
		})
	}
	stopHealth := e.sampleHealth(gate)
	phase = time.Now()
	close(gate)
	wg.Wait()
	r.loaded = time.Since(phase)
	r.health = stopHealth()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, loadExecutors*execsEach, r.executes)
	require.Equal(t, loadSyncers*syncsEach, r.syncs)
	r.healthCalls = len(r.health)
	r.peak = e.h.stats()

	// Health all along the releases too: each release's bookkeeping once
	// held the lock health takes, scanning every lease held.
	released := make(chan struct{})
	stopHealth = e.sampleHealth(released)
	phase = time.Now()
	close(released)
	require.NoError(t, each(n, loadSetupWorkers, func(i int) error { return e.release(leases[i]) }))
	r.released = time.Since(phase)
	r.healthRelease = stopHealth()
	// Back to baseline: no goroutine and no descriptor left behind.
	r.after = e.h.settle(e.hs, func(s workerStats) bool {
		return s.Goroutines <= r.base.Goroutines && s.FDs <= r.base.FDs
	})
	require.Empty(t, liveSandboxes(e.srv), "every lease's sandbox is gone")
	r.took = time.Since(start)
	return r
}

// liveSandboxes lists the emulator's sandboxes that are not destroyed.
func liveSandboxes(srv *daytonatest.Server) []string {
	var out []string
	for _, sb := range srv.Sandboxes() {
		if sb.State != daytonatest.StateDestroyed {
			out = append(out, sb.ID+" "+sb.State)
		}
	}
	return out
}

func (r loadReport) log(t *testing.T) {
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	per := func(a, b int) string { return fmt.Sprintf("%.3f", float64(a-b)/float64(r.leases)) }
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	t.Logf("LOAD leases=%d took=%v (acquires %v, load %v, releases %v) executes=%d syncs=%d health=%d", r.leases, ms(r.took),
		ms(r.acquired), ms(r.loaded), ms(r.released), r.executes, r.syncs, r.healthCalls)
	t.Logf("LOAD echo hi p50/p99: idle %v/%v, under load %v/%v; health p50/p99: idle %v/%v, under load %v/%v",
		percentile(r.echoIdle, 50), percentile(r.echoIdle, 99), percentile(r.echoLoad, 50), percentile(r.echoLoad, 99),
		percentile(r.healthIdle, 50), percentile(r.healthIdle, 99), percentile(r.health, 50), percentile(r.health, 99))
	t.Logf("LOAD health p50/p99 while every lease is released: %v/%v (%d calls)",
		percentile(r.healthRelease, 50), percentile(r.healthRelease, 99), len(r.healthRelease))
	t.Logf("LOAD RSS base %s, held %s (%s/lease), under load %s, after release %s", mib(r.base.RSS), mib(r.held.RSS),
		fmt.Sprintf("%.1f KiB", float64(r.held.RSS-r.base.RSS)/1024/float64(r.leases)), mib(r.peak.RSS), mib(r.after.RSS))
	t.Logf("LOAD heap base %s, held %s, after %s; goroutines base %d held %d (%s/lease) load %d after %d; fds base %d held %d (%s/lease) load %d after %d; threads base %d held %d load %d after %d",
		mib(r.base.Heap), mib(r.held.Heap), mib(r.after.Heap),
		r.base.Goroutines, r.held.Goroutines, per(r.held.Goroutines, r.base.Goroutines), r.peak.Goroutines, r.after.Goroutines,
		r.base.FDs, r.held.FDs, per(r.held.FDs, r.base.FDs), r.peak.FDs, r.after.FDs,
		r.base.Threads, r.held.Threads, r.peak.Threads, r.after.Threads)
}

// TestLoad: one worker holds 200 leases at once with 50 executes and 10
// syncs in flight; every call is answered, health too, and after the
// leases are released the worker is back to its baseline of goroutines
// and descriptors. -load.leases runs the long measurements.
func TestLoad(t *testing.T) {
	if *loadLeases == "" {
		r := runLoad(t, 200, 1, 1)
		r.log(t)
		return
	}
	for f := range strings.SplitSeq(*loadLeases, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(t, err, "-load.leases")
		t.Run(fmt.Sprint("leases=", n), func(t *testing.T) { runLoad(t, n, 10, 5).log(t) })
	}
}

// TestEmulatorSurvivesLeaseCycles: with -load.cycles N, N leases are
// acquired, run one command (a session in the emulator) and released, 16
// at a time; the emulator (this process) ends with the descriptors it
// started with.
func TestEmulatorSurvivesLeaseCycles(t *testing.T) {
	if *loadCycles == 0 {
		t.Skip("-load.cycles not set")
	}
	e := newLoadEnv(t)
	self := os.Getpid()
	fds0, rss0, _, err := procStats(self)
	if err != nil {
		t.Skip("no /proc:", err)
	}
	var maxFDs atomic.Int64
	var maxRSS atomic.Int64
	require.NoError(t, each(*loadCycles, loadSetupWorkers, func(i int) error {
		l, err := e.acquire(i)
		if err != nil {
			return err
		}
		if _, err := e.echo(l); err != nil {
			return err
		}
		if err := e.release(l); err != nil {
			return err
		}
		if i%250 == 0 {
			fds, rss, _, _ := procStats(self)
			for _, p := range []struct {
				m *atomic.Int64
				v int64
			}{{&maxFDs, int64(fds)}, {&maxRSS, rss}} {
				for cur := p.m.Load(); p.v > cur && !p.m.CompareAndSwap(cur, p.v); cur = p.m.Load() {
				}
			}
		}
		return nil
	}))
	e.h.settle(e.hs, nil)
	var fds int
	var rss int64
	deadline := time.Now().Add(loadGuard)
	for fds, rss, _, _ = procStats(self); fds > fds0 && time.Now().Before(deadline); fds, rss, _, _ = procStats(self) {
		runtime.Gosched()
	}
	t.Logf("EMULATOR cycles=%d fds start %d max %d end %d; RSS start %.1f MiB max %.1f MiB end %.1f MiB",
		*loadCycles, fds0, maxFDs.Load(), fds, float64(rss0)/(1<<20), float64(maxRSS.Load())/(1<<20), float64(rss)/(1<<20))
	require.LessOrEqual(t, fds, fds0, "the emulator's descriptors after %d lease cycles", *loadCycles)
	require.Empty(t, liveSandboxes(e.srv))
}
