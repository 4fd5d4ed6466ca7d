package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
)

// Config of every schedule's environment: budgets far shorter than the
// defaults, so a hang the worker's own bounds end costs seconds, not
// minutes, yet long enough that a healthy acquire fits on a loaded 2-core
// machine (at 4 s most acquires ran out of budget there and the schedules
// tested little but failed acquires).
const (
	timeoutMs         = 20000
	livenessTimeoutMs = 5000
	company           = "co-chaos"
	environment       = "env-chaos"
)

// Host timeouts per method (docs/host.md#host-timeouts).
var (
	sandboxCallTimeout = timeoutMs*time.Millisecond + 30*time.Second
	resumeTimeout      = 60 * time.Second
)

// hostLease is what the host stores of a lease.
type hostLease struct {
	ID       string
	Metadata map[string]any
}

func (l hostLease) wire() map[string]any {
	return map[string]any{"providerLeaseId": l.ID, "metadata": l.Metadata}
}

// receipt is a teardown answer: proof that remote execution ended.
type receipt struct {
	Method, Sandbox, State string
	At                     time.Time // when the host received it
}

// execRecord is an execute and what it answered.
type execRecord struct {
	Token              string
	Want               step
	ExitCode           *int
	TimedOut           bool
	Stdout, Stderr     string
	Logs               []logChunk
	Answered, Canceled bool
}

// generation is one syncIn's tree: files f0..f<Files-1>.
type generation struct{ N, Files, Size int }

// run is one schedule being executed and what the host saw.
type run struct {
	s      schedule
	srv    *daytonatest.Server
	client *daytona.Client
	dir    string // host-side trees
	cfg    map[string]any

	mu         sync.Mutex
	w          *worker
	workers    []*worker
	leases     [leaseSlots]*hostLease
	pending    []hostLease // leases the host must still destroy
	envelopes  []map[string]any
	inFlight   map[string]bool // run ids of acquires in flight
	killedRuns map[string]bool // run ids of acquires a kill interrupted
	receipts   []receipt
	execs      []*execRecord
	gens       map[string][]generation // syncIn generations by sandbox id
	hostTrees  map[string]string       // syncOut target -> sandbox id
	remotes    map[string]string       // sandbox id -> remoteCwd
	decoys     []string
	seq        int
	violations []string
	checks     map[string]int
	logf       func(format string, a ...any) // CHAOS_TRACE: every call's error
}

func (r *run) violate(inv, format string, a ...any) {
	r.mu.Lock()
	r.violations = append(r.violations, inv+": "+fmt.Sprintf(format, a...))
	r.mu.Unlock()
}

func (r *run) checked(inv string, n int) {
	r.mu.Lock()
	r.checks[inv] += n
	r.mu.Unlock()
}

func (r *run) next() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	return r.seq
}

func (r *run) worker() *worker {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.w
}

// base is the params every environment call carries; lease metadata is
// merged over the saved config, as the host does.
func (r *run) base(md map[string]any, kv ...any) map[string]any {
	c := maps.Clone(r.cfg)
	maps.Copy(c, md)
	p := map[string]any{"driverKey": "daytona", "companyId": company, "environmentId": environment, "config": c}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i].(string)] = kv[i+1]
	}
	return p
}

// call makes one host call under the method's host timeout; a call not
// answered in time is a violation.
func (r *run) call(method string, params any, timeout time.Duration) (json.RawMessage, []logChunk, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, logs, err := r.worker().call(ctx, method, params)
	if err != nil && ctx.Err() != nil {
		r.violate("answered-in-time", "%s not answered within its host timeout %s", method, timeout)
	}
	r.checked("answered-in-time", 1)
	if err != nil && r.logf != nil {
		r.logf("seed %d: %s: %v", r.s.Seed, method, err)
	}
	return res, logs, err
}

func (r *run) lease(slot int) *hostLease {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leases[slot]
}

// held is the lease of slot, or else of another slot that has one: a host
// acts on the leases it holds.
func (r *run) held(slot int) (int, *hostLease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range leaseSlots {
		s := (slot + i) % leaseSlots
		if r.leases[s] != nil {
			return s, r.leases[s]
		}
	}
	return slot, nil
}

func (r *run) setLease(slot int, l *hostLease) {
	r.mu.Lock()
	r.leases[slot] = l
	r.mu.Unlock()
}

// forget drops a slot's lease into the host's pending cleanup.
func (r *run) forget(slot int, l *hostLease, destroyed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leases[slot] == l {
		r.leases[slot] = nil
	}
	if !destroyed {
		r.pending = append(r.pending, *l)
	}
}

