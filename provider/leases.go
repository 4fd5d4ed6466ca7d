package provider

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/daytonaworker/daytona-worker/channel"
	"github.com/daytonaworker/daytona-worker/daytona"
)

// The leases a channel open may reach: the channel package serves the
// terminals, the driver decides which sandbox an open names and ends a
// lease's channels when the lease is torn down.

// leaseAccess is what the worker keeps of a lease it served: the account
// (its client holds the API key, in memory only), the scope and the sandbox.
type leaseAccess struct {
	c   *account
	k   scopeKey
	sb  *daytona.Sandbox
	cwd string
}

// leaseTable is the driver's table of served leases, by the names a
// channel open gives them.
type leaseTable struct {
	mu sync.Mutex
	m  map[channel.Ref]*leaseAccess
}

// remember records the account of a lease a config-carrying call served,
// for later channel opens on it.
func (d *Driver) remember(c *account, k scopeKey, sb *daytona.Sandbox, cwd string) {
	var f scopeFields
	if json.Unmarshal([]byte(k), &f) != nil || sb == nil {
		return
	}
	ref := channel.Ref{DriverKey: f.DriverKey, CompanyID: f.CompanyID, EnvironmentID: f.EnvironmentID, LeaseID: f.ProviderLeaseID}
	lt := &d.leases
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.m == nil {
		lt.m = make(map[channel.Ref]*leaseAccess)
	}
	if old := lt.m[ref]; old != nil && cwd == "" {
		cwd = old.cwd
	}
	lt.m[ref] = &leaseAccess{c: c, k: k, sb: sb, cwd: cwd}
}

// errNoLease is the fail-closed answer of an open on a lease this worker
// never served (a restarted worker has no account for it).
type errNoLease struct{ what string }

func (e errNoLease) Error() string {
	return "Daytona " + e.what + ": no cached sandbox resolves the provider lease."
}

// channelLease resolves a channel open's lease; a torn-down lease is refused.
func (d *Driver) channelLease(ref channel.Ref, what string) (*channel.Lease, error) {
	if ref.DriverKey == "" {
		ref.DriverKey = DriverKey
	}
	d.leases.mu.Lock()
	la := d.leases.m[ref]
	d.leases.mu.Unlock()
	if la == nil || ref.LeaseID == "" {
		return nil, errNoLease{what}
	}
	d.scopes.mu.Lock()
	closed := d.scopes.state(la.k).admission == admissionClosed
	d.scopes.mu.Unlock()
	if closed {
		return nil, &LeaseInactiveError{LeaseID: ref.LeaseID}
	}
	return &channel.Lease{Client: la.c.client, Sandbox: la.sb, Cwd: la.cwd, Key: string(la.k)}, nil
}

// closeLease ends every channel of a lease (release, destroy, stop, a
// resume that restarts the sandbox) and forgets the lease's account: an
// open after teardown fails closed until the lease is resumed.
func (d *Driver) closeLease(ctx context.Context, k scopeKey) error {
	d.leases.mu.Lock()
	for ref, la := range d.leases.m {
		if la.k == k {
			delete(d.leases.m, ref)
		}
	}
	d.leases.mu.Unlock()
	d.chans.CloseLease(ctx, string(k))
	return nil
}

// CloseChannels ends every open channel (the worker is shutting down):
// each bound channel's exit goes to the host first.
func (d *Driver) CloseChannels(ctx context.Context) { d.chans.CloseAll(ctx) }
