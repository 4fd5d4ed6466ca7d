package channel

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	cmdexec "github.com/daytonaworker/daytona-worker/exec"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// The machinery the login terminal (loginpty.go) and the duplex channel
// (duplex.go) share: which sandbox a channel open may reach, the pseudo-
// terminal under a channel, its ordered writer, and the end of a channel
// (process exit, dropped transport, host close, lease teardown).

// Bounds of a channel.
const (
	// termCols and termRows are the fixed terminal size of every channel.
	termCols, termRows = 120, 30
	// openBound keeps an open well inside the host's 30 s: a reply the host
	// has given up on must never bind a route (frames for a route the host
	// no longer knows make it kill the worker).
	openBound = 20 * time.Second
	// killBound and drainBound keep a close inside the host's 10 s: an
	// unacknowledged close makes the host kill the worker.
	killBound  = 4 * time.Second
	drainBound = 2 * time.Second
	// MaxPendingWrites is the host's limit of requests in flight per route.
	MaxPendingWrites = 256
	// maxClosedRoutes bounds the memory of closed routes (a repeated close
	// echoes the same ids).
	maxClosedRoutes = 4096
	// readBuf is the size of one terminal read: Daytona sends frames of at
	// most 32 KiB, so one read is one frame.
	readBuf = 32 << 10
)

// Ref is how a channel open names a lease: it carries no config, so the
// account comes from an earlier call on the same lease.
type Ref struct{ DriverKey, CompanyID, EnvironmentID, LeaseID string }

// Lease is what a channel needs of a lease the worker served: a client of
// its account (the client holds the API key, in memory only, as the
// reference plugin's sandbox handle does), the sandbox, its default cwd and
// the provider's identity of the lease, which [Hub.CloseLease] names.
type Lease struct {
	Client  *daytona.Client
	Sandbox *daytona.Sandbox
	Cwd     string
	Key     string
}

// Options configure a [Hub].
type Options struct {
	// Resolve finds the lease a channel open names, or the error the open
	// answers (a lease never served, or torn down). Required.
	Resolve func(ref Ref, what string) (*Lease, error)
	// Logger receives diagnostics (never secrets). Nil discards.
	Logger *slog.Logger
	// Clock times a duplex route's lifetime. Nil means the real clock.
	Clock cmdexec.Clock
	// Wrap wraps the handlers of the unordered methods (the provider counts
	// them as pending hooks). Nil leaves them as they are.
	Wrap func(rpc.Handler) rpc.Handler
}

// Hub is the worker's channel state: the open login terminals and duplex
// channels by host route id, and the closed duplex routes.
type Hub struct {
	resolve func(Ref, string) (*Lease, error)
	log     *slog.Logger
	clock   cmdexec.Clock
	wrap    func(rpc.Handler) rpc.Handler

	mu     sync.Mutex
	login  map[string]*channel // by host route id
	duplex map[string]*channel // by host route id
	closed map[string]string   // closed duplex route -> its worker session id
	order  []string            // closed routes, oldest first
}

// New returns a Hub.
func New(o Options) *Hub {
	h := &Hub{resolve: o.Resolve, log: o.Logger, clock: o.Clock, wrap: o.Wrap}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.clock == nil {
		h.clock = cmdexec.RealClock{}
	}
	if h.wrap == nil {
		h.wrap = func(f rpc.Handler) rpc.Handler { return f }
	}
	return h
}

// CloseLease ends every channel of a lease (release, destroy, stop, a
// resume that restarts the sandbox): each is killed, so the host gets its
// exit, then disconnected.
func (h *Hub) CloseLease(ctx context.Context, key string) {
	h.endAll(ctx, func(ch *channel) bool { return ch.la.Key == key })
}

// CloseAll ends every open channel: the worker is shutting down, and a
// terminal left running in a sandbox would outlive the route the host
// forgets. Each bound channel's exit notification is sent before it
// returns (within the drain bound).
func (h *Hub) CloseAll(ctx context.Context) {
	h.endAll(ctx, func(*channel) bool { return true })
}

