package chaos

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// outcome is what one schedule produced: its violations and the counts of
// faults injected and invariants checked.
type outcome struct {
	violations []string
	faults     map[string]int
	checks     map[string]int
}

// runSchedule executes s against a fresh emulator and checks every
// invariant. dir is scratch space for host-side trees.
func runSchedule(tb testing.TB, s schedule) outcome {
	// The emulator and the scratch trees live as long as the schedule, not
	// the test: a long run holds one schedule's worth per slot at a time.
	dir, err := os.MkdirTemp("", "chaos-")
	if err != nil {
		return outcome{violations: []string{"setup: " + err.Error()}}
	}
	defer os.RemoveAll(dir)
	srv := daytonatest.New(daytonatest.WithDir(filepath.Join(dir, "daytona")), daytonatest.WithTransitionDelay(s.TransitionDelay), daytonatest.WithLatency(s.Latency))
	defer srv.Close()
	if _, err := srv.Start(""); err != nil {
		return outcome{violations: []string{"setup: " + err.Error()}}
	}
	r := &run{
		s: s, srv: srv, client: testenv.Client(tb, srv.URL(), srv.APIKey()), dir: filepath.Join(dir, "host"),
		cfg: map[string]any{"apiKey": srv.APIKey(), "apiUrl": srv.URL(),
			"timeoutMs": timeoutMs, "livenessTimeoutMs": livenessTimeoutMs, "reuseLease": s.Reuse},
		inFlight: map[string]bool{}, killedRuns: map[string]bool{}, gens: map[string][]generation{},
		hostTrees: map[string]string{}, remotes: map[string]string{}, checks: map[string]int{},
	}
	r.plantDecoys()
	var handles []*daytonatest.FaultHandle
	for _, f := range s.Faults {
		handles = append(handles, r.srv.Inject(f.fault()))
	}
	r.w = startWorker()
	r.workers = append(r.workers, r.w)
	trace := os.Getenv("CHAOS_TRACE") != ""
	if trace {
		r.logf = tb.Logf
	}
	for _, st := range s.Steps {
		t0 := time.Now()
		r.step(st)
		if trace {
			tb.Logf("seed %d: %s took %s", s.Seed, st, time.Since(t0).Round(time.Millisecond))
		}
	}
	out := outcome{faults: map[string]int{}}
	for i, h := range handles {
		if n := h.Hits(); n > 0 {
			out.faults[s.Faults[i].Kind] += n
		}
	}
	for _, st := range s.Steps {
		if st.KillAfter > 0 {
			out.faults["worker-kill"]++
		}
		if st.Op == opDiskFull {
			out.faults["disk-full"]++
		}
	}
	if s.TransitionDelay > daytonatest.DefaultTransitionDelay {
		out.faults["slow-transitions"]++
	}
	if s.Latency > 0 {
		out.faults["latency"]++
	}
	r.srv.ClearFaults()
	r.checkTrees() // before the final cleanup deletes the sandboxes
	t0 := time.Now()
	r.cleanUp()
	if trace {
		tb.Logf("seed %d: cleanup took %s", s.Seed, time.Since(t0).Round(time.Millisecond))
	}
	r.checkAll()
	for _, w := range r.workers {
		if died := w.stop(); died != "" && !w.killed {
			r.violate("worker-alive", "%s", died)
		}
	}
	r.checked("worker-alive", len(r.workers))
	out.violations, out.checks = r.violations, r.checks
	return out
}

// step performs st, killing the worker mid-call when st says so.
func (r *run) step(st step) {
	if st.KillAfter == 0 {
		r.do(st)
		return
	}
	base := r.srv.CountRequests("", "")
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.do(st)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), resumeTimeout)
	go func() {
		<-done
		cancel()
	}()
	_ = r.srv.Await(ctx, func() bool { return r.srv.CountRequests("", "") >= base+st.KillAfter })
	cancel()
	r.mu.Lock()
	old := r.w
	maps.Copy(r.killedRuns, r.inFlight)
	r.mu.Unlock()
	old.kill()
	<-done
	// A restarted worker: nothing of the old one's memory survives.
	r.mu.Lock()
	r.w = startWorker()
	r.workers = append(r.workers, r.w)
	r.mu.Unlock()
}

