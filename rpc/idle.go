package rpc

import (
	"context"
	"encoding/json"
	"math"
	"sync"
	"time"
)

// Idle sleep (docs/host.md#idle-sleep). A host that wants to put the worker
// to sleep asks prepareIdleSleep {ownerId, expiresAt}; the worker answers
// {ownerId, expiresAt, backgroundWork}. "none" grants a hold: until it is
// released (releaseIdleSleep {ownerId}, as a request or a notification) or
// expires, every other request but shutdown is refused with -32002 "Plugin
// is held for idle sleep", so nothing can start behind the host's back
// while it decides. "present" and "unknown" grant nothing. This follows the
// SDK's idle drain: the hold is granted only when no request is in flight,
// no worker-to-host request is unanswered and the worker's own evidence
// (Options.IdleWork) says none; a hold asked for again with the same owner
// and expiry is "none" again, any other while one is held "unknown"; a
// release naming another owner is ignored.

// IdleWork is prepareIdleSleep's backgroundWork.
type IdleWork string

// The backgroundWork values.
const (
	IdleNone    IdleWork = "none"
	IdlePresent IdleWork = "present"
	IdleUnknown IdleWork = "unknown"
)

// maxIdleHold is the longest hold the SDK grants.
const maxIdleHold = 5 * time.Minute

// errIdleHeld answers a request that arrives while a hold is granted.
var errIdleHeld = Errorf(CodeWorkerError, "Plugin is held for idle sleep")

// idleHold is a granted hold.
type idleHold struct {
	owner   string
	expires float64 // the host's expiresAt, epoch milliseconds
	until   time.Time
}

// idleDrain is the admission side of idle sleep: requests in flight, host
// calls unanswered, and the hold.
type idleDrain struct {
	now func() time.Time

	mu        sync.Mutex
	active    int             // host requests in flight (not the idle methods, not shutdown)
	hostCalls map[string]bool // worker-to-host requests not yet answered, by id
	hold      *idleHold
}

// exempt are the methods a hold does not refuse and that never count as
// work in flight.
func idleExempt(method string) bool {
	return method == "prepareIdleSleep" || method == "releaseIdleSleep" || method == "shutdown"
}

// currentLocked drops an expired hold and returns the one in force.
func (d *idleDrain) currentLocked() *idleHold {
	if d.hold != nil && !d.now().Before(d.hold.until) {
		d.hold = nil
	}
	return d.hold
}

// begin admits one request; the returned func ends it. It fails while a
// hold is granted.
func (d *idleDrain) begin() (func(), error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.currentLocked() != nil {
		return nil, errIdleHeld
	}
	d.active++
	return sync.OnceFunc(func() {
		d.mu.Lock()
		d.active--
		d.mu.Unlock()
	}), nil
}

// callSent and callAnswered track a worker-to-host request until the
// host's answer arrives: only the answer proves the host-side write done.
func (d *idleDrain) callSent(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hostCalls == nil {
		d.hostCalls = make(map[string]bool)
	}
	d.hostCalls[id] = true
}

func (d *idleDrain) callAnswered(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.hostCalls, id)
}

// idleParams are prepareIdleSleep's and releaseIdleSleep's params.
type idleParams struct {
	OwnerID   any `json:"ownerId"`
	ExpiresAt any `json:"expiresAt"`
}

// prepare decides prepareIdleSleep. inspect is the worker's own evidence;
// it runs under the drain's lock, so no request starts while it decides.
func (d *idleDrain) prepare(p idleParams, initialized bool, inspect func() IdleWork) IdleWork {
	owner, _ := p.OwnerID.(string)
	expires, ok := p.ExpiresAt.(float64)
	now := d.now()
	nowMs := float64(now.UnixNano()) / 1e6
	if owner == "" || !ok || math.IsNaN(expires) || math.IsInf(expires, 0) ||
		expires <= nowMs || expires > nowMs+float64(maxIdleHold.Milliseconds()) {
		return IdleUnknown
	}
	if !initialized || inspect == nil {
		return IdlePresent
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if h := d.currentLocked(); h != nil {
		if h.owner == owner && h.expires == expires {
			return IdleNone
		}
		return IdleUnknown
	}
	if d.active != 0 || len(d.hostCalls) != 0 {
		return IdlePresent
	}
	switch w := inspect(); w {
	case IdleNone:
		d.hold = &idleHold{owner: owner, expires: expires, until: now.Add(time.Duration((expires - nowMs) * float64(time.Millisecond)))}
		return IdleNone
	case IdlePresent:
		return IdlePresent
	default:
		return IdleUnknown
	}
}

// release ends the hold owner holds; another owner's release is ignored.
func (d *idleDrain) release(owner any) {
	s, _ := owner.(string)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hold != nil && d.hold.owner == s {
		d.hold = nil
	}
}

// registerIdle adds prepareIdleSleep and releaseIdleSleep: only a worker
// that can report its background work advertises them (a host never puts
// a worker to sleep that cannot).
func (s *server) registerIdle(inspect func() IdleWork) {
	s.reg.Register("prepareIdleSleep", func(_ context.Context, raw json.RawMessage) (any, error) {
		// The answer echoes the params, as the SDK's does ({...hold,
		// backgroundWork}).
		var p idleParams
		var fields map[string]json.RawMessage
		if decodeParams(raw, &p) != nil || decodeParams(raw, &fields) != nil {
			p, fields = idleParams{}, nil
		}
		echo := make(map[string]any, len(fields)+1)
		for k, v := range fields {
			echo[k] = v
		}
		echo["backgroundWork"] = s.idle.prepare(p, s.initialized.Load(), inspect)
		return echo, nil
	})
	s.reg.Register("releaseIdleSleep", func(_ context.Context, raw json.RawMessage) (any, error) {
		var p idleParams
		if decodeParams(raw, &p) == nil {
			s.idle.release(p.OwnerID)
		}
		return nil, nil
	})
}