func (h *Hub) endAll(ctx context.Context, match func(*channel) bool) {
	h.mu.Lock()
	var list []*channel
	for _, m := range []map[string]*channel{h.login, h.duplex} {
		for _, ch := range m {
			if match(ch) {
				list = append(list, ch)
			}
		}
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, ch := range list {
		wg.Go(func() { ch.end(ctx) })
	}
	wg.Wait()
}

// channel is one open login terminal or duplex channel.
type channel struct {
	h           *Hub
	la          *Lease
	hostRouteID string
	sid         string
	conn        *daytona.PTYConn
	n           *rpc.Notifier
	out         func(p []byte) bool // forwards output; false ends the channel
	exit        func(code *int, transportClosed bool)
	leftover    []byte       // output read during the open, sent first
	dup         *duplexState // duplex channels only

	mu sync.Mutex
	// settled is made when the open succeeded (bind runs once its reply
	// is out) and closed when bind has run. end waits for it, so a
	// teardown that races the reply still reports the exit.
	settled chan struct{}
	bound   bool // the open reply is out: frames may flow
	muted   bool // the host closed the route: nothing more is sent
	ended   bool // killed or exited: writes are no-ops
	// writerDone: the writer has stopped; nothing may be queued.
	writerDone bool
	writes     chan *writeJob
	readEnd    chan struct{} // closed when the reader is done
}

// writeJob is one host write, in arrival order.
type writeJob struct {
	data []byte
	done chan error
}

// openTerm creates the channel's terminal and connects to it.
func (ch *channel) openTerm(ctx context.Context) error {
	ref := ch.la.Sandbox.Ref()
	if _, _, err := ch.la.Client.PTY.Create(ctx, ref, &daytona.PTYCreateRequest{
		ID: ch.sid, Cwd: ch.la.Cwd, Cols: termCols, Rows: termRows, LazyStart: true,
	}); err != nil {
		return err
	}
	conn, err := ch.la.Client.PTY.Connect(ctx, ref, ch.sid)
	if err != nil {
		ch.kill()
		return err
	}
	ch.mu.Lock()
	ch.conn = conn
	ch.writes = make(chan *writeJob, MaxPendingWrites)
	ch.readEnd = make(chan struct{})
	muted := ch.muted
	ch.mu.Unlock()
	if muted {
		// The host closed the route while it was opening.
		ch.kill()
		_ = conn.Close()
		return errRouteClosed
	}
	return nil
}

// errRouteClosed answers an open whose route the host closed meanwhile.
var errRouteClosed = errors.New("the host closed the route while it was opening")

// errEndedOpening answers an open whose channel a lease teardown (or a
// restart of its sandbox) ended before the reply: the host never learns a
// route that is already over, and the open's failure path kills a process
// the teardown's kill may have preceded.
type errEndedOpening struct{ what string }

func (e errEndedOpening) Error() string {
	return "Daytona " + e.what + ": the lease was torn down or restarted while the channel was opening."
}

// bindAfterReply is the last step of a successful open: bind runs once
// the reply is out. A channel ended meanwhile (not by the host's close,
// which only mutes it) fails the open instead. From here on end waits for
// bind: the host learns the route from the reply, so it must get the
// route's exit, before a teardown that ends the channel answers.
func (ch *channel) bindAfterReply(ctx context.Context, what string, lifetime time.Duration) error {
	ch.mu.Lock()
	if ch.ended && !ch.muted {
		ch.mu.Unlock()
		return errEndedOpening{what}
	}
	ch.settled = make(chan struct{})
	ch.mu.Unlock()
	rpc.AfterReply(ctx, func() { ch.bind(lifetime) })
	return nil
}

// bind starts the reader and the writer once the open reply is out, unless
// the host closed the route meanwhile. A channel ended (killed) between
// the reply and here is bound all the same: its reader reports the exit
// the host now expects.
func (ch *channel) bind(lifetime time.Duration) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	defer close(ch.settled)
	if ch.muted {
		// Closed before it bound: writes queued since the reply are no-ops.
		ch.writerDone = true
		go ch.drainWrites()
		return
	}
	ch.bound = true
	go ch.read()
	go ch.write()
	if lifetime > 0 {
		t := ch.h.clock.NewTimer(lifetime)
		go func() {
			defer t.Stop()
			select {
			case <-t.C():
				ch.h.log.Warn("duplex channel reached its lifetime; ending it", "workerSessionId", ch.sid)
				ch.end(context.Background())
			case <-ch.readEnd:
			}
		}()
	}
}

// read takes output off the terminal socket as fast as it comes (Daytona
// drops a slow client) into the outbox; send forwards it. When the terminal
// ends, send reports the exit once, after the last output.
func (ch *channel) read() {
	ob := newOutbox()
	go ch.send(ob)
	ob.put(ch.leftover)
	ch.leftover = nil
	buf := make([]byte, readBuf)
	for {
		n, err := ch.conn.Read(buf)
		ob.put(buf[:n])
		if err == nil {
			continue
		}
		ch.mu.Lock()
		ch.ended = true
		ch.mu.Unlock()
		if ex, ok := ch.conn.Exit(); ok && errors.Is(err, io.EOF) && ex.Code >= 0 {
			code := ex.Code
			ob.close(&code, false)
		} else {
			// The provider transport dropped without a process exit.
			ob.close(nil, true)
		}
		return
	}
}

