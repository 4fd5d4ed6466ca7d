package provider

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/clamp"
	"github.com/daytonaworker/daytona-worker/internal/jsvalue"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// scopeKey identifies one lease of one account: stableStringify of driver
// key, company, environment, provider lease id and account fingerprint
// (docs/behavior.md#concurrency). Never the bare sandbox id: two companies or two
// accounts can name the same sandbox id.
type scopeKey string

func makeScopeKey(driverKey, companyID, environmentID, leaseID, fingerprint string) scopeKey {
	b, err := jsvalue.StableStringify(map[string]any{
		"driverKey": driverKey, "companyId": companyID, "environmentId": environmentID,
		"providerLeaseId": leaseID, "account": fingerprint,
	})
	if err != nil { // strings only: cannot happen
		panic(err)
	}
	return scopeKey(b)
}

type admission int

const (
	admissionUnknown admission = iota // never seen: a fresh worker serves leases it did not acquire
	admissionOpen
	admissionClosed // tombstone: torn down, late work is refused
)

type scopeState struct {
	admission  admission
	teardowns  int
	activities int
	// generation changes whenever an activity starts or ends: a teardown
	// captures it before a provider observation and compares after the
	// reply (idle evidence rule, docs/behavior.md#idle-sleep).
	generation uint64
	changed    chan struct{} // closed and replaced on every change
	closedAt   time.Time     // when admission closed (tombstone age)
	// writable is the advisory writable-dir store: the sandbox directories
	// a syncIn declared read-write. Nothing in the worker's command path
	// reads it (a sandbox user's permissions decide what a command may
	// write); it lives and is pruned with the scope.
	writable map[string]bool
}

// scopes holds the admission state, teardown gates and activity gates of
// every lease scope this worker touched (docs/behavior.md#gates).
type scopes struct {
	mu sync.Mutex
	m  map[scopeKey]*scopeState
	// pruneAt is the table size that triggers the next prune: maxScopes,
	// or twice what the last prune left when it could not get below half
	// of that (fresh tombstones, busy scopes), so a table full of entries
	// that must stay is not scanned again on every new scope.
	pruneAt int
}

func (s *scopes) state(k scopeKey) *scopeState { // s.mu held
	if s.m == nil {
		s.m = make(map[scopeKey]*scopeState)
	}
	st := s.m[k]
	if st == nil {
		if len(s.m) >= max(s.pruneAt, maxScopes) {
			s.pruneLocked()
			s.pruneAt = 2 * len(s.m)
		}
		st = &scopeState{changed: make(chan struct{})}
		s.m[k] = st
	}
	return st
}

// maxScopes bounds the scope table of a long-lived worker. Past it, idle
// entries go first, then tombstones older than tombstoneTTL: a late call
// for a lease torn down that long ago is then served as an unknown lease
// (as a restarted worker would), never confused with another one.
const (
	maxScopes    = 8192
	tombstoneTTL = time.Hour
)

func (s *scopes) pruneLocked() {
	now := time.Now()
	for k, st := range s.m {
		if st.activities > 0 || st.teardowns > 0 {
			continue
		}
		if st.admission != admissionClosed || now.Sub(st.closedAt) > tombstoneTTL {
			delete(s.m, k)
		}
	}
}

func (st *scopeState) broadcast() { // s.mu held
	close(st.changed)
	st.changed = make(chan struct{})
}

// LeaseInactiveError: the lease was torn down; late work is refused.
type LeaseInactiveError struct{ LeaseID string }

func (e *LeaseInactiveError) Error() string {
	return fmt.Sprintf("Daytona sandbox lease %s is no longer active.", clamp.Echo(e.LeaseID))
}

// withActivity runs fn inside the scope's activity gate: refused once the
// lease is closed (unless allowClosed), and never overlapping a teardown.
func (s *scopes) withActivity(ctx context.Context, k scopeKey, leaseID string, allowClosed bool, fn func(context.Context) error) error {
	var st *scopeState
	for {
		s.mu.Lock()
		st = s.state(k)
		if st.admission == admissionClosed && !allowClosed {
			s.mu.Unlock()
			return &LeaseInactiveError{LeaseID: leaseID}
		}
		if st.teardowns > 0 {
			ch := st.changed
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		st.activities++
		st.generation++
		st.broadcast()
		s.mu.Unlock()
		break
	}
	defer func() {
		s.mu.Lock()
		st.activities--
		st.generation++
		st.broadcast()
		s.mu.Unlock()
	}()
	return fn(ctx)
}

// beginTeardown closes admission (the tombstone) and holds the teardown
// gate until end is called. Overlapping teardowns keep it closed until the
// last ends.
func (s *scopes) beginTeardown(k scopeKey) (end func()) {
	s.mu.Lock()
	st := s.state(k)
	st.admission = admissionClosed
	st.closedAt = time.Now()
	st.teardowns++
	st.broadcast()
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			st.teardowns--
			st.broadcast()
			s.mu.Unlock()
		})
	}
}

// open marks the scope admitted (acquire, resume).
func (s *scopes) open(k scopeKey) {
	s.mu.Lock()
	st := s.state(k)
	st.admission = admissionOpen
	st.broadcast()
	s.mu.Unlock()
}

// settling reports a closed scope whose cancelled work is still running.
func (s *scopes) settling(k scopeKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state(k)
	return st.admission == admissionClosed && st.activities > 0
}

// maxWritableDirs bounds one scope's advisory writable-dir store.
const maxWritableDirs = 1024

