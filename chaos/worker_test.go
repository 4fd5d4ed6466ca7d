package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
	"github.com/daytonaworker/daytona-worker/provider"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// errWorkerGone is a call's outcome when its worker died (was killed)
// before answering, as the host sees a crashed worker's calls fail.
var errWorkerGone = errors.New("chaos: the worker exited before answering")

// rpcError is a JSON-RPC error answer.
type rpcError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("rpc error %d: %s", e.Code, e.Message) }

// frame is any frame the worker writes.
type frame struct {
	ID           json.RawMessage `json:"id"`
	Method       string          `json:"method"`
	Params       json.RawMessage `json:"params"`
	Result       json.RawMessage `json:"result"`
	Error        *rpcError       `json:"error"`
	InvocationID string          `json:"paperclipInvocationId"`
}

// logChunk is one execute.log notification.
type logChunk struct {
	Stream string `json:"stream"`
	Chunk  string `json:"chunk"`
}

// reply is a call's answer.
type reply struct {
	result json.RawMessage
	err    error // *rpcError, errWorkerGone
}

// worker is one in-process worker: the product's driver served by
// rpc.Serve over pipes, as the binary serves it over stdio, with a network
// the test can cut. Killing it is a process death: its pipes close, its
// in-flight calls fail at once, its connections to Daytona are reset and it
// can open no more; all its in-memory state is lost, and a fresh worker
// (restart) knows only what the host passes in params.
type worker struct {
	in     *io.PipeWriter
	cancel context.CancelFunc
	net    *cutNet
	served chan error // Serve's return value

	nextID atomic.Int64
	mu     sync.Mutex
	calls  map[string]chan reply
	logs   map[string][]logChunk // execute.log chunks by invocation id
	gone   bool                  // killed, or its output ended
	killed bool
	panics []string // log records that mention a panic
}

// startWorker serves a fresh driver. Retries and polls use the tests'
// fast back-off: the schedules exercise the decisions, not the waits.
func startWorker() *worker {
	n := newCutNet()
	retry := daytona.RetryPolicy{MaxRetries: 2, BackOff: testenv.FastBackOff, Sleep: testenv.ShortSleep}
	w := &worker{net: n, served: make(chan error, 1), calls: map[string]chan reply{}, logs: map[string][]logChunk{}}
	logger := slog.New(slog.NewTextHandler(panicWatch{w}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d := provider.New(provider.Options{
		Env:         func(string) (string, bool) { return "", false },
		HTTPClient:  &http.Client{Transport: n},
		Logger:      logger,
		PollBackOff: testenv.FastBackOff,
		RetryPolicy: &retry,
	})
	reg := rpc.NewRegistry()
	d.Register(reg)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	w.in, w.cancel = inW, cancel
	go func() {
		err := rpc.Serve(ctx, inR, outW, rpc.Options{Registry: reg, Logger: logger})
		w.served <- err
		_ = outW.Close()
		_ = inR.Close()
	}()
	go w.read(outR)
	return w
}

// panicWatch collects log records that report a recovered panic: a
// worker that panics has died as far as the host is concerned.
type panicWatch struct{ w *worker }

func (p panicWatch) Write(b []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(b), []byte("panic")) {
		p.w.mu.Lock()
		p.w.panics = append(p.w.panics, string(b))
		p.w.mu.Unlock()
	}
	return len(b), nil
}

// read dispatches the worker's frames until its output ends.
func (w *worker) read(out io.Reader) {
	br := bufio.NewReaderSize(out, 1<<16)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			w.handle(line)
		}
		if err != nil {
			break
		}
	}
	w.mu.Lock()
	w.gone = true
	calls := w.calls
	w.calls = map[string]chan reply{}
	w.mu.Unlock()
	for _, ch := range calls {
		ch <- reply{err: errWorkerGone}
	}
}