// do performs one step.
func (r *run) do(st step) {
	switch st.Op {
	case opAcquire:
		r.acquire(st.Slot)
	case opConcurrent:
		var wg sync.WaitGroup
		for _, c := range st.Both {
			wg.Go(func() { r.do(c) })
		}
		wg.Wait()
	case opDiskFull:
		if _, l := r.held(st.Slot); l != nil {
			if used, err := r.srv.DiskUsage(l.ID); err == nil {
				_ = r.srv.SetDiskAllocation(l.ID, used+2048)
			}
		}
	default:
		slot, l := r.held(st.Slot)
		if l == nil {
			return
		}
		st.Slot = slot
		switch st.Op {
		case opRealize:
			_, _, _ = r.call("environmentRealizeWorkspace", r.base(l.Metadata, "lease", l.wire(), "workspace", map[string]any{}), sandboxCallTimeout)
		case opExecute:
			r.execute(l, r.newExec(st), "")
		case opCancel:
			r.cancelActiveWork(st, l)
		case opSyncIn:
			r.syncIn(l, st)
		case opSyncOut:
			r.syncOut(l)
		case opResume:
			r.resume(st.Slot, l)
		case opRelease, opStop, opDestroy:
			r.teardown(st.Slot, l, st.Op, false)
		}
	}
}

// acquire asks for a lease with a run id of its own, so a sandbox left
// behind names the acquire that made it.
func (r *run) acquire(slot int) {
	if r.lease(slot) != nil {
		return
	}
	runID := fmt.Sprintf("run-%d", r.next())
	r.mu.Lock()
	r.inFlight[runID] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.inFlight, runID)
		r.mu.Unlock()
	}()
	res, _, err := r.call("environmentAcquireLease", r.base(nil, "runId", runID, "agentId", "agent-1",
		"executionWorkspaceId", "ws-1", "adapterType", "claude_local"), sandboxCallTimeout)
	if err != nil {
		r.envelope(err)
		return
	}
	var l struct {
		ProviderLeaseID *string        `json:"providerLeaseId"`
		Metadata        map[string]any `json:"metadata"`
	}
	if json.Unmarshal(res, &l) != nil || l.ProviderLeaseID == nil || *l.ProviderLeaseID == "" {
		r.violate("protocol", "acquire answered %s", res)
		return
	}
	hl := &hostLease{ID: *l.ProviderLeaseID, Metadata: l.Metadata}
	r.checked("leases-acquired", 1) // not an invariant: how much the schedules exercised
	r.mu.Lock()
	if cwd, ok := l.Metadata["remoteCwd"].(string); ok {
		r.remotes[hl.ID] = cwd
	}
	r.mu.Unlock()
	r.setLease(slot, hl)
}

// envelope keeps the cleanup envelope of a -32002 answer for the host's
// cleanup journal.
func (r *run) envelope(err error) {
	env := envelopeOf(err)
	if env == nil {
		return // a plain worker error (-32002 is also the default code)
	}
	r.mu.Lock()
	r.envelopes = append(r.envelopes, env)
	r.mu.Unlock()
}

// envelopeOf is the cleanup envelope of a -32002 answer, or nil.
func envelopeOf(err error) map[string]any {
	var re *rpcError
	if !errors.As(err, &re) || re.Code != -32002 {
		return nil
	}
	var data struct {
		Cleanup map[string]any `json:"cleanup"`
	}
	if json.Unmarshal(re.Data, &data) != nil {
		return nil
	}
	return data.Cleanup
}

// script is an execute's command: it writes exactly what want says, and
// carries a token no other command has, for the dispatch log.
func script(token string, want step, tail string) string {
	return fmt.Sprintf(": %s; yes %s-o | head -c %d; yes %s-e | head -c %d >&2;%s exit %d", token, token, want.Out, token, want.Err, tail, want.Exit)
}

// wantOutput is what `yes word | head -c n` writes.
func wantOutput(word string, n int) string {
	line := word + "\n"
	return strings.Repeat(line, n/len(line)+1)[:n]
}

// newExec registers an execute of want under a fresh token.
func (r *run) newExec(want step) *execRecord {
	rec := &execRecord{Token: fmt.Sprintf("tok%dx%dz", r.s.Seed, r.next()), Want: want}
	r.mu.Lock()
	r.execs = append(r.execs, rec)
	r.mu.Unlock()
	return rec
}