// send forwards what accumulated in the outbox, as one frame per take, so
// output that arrives while a frame is written goes out together. Past a
// limit nothing more is forwarded; the kill ends the terminal.
func (ch *channel) send(ob *outbox) {
	defer close(ch.readEnd)
	forwarding := true
	for {
		b, ok := ob.take()
		if !ok {
			break
		}
		if forwarding && !ch.out(b) {
			forwarding = false
			go ch.kill()
		}
	}
	ch.exit(ob.code, ob.transportClosed)
}

// notify sends one frame of the channel unless the host closed it.
func (ch *channel) notify(method string, params any) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.muted || !ch.bound {
		return
	}
	if err := ch.n.Notify(method, params); err != nil {
		ch.h.log.Debug("channel frame not sent", "method", method, "err", err)
	}
}

// write sends the queued writes in order, each sliced by the PTY input
// chunker. The first failed send ends the channel: that write answers
// write_error (never the provider's text), later ones are no-ops.
func (ch *channel) write() {
	for {
		select {
		case j := <-ch.writes:
			ch.mu.Lock()
			ended := ch.ended
			ch.mu.Unlock()
			if ended {
				j.done <- nil
				continue
			}
			if _, err := ch.conn.Write(j.data); err != nil {
				ch.mu.Lock()
				first := !ch.ended
				ch.ended = true
				ch.mu.Unlock()
				if first {
					ch.h.log.Warn("channel write failed; ending the channel", "workerSessionId", ch.sid, "reason", "write_error")
					j.done <- errWriteFailed
					go ch.kill()
					continue
				}
			}
			j.done <- nil
		case <-ch.readEnd:
			ch.mu.Lock()
			ch.writerDone = true
			ch.mu.Unlock()
			ch.drainWrites()
			return
		}
	}
}

// drainWrites answers writes still queued at the end as no-ops.
func (ch *channel) drainWrites() {
	for {
		select {
		case j := <-ch.writes:
			j.done <- nil
		default:
			return
		}
	}
}

// errWriteFailed is the typed reason of a failed channel write.
var errWriteFailed = errors.New("write_error")

// enqueue takes one host write in arrival order. A channel already ended
// takes nothing (the write is a no-op); more writes in flight than the
// host itself allows end the channel.
func (ch *channel) enqueue(data []byte) (rpc.Continuation, error) {
	// A write may arrive between the open's reply and bind: it is queued
	// for the writer bind starts.
	// The job is queued under the lock the writer takes before its last
	// drain, so no job is left unanswered.
	j := &writeJob{data: data, done: make(chan error, 1)}
	ch.mu.Lock()
	if ch.ended || ch.muted || ch.writes == nil || ch.writerDone || len(data) == 0 {
		ch.mu.Unlock()
		return nil, nil
	}
	select {
	case ch.writes <- j:
		ch.mu.Unlock()
	default:
		ch.mu.Unlock()
		go ch.end(context.Background())
		return nil, rpc.InvalidParams("invalid params: more than %d writes in flight on one channel", MaxPendingWrites)
	}
	return func(ctx context.Context) (any, error) {
		select {
		case err := <-j.done:
			if err != nil {
				return nil, err
			}
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}, nil
}

// kill ends the process (Daytona kills the terminal's process tree); the
// reader then sees the exit. Errors are only logged: a kill is best effort.
func (ch *channel) kill() {
	ch.mu.Lock()
	ch.ended = true
	ch.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), killBound)
	defer cancel()
	if _, err := ch.la.Client.PTY.Kill(ctx, ch.la.Sandbox.Ref(), ch.sid); err != nil && !errors.Is(err, daytona.ErrNotFound) {
		ch.h.log.Debug("terminal kill failed", "workerSessionId", ch.sid, "err", err)
	}
}