// plantDecoys creates sandboxes that look like ours but lack part of the
// ownership proof: no call may ever delete them.
func (r *run) plantDecoys() {
	ctx := context.Background()
	full := map[string]string{cleanup.LabelProvider: cleanup.ProviderValue, cleanup.LabelCompanyID: company,
		cleanup.LabelEnvironmentID: environment, cleanup.LabelReuseLease: "false", cleanup.LabelRunID: "run-1"}
	noAttempt := maps.Clone(full)
	otherCompany := maps.Clone(full)
	otherCompany[cleanup.LabelCompanyID] = "co-other"
	otherCompany[cleanup.LabelCreateAttempt] = "decoy-attempt"
	for i, labels := range []map[string]string{noAttempt, otherCompany} {
		name := fmt.Sprintf("decoy-%d", i)
		if i == 1 {
			name = cleanup.CreationName("decoy-attempt")
		}
		sb, _, err := r.client.Sandboxes.Create(ctx, &daytona.CreateSandboxRequest{Name: name, Labels: labels})
		if err != nil {
			r.violate("setup", "decoy: %v", err)
			continue
		}
		r.decoys = append(r.decoys, sb.ID)
	}
}

// cleanUp is the host's cleanup after the run, on a healthy provider:
// destroy every lease it holds or has pending, resolve every cleanup
// envelope (journaling the observed id when the worker asks), then sweep
// the runs whose acquire a kill interrupted (nobody got an answer for
// them, so only the labels can find their sandbox).
func (r *run) cleanUp() {
	r.mu.Lock()
	if r.w.gone {
		r.w = startWorker()
		r.workers = append(r.workers, r.w)
	}
	var all []hostLease
	for i, l := range r.leases {
		if l != nil {
			all = append(all, *l)
			r.leases[i] = nil
		}
	}
	all = append(all, r.pending...)
	envelopes := r.envelopes
	r.mu.Unlock()
	for _, l := range all {
		for range 3 {
			p := r.base(l.Metadata, "providerLeaseId", l.ID, "leaseMetadata", l.Metadata)
			res, _, err := r.call("environmentDestroyLease", p, sandboxCallTimeout)
			if err == nil {
				r.recordReceipt("environmentDestroyLease", res)
				break
			}
		}
	}
	for _, env := range envelopes {
		for range 4 {
			id, _ := env["providerLeaseId"].(string)
			p := r.base(nil, "providerLeaseId", id, "leaseMetadata", map[string]any{"failedCreateCleanup": env})
			res, _, err := r.call("environmentDestroyLease", p, sandboxCallTimeout)
			if err == nil {
				r.recordReceipt("environmentDestroyLease", res)
				break
			}
			if next := envelopeOf(err); next != nil {
				env = next
			}
		}
	}
	r.checkLeaks()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for run := range r.killedRuns {
		found, err := cleanup.FindOrphans(ctx, r.client.Sandboxes, cleanup.SweepFilter{CompanyID: company, RunID: run})
		if err != nil {
			r.violate("sweep", "%v", err)
			continue
		}
		for _, sb := range found {
			// A sandbox the killed acquire left mid-transition answers 409
			// to a delete: an operator's sweep waits for it to settle and
			// tries again.
			var err error
			for range 5 {
				_ = r.srv.Await(ctx, func() bool { info, ok := r.srv.Sandbox(sb.ID); return !ok || !info.Pending })
				if err = cleanup.DeleteAndWait(ctx, r.client.Sandboxes, sb.ID); err == nil {
					break
				}
			}
			if err != nil {
				r.violate("sweep", "%v", err)
			}
		}
	}
}