// execute runs rec's command (then tail) and records the answer.
func (r *run) execute(l *hostLease, rec *execRecord, tail string) {
	p := r.base(l.Metadata, "lease", l.wire(), "command", "bash", "args", []string{"-c", script(rec.Token, rec.Want, tail)})
	res, logs, err := r.call("environmentExecute", p, sandboxCallTimeout)
	r.mu.Lock()
	defer r.mu.Unlock()
	rec.Logs = logs
	if err != nil {
		return
	}
	var out struct {
		ExitCode *int   `json:"exitCode"`
		TimedOut bool   `json:"timedOut"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	if json.Unmarshal(res, &out) != nil {
		r.violations = append(r.violations, "protocol: execute answered "+string(res))
		return
	}
	rec.Answered, rec.ExitCode, rec.TimedOut, rec.Stdout, rec.Stderr = true, out.ExitCode, out.TimedOut, out.Stdout, out.Stderr
}

// cancelActiveWork runs an execute and, once the emulator dispatched it
// (or it answered), releases the lease with cancelActiveWork.
func (r *run) cancelActiveWork(st step, l *hostLease) {
	rec := r.newExec(st)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.execute(l, rec, " sleep 0.3;")
	}()
	// The emulator's change broadcasts wake the wait; the execute's own
	// answer ends it through the context.
	ctx, cancel := context.WithTimeout(context.Background(), sandboxCallTimeout)
	defer cancel()
	go func() {
		<-done
		cancel()
	}()
	_ = r.srv.Await(ctx, func() bool { return r.srv.CountDispatches(rec.Token) > 0 })
	r.teardown(st.Slot, l, opCancel, true)
	<-done
}

// teardown is release (with cancelActiveWork for opCancel), stop or
// destroy; a receipt is recorded with the moment the host got it.
func (r *run) teardown(slot int, l *hostLease, op string, cancelWork bool) {
	method := map[string]string{opRelease: "environmentReleaseLease", opCancel: "environmentReleaseLease",
		opStop: "environmentStopLease", opDestroy: "environmentDestroyLease"}[op]
	p := r.base(l.Metadata, "providerLeaseId", l.ID, "leaseMetadata", l.Metadata)
	if cancelWork {
		p["cancelActiveWork"] = true
	}
	res, _, err := r.call(method, p, sandboxCallTimeout)
	if err != nil {
		if op != opStop && op != opDestroy {
			r.forget(slot, l, false) // a failed release is pending cleanup
		}
		return
	}
	rc := r.recordReceipt(method, res)
	if rc == nil {
		return
	}
	switch {
	case rc.State == "destroyed":
		r.forget(slot, l, true)
	case op == opRelease || op == opCancel:
		if !r.s.Reuse {
			r.forget(slot, l, false)
		}
	}
}

// recordReceipt keeps a teardown's receipt (nil for a null answer) with
// the moment the host got it.
func (r *run) recordReceipt(method string, res []byte) *receipt {
	at := time.Now()
	var rc *struct {
		ProviderLeaseID string `json:"providerLeaseId"`
		State           string `json:"state"`
	}
	if json.Unmarshal(res, &rc) != nil {
		r.violate("protocol", "%s answered %s", method, res)
		return nil
	}
	if rc == nil {
		return nil
	}
	out := receipt{Method: method, Sandbox: rc.ProviderLeaseID, State: rc.State, At: at}
	r.mu.Lock()
	r.receipts = append(r.receipts, out)
	r.mu.Unlock()
	return &out
}

// resume: a null lease id sends the host to destroy and forget the lease.
func (r *run) resume(slot int, l *hostLease) {
	res, _, err := r.call("environmentResumeLease", r.base(l.Metadata, "providerLeaseId", l.ID, "leaseMetadata", l.Metadata), resumeTimeout)
	if err != nil {
		return
	}
	var out struct {
		ProviderLeaseID *string        `json:"providerLeaseId"`
		Metadata        map[string]any `json:"metadata"`
	}
	if json.Unmarshal(res, &out) != nil {
		r.violate("protocol", "resume answered %s", res)
		return
	}
	if out.ProviderLeaseID == nil {
		r.teardown(slot, l, opDestroy, false)
		r.forget(slot, l, false)
		return
	}
	if out.Metadata != nil {
		r.mu.Lock()
		l.Metadata = out.Metadata
		r.mu.Unlock()
	}
}

// syncTree writes generation g's files under dir.
func fileContent(g generation, i int) []byte {
	head := fmt.Sprintf("gen %d file %d\n", g.N, i)
	return []byte(head + strings.Repeat("z", g.Size))
}

func (r *run) syncIn(l *hostLease, st step) {
	g := generation{N: r.next(), Files: st.Files, Size: st.Size}
	src := filepath.Join(r.dir, fmt.Sprintf("in-%d", g.N))
	if err := os.MkdirAll(src, 0o755); err != nil {
		r.violate("setup", "%v", err)
		return
	}
	for i := range g.Files {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%d", i)), fileContent(g, i), 0o644); err != nil {
			r.violate("setup", "%v", err)
			return
		}
	}
	remote, _ := l.Metadata["remoteCwd"].(string)
	if remote == "" {
		return
	}
	r.mu.Lock()
	r.gens[l.ID] = append(r.gens[l.ID], g)
	r.mu.Unlock()
	op := map[string]any{"operationId": fmt.Sprintf("in-%d", g.N), "files": []any{map[string]any{
		"sourcePath": src, "targetPath": remote + "/tree", "kind": "directory"}}}
	_, _, _ = r.call("environmentSyncIn", r.base(l.Metadata, "lease", l.wire(), "operations", []any{op}), sandboxCallTimeout)
}

func (r *run) syncOut(l *hostLease) {
	remote, _ := l.Metadata["remoteCwd"].(string)
	if remote == "" {
		return
	}
	target := filepath.Join(r.dir, "out-"+l.ID)
	r.mu.Lock()
	r.hostTrees[target] = l.ID
	r.mu.Unlock()
	op := map[string]any{"operationId": "out", "files": []any{map[string]any{
		"sourcePath": remote + "/tree", "targetPath": target, "kind": "directory"}}}
	_, _, _ = r.call("environmentSyncOut", r.base(l.Metadata, "lease", l.wire(), "operations", []any{op}), sandboxCallTimeout)
}