// end kills the channel, waits (bounded) for the reader to report the exit
// and disconnects. It is idempotent.
func (ch *channel) end(ctx context.Context) {
	ch.kill()
	ch.awaitExit(ctx)
	ch.mu.Lock()
	conn := ch.conn
	ch.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

// awaitExit waits, within drainBound, until the reader has reported the
// exit of a channel whose open succeeded: when the open's reply is still
// on its way, first until bind started the reader.
func (ch *channel) awaitExit(ctx context.Context) {
	ch.mu.Lock()
	settled := ch.settled
	ch.mu.Unlock()
	if settled == nil {
		return // the open failed or is still running: its own path ends it
	}
	t := time.NewTimer(drainBound)
	defer t.Stop()
	select {
	case <-settled:
	case <-t.C:
		return
	case <-ctx.Done():
		return
	}
	ch.mu.Lock()
	readEnd, bound := ch.readEnd, ch.bound
	ch.mu.Unlock()
	if !bound {
		return // the host closed it: nothing is reported
	}
	select {
	case <-readEnd:
	case <-t.C:
	case <-ctx.Done():
	}
}

// close is the host's close: nothing more is sent for the route, the
// process is killed and the terminal released.
func (ch *channel) close() {
	ch.mu.Lock()
	ch.muted = true
	ch.mu.Unlock()
	ch.end(context.Background())
}

// rememberClosed keeps a closed duplex route's worker session id for a
// repeated close; cs.mu held.
func (cs *Hub) rememberClosedLocked(hostRouteID, sid string) {
	if cs.closed == nil {
		cs.closed = make(map[string]string)
	}
	if _, ok := cs.closed[hostRouteID]; !ok {
		cs.order = append(cs.order, hostRouteID)
	}
	cs.closed[hostRouteID] = sid
	for len(cs.order) > maxClosedRoutes {
		delete(cs.closed, cs.order[0])
		cs.order = cs.order[1:]
	}
}

// table is the login or the duplex route table; cs.mu held.
func (cs *Hub) tableLocked(login bool) map[string]*channel {
	m := &cs.duplex
	if login {
		m = &cs.login
	}
	if *m == nil {
		*m = make(map[string]*channel)
	}
	return *m
}

// register adds an opening channel under its host route id; a route id
// already open is refused.
func (cs *Hub) register(login bool, ch *channel) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	m := cs.tableLocked(login)
	if _, dup := m[ch.hostRouteID]; dup {
		return rpc.InvalidParams("invalid params: hostRouteId %q is already open", ch.hostRouteID)
	}
	m[ch.hostRouteID] = ch
	return nil
}

// unregister removes a channel (the host closed it, or its open failed);
// a closed duplex route is remembered for a repeated close.
func (cs *Hub) unregister(login bool, ch *channel, bound bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	m := cs.tableLocked(login)
	if m[ch.hostRouteID] == ch {
		delete(m, ch.hostRouteID)
	}
	if !login && bound {
		cs.rememberClosedLocked(ch.hostRouteID, ch.sid)
	}
}

// get returns the channel open under a host route id.
func (cs *Hub) get(login bool, hostRouteID string) *channel {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.tableLocked(login)[hostRouteID]
}

// find returns the channel with a worker session id.
func (cs *Hub) find(login bool, sid string) *channel {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, ch := range cs.tableLocked(login) {
		if ch.sid == sid {
			return ch
		}
	}
	return nil
}

// closeRoute is the host's close of a route: idempotent, always answered.
// It reports the worker session id when the route was bound (the open
// reply was sent), or when an earlier close of it did.
func (cs *Hub) closeRoute(login bool, hostRouteID string) string {
	ch := cs.get(login, hostRouteID)
	if ch == nil {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		return cs.closed[hostRouteID]
	}
	ch.close()
	ch.mu.Lock()
	bound := ch.bound
	ch.mu.Unlock()
	cs.unregister(login, ch, bound)
	if bound {
		return ch.sid
	}
	return ""
}

// Register adds the login terminal and duplex channel methods.
// Inputs and writes are ordered: each is taken in arrival order and
// answered once its bytes reached the terminal.
func (h *Hub) Register(reg *rpc.Registry) {
	reg.Register("loginPtyOpen", h.wrap(rpc.Typed(h.loginOpen)))
	reg.RegisterOrdered("loginPtyInput", rpc.TypedOrdered(h.loginInput))
	reg.Register("loginPtyStop", h.wrap(rpc.Typed(h.loginStop)))
	reg.Register("loginPtyClose", h.wrap(rpc.Typed(h.loginClose)))
	reg.Register("duplexChannelOpen", h.wrap(rpc.Typed(h.duplexOpen)))
	reg.RegisterOrdered("duplexChannelWrite", rpc.TypedOrdered(h.duplexWrite))
	reg.Register("duplexChannelStop", h.wrap(rpc.Typed(h.duplexStop)))
	reg.Register("duplexChannelClose", h.wrap(rpc.Typed(h.duplexClose)))
}