func (w *worker) handle(line []byte) {
	var f frame
	if err := json.Unmarshal(line, &f); err != nil {
		return // not a frame: a protocol check elsewhere catches it
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.killed {
		return // a dead process writes nothing
	}
	switch {
	case f.Method == "execute.log":
		var c logChunk
		if json.Unmarshal(f.Params, &c) == nil {
			w.logs[f.InvocationID] = append(w.logs[f.InvocationID], c)
		}
	case f.Method != "":
		// span.record and other worker requests: never answered, as the
		// host's tracer drops them.
	default:
		id := string(f.ID)
		if ch, ok := w.calls[id]; ok {
			delete(w.calls, id)
			r := reply{result: f.Result}
			if f.Error != nil {
				r.err = f.Error
			}
			ch <- r
		}
	}
}

// call sends one request and waits for its answer, the worker's death, or
// ctx (the host's timeout for the method).
func (w *worker) call(ctx context.Context, method string, params any) (json.RawMessage, []logChunk, error) {
	n := w.nextID.Add(1)
	id := fmt.Sprint(n)
	inv := "inv-" + id
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": n, "method": method, "params": params,
		"paperclipInvocation": map[string]any{"id": inv}})
	if err != nil {
		return nil, nil, err
	}
	ch := make(chan reply, 1)
	w.mu.Lock()
	if w.gone {
		w.mu.Unlock()
		return nil, nil, errWorkerGone
	}
	w.calls[id] = ch
	w.mu.Unlock()
	if _, err := w.in.Write(append(b, '\n')); err != nil {
		w.mu.Lock()
		delete(w.calls, id)
		w.mu.Unlock()
		return nil, nil, errWorkerGone
	}
	var r reply
	select {
	case r = <-ch:
	case <-ctx.Done():
		w.mu.Lock()
		delete(w.calls, id)
		w.mu.Unlock()
		return nil, nil, fmt.Errorf("%s: no answer within the host's timeout: %w", method, ctx.Err())
	}
	w.mu.Lock()
	logs := w.logs[inv]
	delete(w.logs, inv)
	w.mu.Unlock()
	return r.result, logs, r.err
}

// kill ends the worker as SIGKILL would, from the host's point of view.
func (w *worker) kill() {
	w.mu.Lock()
	w.killed, w.gone = true, true
	calls := w.calls
	w.calls = map[string]chan reply{}
	w.mu.Unlock()
	for _, ch := range calls {
		ch <- reply{err: errWorkerGone}
	}
	w.net.cut()
	w.cancel()
	_ = w.in.Close()
}

// stop ends a worker the schedule did not kill, and reports whether it
// had died on its own before (Serve returned early, or a panic was logged).
func (w *worker) stop() (died string) {
	select {
	case err := <-w.served:
		died = fmt.Sprintf("the worker stopped serving by itself (%v)", err)
	default:
	}
	w.mu.Lock()
	if len(w.panics) > 0 {
		died = "the worker logged a panic: " + strings.Join(w.panics, "; ")
	}
	w.mu.Unlock()
	w.kill()
	return died
}

// cutNet is a worker's network: an http.Transport whose connections the
// test can reset all at once, after which it dials nothing.
type cutNet struct {
	tr    *http.Transport
	mu    sync.Mutex
	dead  bool
	conns map[net.Conn]struct{}
}

func newCutNet() *cutNet {
	c := &cutNet{conns: map[net.Conn]struct{}{}}
	c.tr = daytona.NewTransport()
	c.tr.DialContext = c.dial
	return c
}

var errCut = errors.New("chaos: the worker's process is gone")

func (c *cutNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	dead := c.dead
	c.mu.Unlock()
	if dead {
		return nil, errCut
	}
	conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		_ = conn.Close()
		return nil, errCut
	}
	c.conns[conn] = struct{}{}
	return conn, nil
}

func (c *cutNet) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	dead := c.dead
	c.mu.Unlock()
	if dead {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, errCut
	}
	return c.tr.RoundTrip(r)
}

func (c *cutNet) cut() {
	c.mu.Lock()
	c.dead = true
	conns := c.conns
	c.conns = nil
	c.mu.Unlock()
	for conn := range conns {
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
	}
	c.tr.CloseIdleConnections()
}
