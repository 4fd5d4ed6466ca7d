package exec

import (
	"context"
	"errors"
	"fmt"
	stdsync "sync"
	"time"

	"github.com/google/uuid"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/span"
)

// Per-lease state: the persistent session (opened once, single-flight),
// sessions retired after a timeout, the cancellation tombstone, and what
// the lease remembers of its command lines (plan.go).

type lease struct {
	key      string
	ctx      context.Context
	cancel   context.CancelCauseFunc
	inactive bool
	cur      *session
	flight   *flight
	all      map[*session]struct{}
	active   int
	hist     history
	// cleanups counts the background removals of a files-path command's
	// output files still under way; CloseLease waits for them.
	cleanups stdsync.WaitGroup
}

type session struct {
	id      string
	ref     daytona.SandboxRef
	client  *daytona.Client
	users   int
	retired bool // takes no new command; deleted when unused
	gone    bool // died with its sandbox: nothing to delete
	deleted bool
	// closing is closed when a delete made after its last use ends
	// (releaseSession); nil while no such delete runs.
	closing chan struct{}
}

type flight struct {
	done chan struct{}
	err  error
	// abandoned: the creating execute's own context ended; waiters whose
	// contexts are fine try again instead of failing.
	abandoned bool
}

func (r *Runner) newLeaseLocked(key string) *lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &lease{key: key, ctx: ctx, cancel: cancel, all: map[*session]struct{}{}}
	r.leases[key] = l
	return l
}

// enter admits an execute on a lease, or refuses it after CancelLease.
func (r *Runner) enter(key string) (*lease, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.leases[key]
	if l == nil {
		l = r.newLeaseLocked(key)
	}
	if l.inactive {
		return nil, &LeaseNotActiveError{LeaseKey: key}
	}
	l.active++
	return l, nil
}

func (r *Runner) leave(l *lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.active--
	r.gcLocked(l)
}

// gcLocked drops an idle lease entry that holds nothing worth keeping.
func (r *Runner) gcLocked(l *lease) {
	if l.active == 0 && !l.inactive && l.cur == nil && l.flight == nil && len(l.all) == 0 && r.leases[l.key] == l {
		delete(r.leases, l.key)
		l.cancel(context.Canceled)
	}
}

// CancelLease is releaseLease{cancelActiveWork}: in-flight executes on the
// lease end promptly (with their partial output and an error matching
// ErrLeaseNotActive), and every later Execute on the key fails with that
// error until ReopenLease. The session id is forgotten (the provider is
// stopping the sandbox); CloseLease still tries to delete it.
func (r *Runner) CancelLease(leaseKey string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.leases[leaseKey]
	if l == nil {
		l = r.newLeaseLocked(leaseKey)
	}
	l.inactive = true
	l.cur = nil
	l.cancel(&LeaseNotActiveError{LeaseKey: leaseKey})
}

// ReopenLease clears a CancelLease tombstone (a later acquire or resume
// of the same lease made it active again).
func (r *Runner) ReopenLease(leaseKey string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.leases[leaseKey]
	if l == nil || !l.inactive {
		return
	}
	l.inactive = false
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	r.gcLocked(l)
}

// LeaseActive reports whether Execute would admit a command on the key.
func (r *Runner) LeaseActive(leaseKey string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.leases[leaseKey]
	return l == nil || !l.inactive
}

// ForgetSessions drops the lease's session ids without deleting anything:
// the sandbox was found not started, and a restart destroys sessions
// (docs/behavior.md#sessions). The next command opens a new session.
func (r *Runner) ForgetSessions(leaseKey string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.leases[leaseKey]
	if l == nil {
		return
	}
	for s := range l.all {
		s.gone = true
		s.retired = true
	}
	l.all = map[*session]struct{}{}
	l.cur = nil
	r.gcLocked(l)
}

// SessionID returns the lease's current session id ("" if none).
func (r *Runner) SessionID(leaseKey string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.leases[leaseKey]; l != nil && l.cur != nil {
		return l.cur.id
	}
	return ""
}

// CloseLease tears down the lease's sessions (release, stop, destroy,
// interactive cancel): the ids are cleared first, so a late answer cannot
// clear a newer session, then each is deleted. Failures are returned
// joined, each as "Failed to delete Daytona session <id> during teardown:
// <msg>", and logged; callers log them and carry on (never fatal). A
// CancelLease tombstone survives CloseLease.
func (r *Runner) CloseLease(ctx context.Context, leaseKey string) error {
	r.mu.Lock()
	l := r.leases[leaseKey]
	if l == nil {
		r.mu.Unlock()
		return nil
	}
	var todo []*session
	var closing []chan struct{}
	for s := range l.all {
		if !s.deleted && !s.gone {
			s.deleted = true
			todo = append(todo, s)
		}
		if s.closing != nil {
			closing = append(closing, s.closing)
		}
		s.retired = true
	}
	l.all = map[*session]struct{}{}
	l.cur = nil
	r.gcLocked(l)
	r.mu.Unlock()

	var errs []error
	for _, s := range todo {
		if err := r.deleteSession(ctx, s); err != nil {
			errs = append(errs, err)
		}
	}
	// A retired session's delete, and a files-path command's file
	// removal, still under way are part of the teardown.
	cleaned := make(chan struct{})
	go func() { l.cleanups.Wait(); close(cleaned) }()
	closing = append(closing, cleaned)
	for _, c := range closing {
		select {
		case <-c:
		case <-ctx.Done():
			return errors.Join(append(errs, context.Cause(ctx))...)
		}
	}
	return errors.Join(errs...)
}

