package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/jsonrpc2"
)

// Options configure [Serve]. The zero value serves an empty registry.
type Options struct {
	// Registry holds the worker's methods. Serve adds initialize, shutdown and
	// configChanged, and health when the registry has none.
	Registry *Registry
	// Logger receives diagnostics; it must not write to the protocol output.
	// Nil discards them.
	Logger *slog.Logger
	// MaxFrame is the frame limit in bytes; 0 means DefaultMaxFrame.
	MaxFrame int
	// ShutdownGrace bounds how long Serve waits for in-flight handlers after
	// shutdown or EOF; 0 means 300ms, leaving the process room to exit within
	// the host's 0.5 s.
	ShutdownGrace time.Duration
	// Done, when it closes, makes Serve return as if stdin had closed; the
	// worker uses it for the death of its parent process.
	Done <-chan struct{}
	// IdleWork reports the worker's own background work for
	// prepareIdleSleep (docs/host.md#idle-sleep). When set, Serve adds and
	// advertises prepareIdleSleep and releaseIdleSleep; nil leaves them out.
	IdleWork func() IdleWork
	// OnShutdown runs when the host asks shutdown, before the answer: the
	// worker ends what must not outlive it while the host still listens.
	OnShutdown func(ctx context.Context)

	// now, in tests only, is the clock of idle holds; nil is time.Now.
	now func() time.Time

	// connected, in tests only, runs after the library made its connection
	// and before Serve goes on: the library is already reading and
	// dispatching by then.
	connected func()
}

// InitializeParams are the fields of initialize the worker reads
// (docs/host.md#initialize).
type InitializeParams struct {
	Manifest     json.RawMessage `json:"manifest"`
	Config       json.RawMessage `json:"config"`
	InstanceInfo struct {
		InstanceID  string `json:"instanceId"`
		HostVersion string `json:"hostVersion"`
	} `json:"instanceInfo"`
	APIVersion int `json:"apiVersion"`
}

// InitializeResult is initialize's reply.
type InitializeResult struct {
	OK               bool     `json:"ok"`
	SupportedMethods []string `json:"supportedMethods"`
}

