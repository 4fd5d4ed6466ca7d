package provider

import (
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/daytonaworker/daytona-worker/rpc"
)

// idle is the evidence that keeps the worker from idle sleep
// (docs/behavior.md#idle-sleep), reported in health.
//
// health is answered on the input loop, ahead of every other request, so
// report takes no lock: it reads counters only. The counters are read in
// the order hooks, requests, terminals, allocations, uncertain cleanups,
// and every writer makes a later-read counter rise before an earlier-read
// one falls (a request starts inside a hook, a terminal is counted before
// its request stops counting, an allocation is made inside its hook): a
// report can then see work that just ended, never miss work that goes on.
//
// The allocation and uncertain-cleanup tables behind the last two counters
// sit under mu, and every operation on them costs the same whatever the
// number of leases held: allocations are indexed by their lease (the scope
// with no environment), so a sweep's release finds its scopes directly
// instead of decoding every held lease's key.
type idle struct {
	hooks, requests, terminals atomic.Int64
	allocated, uncertainN      atomic.Int64

	mu          sync.Mutex
	allocations map[scopeKey]scopeKey              // scope → its lease key ("" when not a scope key)
	byLease     map[scopeKey]map[scopeKey]struct{} // lease key → its allocated scopes
	uncertain   map[string]bool                    // creation names whose cleanup is unconfirmed
}

// IdleWork is the driver's answer to prepareIdleSleep's question: "none"
// only when nothing of the report holds the worker awake (no hook pending,
// no provider request or terminal open, no lease held, no cleanup
// uncertain), "present" otherwise. rpc adds its own evidence (requests in
// flight, host calls unanswered) and keeps the hold.
func (d *Driver) IdleWork() rpc.IdleWork {
	if d.idle.report().SleepAllowed {
		return rpc.IdleNone
	}
	return rpc.IdlePresent
}

func (i *idle) report() rpc.IdleReport {
	r := rpc.IdleReport{
		PendingHooks:      int(i.hooks.Load()),
		ProviderRequests:  int(i.requests.Load()),
		OpenTerminals:     int(i.terminals.Load()),
		Allocations:       int(i.allocated.Load()),
		UncertainCleanups: int(i.uncertainN.Load()),
	}
	r.SleepAllowed = r.PendingHooks == 0 && r.ProviderRequests == 0 && r.OpenTerminals == 0 &&
		r.Allocations == 0 && r.UncertainCleanups == 0
	return r
}

// leaseKey is a scope key with its environment left out: the key a sweep
// after the environment was deleted names (destroy with environmentId "").
// It is "" for a key that is not a scope key.
func leaseKey(k scopeKey) scopeKey {
	var f scopeFields
	if json.Unmarshal([]byte(k), &f) != nil {
		return ""
	}
	return makeScopeKey(f.DriverKey, f.CompanyID, "", f.ProviderLeaseID, f.Account)
}

func (i *idle) allocate(k scopeKey) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if _, ok := i.allocations[k]; ok {
		return
	}
	if i.allocations == nil {
		i.allocations = make(map[scopeKey]scopeKey)
		i.byLease = make(map[scopeKey]map[scopeKey]struct{})
	}
	lk := leaseKey(k)
	i.allocations[k] = lk
	if lk != "" {
		set := i.byLease[lk]
		if set == nil {
			set = make(map[scopeKey]struct{}, 1)
			i.byLease[lk] = set
		}
		set[k] = struct{}{}
	}
	i.allocated.Store(int64(len(i.allocations)))
}

func (i *idle) release(k scopeKey) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.releaseLocked(k)
}

func (i *idle) releaseLocked(k scopeKey) {
	lk, ok := i.allocations[k]
	if !ok {
		return
	}
	delete(i.allocations, k)
	if set := i.byLease[lk]; set != nil {
		delete(set, k)
		if len(set) == 0 {
			delete(i.byLease, lk)
		}
	}
	i.allocated.Store(int64(len(i.allocations)))
}

// releaseOrphaned clears the allocation evidence a destroy naming no
// environment (the host's cleanup sweep after the environment was deleted)
// proved stale: the scopes of the same driver, company, sandbox id and
// account, whatever environment they named. Another company's or another
// account's evidence is never touched: a stop or delete vouches only for
// its own tenant.
func (i *idle) releaseOrphaned(sweep scopeKey) {
	var want scopeFields
	if json.Unmarshal([]byte(sweep), &want) != nil || want.EnvironmentID != "" {
		return
	}
	lk := makeScopeKey(want.DriverKey, want.CompanyID, "", want.ProviderLeaseID, want.Account)
	i.mu.Lock()
	defer i.mu.Unlock()
	for k := range i.byLease[lk] {
		i.releaseLocked(k)
	}
}

// scopeFields are the parts of a scopeKey.
type scopeFields struct {
	DriverKey       string `json:"driverKey"`
	CompanyID       string `json:"companyId"`
	EnvironmentID   string `json:"environmentId"`
	ProviderLeaseID string `json:"providerLeaseId"`
	Account         string `json:"account"`
}

func (i *idle) setUncertain(name string, uncertain bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.uncertain == nil {
		i.uncertain = make(map[string]bool)
	}
	if uncertain {
		i.uncertain[name] = true
	} else {
		delete(i.uncertain, name)
	}
	i.uncertainN.Store(int64(len(i.uncertain)))
}