func (r *Runner) deleteSession(ctx context.Context, s *session) error {
	sp := span.Start(ctx, "session.close")
	_, err := s.client.Toolbox.DeleteSession(ctx, s.ref, s.id)
	if errors.Is(err, daytona.ErrNotFound) {
		err = nil // already gone: the goal of the delete holds
	}
	sp.End(err)
	if err != nil {
		r.log.Error("Failed to delete Daytona session during teardown", "sessionId", s.id, "error", err.Error())
		return fmt.Errorf("Failed to delete Daytona session %s during teardown: %w", s.id, err)
	}
	return nil
}

// acquireSession returns the lease's session for this sandbox, creating it
// once even when several first commands arrive together (single-flight).
// A failed create is not remembered: the next command retries.
func (r *Runner) acquireSession(ctx context.Context, l *lease, t Target) (*session, error) {
	for {
		r.mu.Lock()
		if l.inactive {
			r.mu.Unlock()
			return nil, &LeaseNotActiveError{LeaseKey: l.key}
		}
		if s := l.cur; s != nil {
			if s.ref.ID == t.Sandbox.ID {
				s.users++
				r.mu.Unlock()
				return s, nil
			}
			// A different sandbox under the same key: never reuse.
			s.retired = true
			l.cur = nil
		}
		if f := l.flight; f != nil {
			r.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
			if f.err != nil {
				if f.abandoned && ctx.Err() == nil {
					continue // the creator gave up, not us
				}
				return nil, f.err
			}
			continue
		}
		f := &flight{done: make(chan struct{})}
		l.flight = f
		r.mu.Unlock()

		id := sessionIDPrefix + uuid.NewString()
		sp := span.Start(ctx, "session.open") // a failed create marks it failed
		_, err := t.Client.Toolbox.CreateSession(ctx, t.Sandbox, id)
		sp.End(err)
		abandoned := false
		if err != nil && ctx.Err() != nil {
			err = context.Cause(ctx)
			abandoned = true
		}
		r.mu.Lock()
		l.flight = nil
		f.abandoned = abandoned
		if err == nil {
			s := &session{id: id, ref: t.Sandbox, client: t.Client}
			l.all[s] = struct{}{}
			if l.inactive {
				s.retired = true // CloseLease deletes it
				err = &LeaseNotActiveError{LeaseKey: l.key}
			} else {
				l.cur = s
			}
		}
		f.err = err
		close(f.done)
		r.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("exec: open session: %w", err)
		}
	}
}

// releaseSession ends one command's use of s. retire takes s out of
// service (a command that may still run in it timed out): it is deleted —
// which kills that command — once no other execute uses it. The delete
// runs after the execute has answered: the daemon gives a command that
// ignores SIGTERM 5 s before SIGKILL, and a timed-out command's answer
// must not wait for that (docs/exec.md#timeouts-and-cancellation). CloseLease waits for it.
func (r *Runner) releaseSession(ctx context.Context, l *lease, s *session, retire bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.users--
	if retire {
		s.retired = true
		if l.cur == s {
			l.cur = nil
		}
	}
	if !s.retired || s.users != 0 || s.gone || s.deleted || l.inactive {
		return
	}
	s.deleted = true
	s.closing = make(chan struct{})
	go func() {
		dctx, cancel := withBound(context.WithoutCancel(ctx), r.clock, cleanupBound, context.DeadlineExceeded)
		defer cancel()
		_ = r.deleteSession(dctx, s)
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(l.all, s)
		close(s.closing)
		r.gcLocked(l)
	}()
}

// sessionGone forgets a session the toolbox no longer knows (the sandbox
// restarted): nothing to delete, the next command opens a new one.
func (r *Runner) sessionGone(l *lease, s *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.gone = true
	s.retired = true
	if l.cur == s {
		l.cur = nil
	}
	delete(l.all, s)
}

// planFor plans a command of the lease (plan.go).
func (r *Runner) planFor(l *lease, key uint64) plan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return planFor(l.hist.rtt, l.hist.last(key))
}

// noteRun records a command line's run on the lease.
func (r *Runner) noteRun(l *lease, key uint64, run, seen time.Duration, printed, lines int64, garbled bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.hist.note(key, run, seen, printed, lines, garbled)
}

// noteRTT records the duration of a call that was a bare round trip.
func (r *Runner) noteRTT(l *lease, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.hist.rtt = max(d, time.Microsecond)
}

// rttOf is the lease's measured round trip.
func (r *Runner) rttOf(l *lease) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return l.hist.rtt
}

// background runs f after the execute answered (a files-path command's
// file removal), bounded by cleanupBound; CloseLease waits for it.
func (r *Runner) background(ctx context.Context, l *lease, f func(context.Context)) {
	l.cleanups.Add(1)
	go func() {
		defer l.cleanups.Done()
		bctx, cancel := withBound(context.WithoutCancel(ctx), r.clock, cleanupBound, context.DeadlineExceeded)
		defer cancel()
		f(bctx)
	}()
}