// HealthResult is the default health reply.
type HealthResult struct {
	Status  string         `json:"status"`
	Message string         `json:"message,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

type serverKey struct{}
type requestKey struct{}

// server is one serving session: a connection, its in-flight handlers and
// their shared cancellation.
type server struct {
	reg      *Registry
	log      *slog.Logger
	conn     atomic.Pointer[jsonrpc2.Conn]
	stream   *stream
	base     context.Context
	handlers tracker

	initialized atomic.Bool
	shutdown    chan struct{}
	once        sync.Once
	onShutdown  func(context.Context)
	idle        idleDrain
}

// request is the state of one host request while it is served.
type request struct {
	invocationID string

	mu       sync.Mutex // held while a notification for this request is written
	answered bool
	logChars int64
	after    []func() // AfterReply functions
}

// Serve reads requests from in and writes frames to out until in reaches EOF,
// a shutdown request has been answered, opts.Done closes, or ctx is done. It
// returns nil in all of these cases: each is a normal end of a worker. Every
// handler runs under a context that is cancelled when serving ends; Serve
// waits up to ShutdownGrace for them before it returns.
func Serve(ctx context.Context, in io.Reader, out io.Writer, opts Options) error {
	reg := opts.Registry
	if reg == nil {
		reg = NewRegistry()
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	grace := opts.ShutdownGrace
	if grace <= 0 {
		grace = 300 * time.Millisecond
	}
	base, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &server{
		reg:      reg,
		log:      logger,
		stream:   newStream(in, out, opts.MaxFrame, logger),
		shutdown: make(chan struct{}),
	}
	s.onShutdown = opts.OnShutdown
	s.idle.now = opts.now
	if s.idle.now == nil {
		s.idle.now = time.Now
	}
	s.stream.onAnswer = s.idle.callAnswered
	s.base = context.WithValue(base, serverKey{}, s)
	s.registerBuiltins()
	if opts.IdleWork != nil {
		s.registerIdle(opts.IdleWork)
	}

	// The library closes its connection when its context ends; it gets one
	// that only Serve's own exit ends, so cancelled handlers can still answer.
	connCtx, connCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer connCancel()
	conn := jsonrpc2.NewConn(connCtx, s.stream, dispatcher{s},
		jsonrpc2.SetLogger(log.New(slogWriter{logger}, "jsonrpc2: ", 0)))
	if opts.connected != nil {
		opts.connected()
	}
	s.conn.CompareAndSwap(nil, conn)

	var idle <-chan struct{}
	var timer *time.Timer
	select {
	case <-s.stream.eof:
		// The host closed stdin. Requests that arrived just before still get
		// their answers, within the grace period, before work is cancelled.
		if err := s.stream.readErr; err != io.EOF {
			logger.Warn("reading stdin failed", "err", err)
		}
		idle = s.handlers.close()
		timer = time.NewTimer(grace)
		select {
		case <-idle:
		case <-timer.C:
		}
		timer.Stop()
	case <-s.shutdown:
	case <-orNever(opts.Done):
		logger.Info("parent process gone; exiting")
	case <-ctx.Done():
	}
	if idle == nil {
		idle = s.handlers.close()
	}
	cancel()
	timer = time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-idle:
	case <-timer.C:
		logger.Warn("handlers still running at exit", "grace", grace)
	}
	_ = conn.Close()
	return nil
}

func orNever(c <-chan struct{}) <-chan struct{} {
	if c == nil {
		return make(chan struct{})
	}
	return c
}

func (s *server) registerBuiltins() {
	s.reg.Register("initialize", Typed(func(_ context.Context, p InitializeParams) (InitializeResult, error) {
		if !s.initialized.CompareAndSwap(false, true) {
			return InitializeResult{}, Errorf(CodeWorkerError, "Worker already initialized")
		}
		s.log.Info("initialized", "hostVersion", p.InstanceInfo.HostVersion)
		return InitializeResult{OK: true, SupportedMethods: s.reg.Methods()}, nil
	}))
	s.reg.Register("shutdown", func(ctx context.Context, _ json.RawMessage) (any, error) {
		if s.onShutdown != nil {
			s.onShutdown(ctx)
		}
		return nil, nil
	})
	s.reg.RegisterInline("configChanged", func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	if !s.reg.Has("health") {
		s.reg.RegisterInline("health", func(context.Context, json.RawMessage) (any, error) {
			return HealthResult{Status: "ok"}, nil
		})
	}
}

// dispatcher is the jsonrpc2.Handler. It runs on the library's read loop, so
// it only starts a tracked goroutine per request and returns (inline methods
// excepted). Each request runs under its own context, derived from Serve's;
// a panic becomes a CodeWorkerError reply and a method that is not
// registered the SDK's answer for it (notFound).
type dispatcher struct{ s *server }

func (d dispatcher) Handle(_ context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	s := d.s
	// The library starts reading, and so dispatching, inside NewConn: a
	// request already waiting on stdin can reach a handler before Serve
	// stores the connection, and its execute.log would find none.
	s.conn.CompareAndSwap(nil, conn)
	r := &request{invocationID: invocationID(req)}
	h, ok := s.reg.Lookup(req.Method)
	if req.Notif {
		if !ok {
			s.log.Debug("ignored notification", "method", req.Method)
			return
		}
	} else if !ok {
		s.reply(req, r, nil, notFound(req.Method))
		return
	}
	if !s.handlers.add() {
		if !req.Notif {
			s.reply(req, r, nil, Errorf(CodeWorkerError, "worker is shutting down"))
		}
		return
	}
	// Every request but the idle methods and shutdown is work in flight
	// for idle sleep, and is refused while a hold is granted.
	// endIdle ends the request's idle-sleep accounting before its answer
	// goes out (once; finish calls it too): a host that sends
	// prepareIdleSleep right after the answer must not find the answered
	// request still counted as work.
	endIdle := func() {}
	if !idleExempt(req.Method) {
		idleDone, err := s.idle.begin()
		if err != nil {
			s.handlers.done()
			if !req.Notif {
				s.reply(req, r, nil, err)
			}
			return
		}
		endIdle = idleDone
	}
	finish := func() { endIdle(); s.handlers.done() }
	if s.reg.inline[req.Method] {
		ctx := s.requestContext(r, req)
		result, err := s.call(ctx, h, req)
		if l, ok := result.(later); ok && err == nil {
			// An ordered method: taken in order here, answered when its
			// continuation is done (RegisterOrdered).
			go func() {
				defer finish()
				result, err := s.call(ctx, func(ctx context.Context, _ json.RawMessage) (any, error) { return l(ctx) }, req)
				endIdle()
				if !req.Notif {
					s.reply(req, r, result, err)
				}
			}()
			return
		}
		defer finish()
		endIdle()
		if !req.Notif {
			s.reply(req, r, result, err)
		}
		return
	}
	go func() {
		defer finish()
		result, err := s.call(s.requestContext(r, req), h, req)
		endIdle()
		if req.Notif {
			return
		}
		s.reply(req, r, result, err)
		if req.Method == "shutdown" {
			s.once.Do(func() { close(s.shutdown) })
		}
	}()
}

// call runs a handler, turning a panic into a CodeWorkerError.
func (s *server) call(ctx context.Context, h Handler, req *jsonrpc2.Request) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("handler panicked", "method", req.Method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			result, err = nil, Errorf(CodeWorkerError, "internal error while handling %s", req.Method)
		}
	}()
	var params json.RawMessage
	if req.Params != nil {
		params = *req.Params
	}
	return h(ctx, params)
}

// reply closes the request to notifications, then writes its response, so
// every notification sent on its behalf precedes the response. Results and
// errors take the same path (see [stream]).
func (s *server) reply(req *jsonrpc2.Request, r *request, result any, err error) {
	r.mu.Lock()
	r.answered = true
	r.mu.Unlock()
	var e *wireErr
	if err != nil {
		e = wireError(err)
	}
	// respond answers a result that cannot be encoded (or is too large)
	// with an error frame itself; what is left here is a broken or closed
	// output.
	if werr := s.stream.respond(hostID(req.ID), result, e); werr != nil && !errors.Is(werr, jsonrpc2.ErrClosed) {
		s.log.Error("could not write response", "method", req.Method, "err", werr)
	}
	r.runAfter()
}

// invocationID extracts paperclipInvocation.id (docs/host.md#envelopes).
func invocationID(req *jsonrpc2.Request) string {
	for _, f := range req.ExtraFields {
		if f.Name != "paperclipInvocation" {
			continue
		}
		if m, ok := f.Value.(map[string]any); ok {
			if id, ok := m["id"].(string); ok {
				return id
			}
		}
	}
	return ""
}

// slogWriter adapts the library's log.Logger output to slog.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Warn(string(trimNL(p)))
	return len(p), nil
}

func trimNL(p []byte) []byte {
	for len(p) > 0 && (p[len(p)-1] == '\n' || p[len(p)-1] == '\r') {
		p = p[:len(p)-1]
	}
	return p
}

// tracker counts in-flight handlers. Unlike a WaitGroup it can be closed to
// new work while handlers are still being added from the read loop.
type tracker struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{}
}

// add registers a handler; false once the tracker is closed.
func (t *tracker) add() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.n++
	return true
}

func (t *tracker) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.n == 0 && t.idle != nil {
		close(t.idle)
		t.idle = nil
	}
}

// close refuses new handlers and returns a channel closed when none run.
func (t *tracker) close() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	ch := make(chan struct{})
	if t.n == 0 {
		close(ch)
	} else {
		t.idle = ch
	}
	return ch
}