// recordWritable adds the directories of a syncIn's read-write mappings to
// the scope's advisory writable-dir store: a mapping's writablePath when it
// names one (a staging tarball's real destination, not the staging
// directory), else the directory holding its target. Read-only mappings and
// mappings without an access mode add nothing.
func (s *scopes) recordWritable(k scopeKey, ops []rpc.SyncOperation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state(k)
	for _, op := range ops {
		for _, f := range op.Files {
			if f.Access == nil || *f.Access != "rw" {
				continue
			}
			dir := path.Dir(f.TargetPath)
			if f.WritablePath != nil && *f.WritablePath != "" {
				dir = *f.WritablePath
			}
			if st.writable == nil {
				st.writable = make(map[string]bool)
			}
			if len(st.writable) < maxWritableDirs {
				st.writable[dir] = true
			}
		}
	}
}

// recordWritable records a successful syncIn's read-write mappings in its
// lease's advisory writable-dir store.
func (d *Driver) recordWritable(p rpc.SyncParams) {
	c, err := d.resolveAccount(p.Config) // parsed once already: cannot fail now
	if err != nil {
		return
	}
	d.scopes.recordWritable(c.scope(p.EnvironmentBase, deref(p.Lease.ProviderLeaseID)), p.Operations)
}

// generation returns the scope's activity generation and active count.
func (s *scopes) generation(k scopeKey) (gen uint64, active int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state(k)
	return st.generation, st.activities
}

// waitIdle waits until no activity runs in the scope.
func (s *scopes) waitIdle(ctx context.Context, k scopeKey) error {
	for {
		s.mu.Lock()
		st := s.state(k)
		if st.activities == 0 {
			s.mu.Unlock()
			return nil
		}
		ch := st.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// handleEntry is one cached sandbox handle; done closes when the populate
// finished (single flight).
type handleEntry struct {
	done       chan struct{}
	sb         *daytona.Sandbox
	err        error
	verifiedAt time.Time
}

// handles caches sandbox records per scope so realize and execute after an
// acquire need no provider read (docs/behavior.md#handle-cache). It never holds
// credentials.
type handles struct {
	mu  sync.Mutex
	m   map[scopeKey]*handleEntry
	now func() time.Time
}

// HandleMismatchError: a cached or fetched record is another sandbox's.
type HandleMismatchError struct{ Got, Want string }

func (e *HandleMismatchError) Error() string {
	return fmt.Sprintf("Daytona sandbox handle mismatch: handle %s does not belong to lease %s.", clamp.Echo(e.Got), clamp.Echo(e.Want))
}

// get returns the cached record or populates it with fetch, once for any
// number of concurrent callers. A failed populate is not cached. The
// populate runs under the first caller's context: when that caller gives up
// (the host cancelled its call), the others, still waiting with live
// contexts, populate again instead of inheriting its cancellation.
func (h *handles) get(ctx context.Context, k scopeKey, leaseID string, fetch func(context.Context) (*daytona.Sandbox, error)) (sb *daytona.Sandbox, hit bool, err error) {
	for {
		h.mu.Lock()
		if h.m == nil {
			h.m = make(map[scopeKey]*handleEntry)
		}
		e, hit := h.m[k]
		if !hit {
			e = &handleEntry{done: make(chan struct{})}
			h.m[k] = e
			h.mu.Unlock()
			e.sb, e.err = fetch(ctx)
			if e.err == nil && e.sb.ID != leaseID {
				e.err = &HandleMismatchError{Got: e.sb.ID, Want: leaseID}
			}
			h.mu.Lock()
			if e.err == nil {
				e.verifiedAt = h.now()
			} else if h.m[k] == e {
				delete(h.m, k)
			}
			close(e.done)
			h.mu.Unlock()
			if e.err != nil {
				return nil, false, e.err
			}
			return e.sb, false, nil
		}
		h.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, true, ctx.Err()
		}
		if e.err != nil {
			if ctx.Err() == nil && (errors.Is(e.err, context.Canceled) || errors.Is(e.err, context.DeadlineExceeded)) {
				continue // the populating caller gave up, not this one
			}
			return nil, true, e.err
		}
		if e.sb.ID != leaseID {
			h.evict(k)
			return nil, true, &HandleMismatchError{Got: e.sb.ID, Want: leaseID}
		}
		return e.sb, true, nil
	}
}

// seed stores a record known to be current (after acquire or resume).
func (h *handles) seed(k scopeKey, sb *daytona.Sandbox) {
	e := &handleEntry{done: make(chan struct{}), sb: sb, verifiedAt: h.now()}
	close(e.done)
	h.mu.Lock()
	if h.m == nil {
		h.m = make(map[scopeKey]*handleEntry)
	}
	h.m[k] = e
	h.mu.Unlock()
}

func (h *handles) evict(k scopeKey) {
	h.mu.Lock()
	delete(h.m, k)
	h.mu.Unlock()
}

// markFresh records that the sandbox was just seen working.
func (h *handles) markFresh(k scopeKey) {
	h.mu.Lock()
	if e := h.m[k]; e != nil && e.err == nil && e.sb != nil {
		e.verifiedAt = h.now()
	}
	h.mu.Unlock()
}

// stale reports an entry untouched for at least threshold.
func (h *handles) stale(k scopeKey, threshold time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.m[k]
	return e != nil && e.sb != nil && h.now().Sub(e.verifiedAt) >= threshold
}
