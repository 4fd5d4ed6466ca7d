package provider

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/daytonaworker/daytona-worker/channel"
	"github.com/daytonaworker/daytona-worker/exec/exectest"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/stretchr/testify/require"
)

// chanHost is the host's end of the worker protocol for channel tests:
// the driver's registry served by rpc.Serve over pipes, so notifications,
// AfterReply and ordered writes run as in the worker.
type chanHost struct {
	t     *testing.T
	e     *testEnv
	w     *io.PipeWriter
	mu    sync.Mutex
	next  int
	calls map[string]chan frame
	log   []frame // every frame the worker sent, in order
	cond  chan struct{}
	out   *holdWriter
}

// holdWriter is the worker's output: a held frame stays in the worker's
// write (the stream's write lock taken, the write not returned) until the
// test lets it through.
type holdWriter struct {
	w    io.Writer
	mu   sync.Mutex
	next *heldFrame
}

// heldFrame is one frame the worker is writing: frame receives its bytes
// once the write began; closing release completes the write.
type heldFrame struct {
	frame   chan []byte
	release chan struct{}
}

func (hw *holdWriter) Write(p []byte) (int, error) {
	hw.mu.Lock()
	held := hw.next
	hw.next = nil
	hw.mu.Unlock()
	if held != nil {
		held.frame <- append([]byte(nil), p...)
		<-held.release
	}
	return hw.w.Write(p)
}

// holdNextFrame holds the next frame the worker writes.
func (h *chanHost) holdNextFrame() *heldFrame {
	held := &heldFrame{frame: make(chan []byte, 1), release: make(chan struct{})}
	h.out.mu.Lock()
	h.out.next = held
	h.out.mu.Unlock()
	h.t.Cleanup(func() {
		select {
		case <-held.release:
		default:
			close(held.release)
		}
	})
	return held
}

type frame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func newChanHost(t *testing.T, e *testEnv, opts ...rpc.Options) *chanHost {
	var o rpc.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	o.Registry = e.reg
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &chanHost{t: t, e: e, w: inW, calls: map[string]chan frame{}, cond: make(chan struct{}), out: &holdWriter{w: outW}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rpc.Serve(context.Background(), inR, h.out, o)
		outW.Close()
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var f frame
			if json.Unmarshal(sc.Bytes(), &f) != nil {
				continue
			}
			h.mu.Lock()
			h.log = append(h.log, f)
			if f.Method == "" {
				if ch := h.calls[string(f.ID)]; ch != nil {
					ch <- f
				}
			}
			close(h.cond)
			h.cond = make(chan struct{})
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		<-done
	})
	return h
}

// send writes a request and returns the channel its response arrives on.
func (h *chanHost) send(method string, params any) <-chan frame {
	h.mu.Lock()
	h.next++
	id := fmt.Sprint(h.next)
	ch := make(chan frame, 1)
	h.calls[id] = ch
	h.mu.Unlock()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": h.next, "method": method, "params": params})
	require.NoError(h.t, err)
	_, err = h.w.Write(append(b, '\n'))
	require.NoError(h.t, err)
	return ch
}

func (h *chanHost) await(ch <-chan frame) frame {
	h.t.Helper()
	var f frame
	h.progress("a response", func() bool {
		select {
		case f = <-ch:
			return true
		default:
			return false
		}
	})
	return f
}

// call sends a request and waits for its response.
func (h *chanHost) call(method string, params any) frame {
	h.t.Helper()
	return h.await(h.send(method, params))
}

// until waits until cond holds over the frames received so far.
func (h *chanHost) until(what string, cond func(log []frame) bool) []frame {
	h.t.Helper()
	var log []frame
	h.progress(what, func() bool {
		h.mu.Lock()
		log = h.log
		h.mu.Unlock()
		return cond(log)
	})
	return log
}

// stallLimit is how long the worker may send nothing at all while a test
// waits for it. A deadline on the whole wait would measure the machine (a
// megabyte echoed through a terminal under the race detector takes 25 s
// on a busy 2-core machine); a stall measures the code: a worker that
// stopped sending.
const stallLimit = 30 * time.Second

// progress waits until done holds, re-checking after every frame the
// worker sends; it fails the test when no frame came for stallLimit.
func (h *chanHost) progress(what string, done func() bool) {
	h.t.Helper()
	stall := time.NewTimer(stallLimit)
	defer stall.Stop()
	for {
		h.mu.Lock()
		ch := h.cond
		h.mu.Unlock()
		if done() {
			return
		}
		select {
		case <-ch:
			stall.Reset(stallLimit)
		case <-stall.C:
			h.mu.Lock()
			log := h.log
			h.mu.Unlock()
			h.t.Fatalf("waiting for %s: the worker sent nothing for %s; frames received: %s", what, stallLimit, summary(log))
		}
	}
}

// summary lists frames by method (notifications) or id (responses), for a
// failure message.
func summary(log []frame) string {
	var b strings.Builder
	for i, f := range log {
		if i > 0 {
			b.WriteString(" ")
		}
		if f.Method != "" {
			b.WriteString(f.Method)
		} else {
			fmt.Fprintf(&b, "reply#%s", f.ID)
		}
	}
	return "[" + b.String() + "]"
}

// notes returns the params of the notifications of one method.
func notes(log []frame, method string) []json.RawMessage {
	var out []json.RawMessage
	for _, f := range log {
		if f.Method == method {
			out = append(out, f.Params)
		}
	}
	return out
}

// duplexBytes is the data a route received, decoded.
func duplexBytes(t *testing.T, log []frame, sid string) []byte {
	var out []byte
	for _, p := range notes(log, rpc.DuplexDataMethod) {
		var d rpc.DuplexData
		require.NoError(t, json.Unmarshal(p, &d))
		if d.WorkerSessionID != sid {
			continue
		}
		b, err := base64.StdEncoding.Strict().DecodeString(d.Chunk)
		require.NoError(t, err)
		require.Equal(t, d.Chunk, base64.StdEncoding.EncodeToString(b), "a data chunk is canonical base64")
		out = append(out, b...)
	}
	return out
}

// routeNotes decodes the notifications of one method for one worker
// session.
func routeNotes[T any](t *testing.T, log []frame, method, sid string, session func(T) string) []T {
	var out []T
	for _, p := range notes(log, method) {
		var x T
		require.NoError(t, json.Unmarshal(p, &x))
		if session(x) == sid {
			out = append(out, x)
		}
	}
	return out
}

// exits returns the duplex exit notifications of a route.
func exits(t *testing.T, log []frame, sid string) []rpc.DuplexExit {
	return routeNotes(t, log, rpc.DuplexExitMethod, sid, func(x rpc.DuplexExit) string { return x.WorkerSessionID })
}

func leaseBase(l lease) map[string]any {
	return map[string]any{"driverKey": "daytona", "companyId": "company-1", "environmentId": "env-1", "providerLeaseId": *l.ProviderLeaseID}
}

// openDuplex opens a duplex channel on the lease and returns its route.
func (h *chanHost) openDuplex(l lease, route string, argv ...string) rpc.DuplexRoute {
	h.t.Helper()
	f := h.call("duplexChannelOpen", with(leaseBase(l), "hostRouteId", route, "command", argv))
	require.Nil(h.t, f.Error, "open failed: %+v", f.Error)
	var r rpc.DuplexRoute
	require.NoError(h.t, json.Unmarshal(f.Result, &r))
	require.Equal(h.t, route, r.HostRouteID)
	require.True(h.t, strings.HasPrefix(r.WorkerSessionID, "duplex-"), r.WorkerSessionID)
	return r
}

func writeParams(r rpc.DuplexRoute, b []byte) map[string]any {
	return map[string]any{"hostRouteId": r.HostRouteID, "workerSessionId": r.WorkerSessionID, "data": base64.StdEncoding.EncodeToString(b)}
}

// A duplex channel to cat carries 1 MiB of random bytes, written in
// several writes, back exactly and in order: no launch-line echo, no
// prompt, no translation. No frame precedes the open's reply; the close
// echoes both ids and the worker keeps serving.
func TestDuplexChannelCatRoundTrip(t *testing.T) {
	e, l, _ := leased(t, nil)
	h := newChanHost(t, e)
	r := h.openDuplex(l, "duplex-route-1", "cat")
	payload := make([]byte, 1<<20)
	_, _ = rand.Read(payload)
	var pending []<-chan frame
	for off := 0; off < len(payload); off += 200_000 {
		pending = append(pending, h.send("duplexChannelWrite", writeParams(r, payload[off:min(off+200_000, len(payload))])))
	}
	for _, p := range pending {
		f := h.await(p)
		require.Nil(t, f.Error)
		require.JSONEq(t, "null", string(f.Result))
	}
	log := h.until("1 MiB echoed", func(log []frame) bool { return len(duplexBytes(t, log, r.WorkerSessionID)) >= len(payload) })
	got := duplexBytes(t, log, r.WorkerSessionID)
	require.Equal(t, len(payload), len(got))
	require.True(t, bytes.Equal(payload, got), "the bytes come back exactly, in order")
	for i, f := range log {
		if f.Method == rpc.DuplexDataMethod {
			require.Less(t, 0, i, "the open's reply precedes every data frame")
			require.Equal(t, json.RawMessage(`1`), log[0].ID)
			break
		}
	}
	f := h.call("duplexChannelClose", map[string]any{"hostRouteId": r.HostRouteID})
	require.JSONEq(t, fmt.Sprintf(`{"hostRouteId":%q,"workerSessionId":%q}`, r.HostRouteID, r.WorkerSessionID), string(f.Result))
	f = h.call("duplexChannelClose", map[string]any{"hostRouteId": r.HostRouteID})
	require.JSONEq(t, fmt.Sprintf(`{"hostRouteId":%q,"workerSessionId":%q}`, r.HostRouteID, r.WorkerSessionID), string(f.Result), "close is idempotent")
	require.Empty(t, e.srv.PTYs(*l.ProviderLeaseID), "the close killed the process")
	require.Equal(t, "ok", decode[rpc.HealthResult](t, h.call("health", nil).Result).Status)
}

// Program output arrives byte for byte (newlines stay newlines, binary
// stays binary) and a process exit is reported once with its code.
func TestDuplexChannelIsBinaryExactAndReportsExit(t *testing.T) {
	e, l, _ := leased(t, nil)
	h := newChanHost(t, e)
	r := h.openDuplex(l, "duplex-route-2", "sh", "-c", `printf 'a\nb\r\n\000\377é'; exit 3`)
	log := h.until("exit", func(log []frame) bool { return len(exits(t, log, r.WorkerSessionID)) > 0 })
	require.Equal(t, []byte("a\nb\r\n\x00\xffé"), duplexBytes(t, log, r.WorkerSessionID))
	x := exits(t, log, r.WorkerSessionID)
	require.Len(t, x, 1)
	require.NotNil(t, x[0].ExitCode)
	require.Equal(t, 3, *x[0].ExitCode)
	require.False(t, x[0].TransportClosed)
	// Writes after the exit are no-ops.
	require.JSONEq(t, "null", string(h.call("duplexChannelWrite", writeParams(r, []byte("late"))).Result))
}

// Hostile writes: malformed base64 is a clear error that carries no
// bytes, a foreign pair is a no-op, an oversized write ends the channel;
// the worker keeps serving throughout.
func TestDuplexChannelHostileWrites(t *testing.T) {
	e, l, _ := leased(t, nil)
	h := newChanHost(t, e)
	r := h.openDuplex(l, "duplex-route-3", "cat")
	for _, data := range []string{"", "YQ", "YQ==\n", "-_-_", "YR==", " YQ==", "%%%%"} {
		f := h.call("duplexChannelWrite", map[string]any{"hostRouteId": r.HostRouteID, "workerSessionId": r.WorkerSessionID, "data": data})
		require.NotNil(t, f.Error, "data %q", data)
		require.Equal(t, rpc.CodeInvalidParams, int64(f.Error.Code))
	}
	foreign := []map[string]any{
		{"hostRouteId": r.HostRouteID, "workerSessionId": "duplex-other", "data": "YQ=="},
		{"hostRouteId": "duplex-route-99", "workerSessionId": r.WorkerSessionID, "data": "YQ=="},
		{"hostRouteId": r.HostRouteID, "data": "YQ=="},
	}
	for _, p := range foreign {
		f := h.call("duplexChannelWrite", p)
		require.Nil(t, f.Error)
		require.JSONEq(t, "null", string(f.Result))
		require.Nil(t, h.call("duplexChannelStop", p).Error, "a foreign stop is a no-op")
	}
	require.Nil(t, h.call("duplexChannelWrite", writeParams(r, []byte("ok\n"))).Error)
	h.until("echo", func(log []frame) bool { return string(duplexBytes(t, log, r.WorkerSessionID)) == "ok\n" })
	f := h.call("duplexChannelWrite", writeParams(r, make([]byte, channel.MaxDuplexChunk+1)))
	require.NotNil(t, f.Error)
	require.Contains(t, f.Error.Message, "at most 262144 bytes")
	log := h.until("exit", func(log []frame) bool { return len(exits(t, log, r.WorkerSessionID)) > 0 })
	require.Len(t, exits(t, log, r.WorkerSessionID), 1)
	require.Equal(t, "ok", decode[rpc.HealthResult](t, h.call("health", nil).Result).Status)
}

// More than 100 malformed writes end the channel.
func TestDuplexChannelEndsAfterMalformedBudget(t *testing.T) {
	e, l, _ := leased(t, nil)
	h := newChanHost(t, e)
	r := h.openDuplex(l, "duplex-route-4", "cat")
	for range channel.MaxMalformedWrites + 1 {
		h.call("duplexChannelWrite", map[string]any{"hostRouteId": r.HostRouteID, "workerSessionId": r.WorkerSessionID, "data": "YQ"})
	}
	log := h.until("exit", func(log []frame) bool { return len(exits(t, log, r.WorkerSessionID)) > 0 })
	require.Len(t, exits(t, log, r.WorkerSessionID), 1)
}

// A dropped provider transport is an exit with transportClosed and no
// code; the worker keeps serving.
func TestDuplexChannelTransportDropped(t *testing.T) {
	e, l, id := leased(t, nil)
	h := newChanHost(t, e)
	r := h.openDuplex(l, "duplex-route-5", "cat")
	require.Equal(t, 1, e.srv.DropPTYConnections(id))
	log := h.until("exit", func(log []frame) bool { return len(exits(t, log, r.WorkerSessionID)) > 0 })
	x := exits(t, log, r.WorkerSessionID)
	require.Equal(t, []rpc.DuplexExit{{HostRouteID: r.HostRouteID, WorkerSessionID: r.WorkerSessionID, TransportClosed: true}}, x)
	require.JSONEq(t, "null", string(h.call("duplexChannelWrite", writeParams(r, []byte("x"))).Result), "a write after the end is a no-op")
	require.Equal(t, "ok", decode[rpc.HealthResult](t, h.call("health", nil).Result).Status)
}

// A route lives at most an hour (on the driver's clock).
func TestDuplexChannelLifetime(t *testing.T) {
	e := newTestEnv(t, nil)
	clk := exectest.NewFakeClock()
	e.use(e.driverWith(func(o *Options) { o.channelClock = clk }))
	l := e.acquire(nil)
	h := newChanHost(t, e)
	r := h.openDuplex(l, "duplex-route-6", "cat")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, clk.AwaitTimer(ctx, channel.DuplexLifetime))
	clk.Advance(channel.DuplexLifetime - time.Second)
	require.Nil(t, h.call("duplexChannelWrite", writeParams(r, []byte("alive\n"))).Error)
	h.until("echo", func(log []frame) bool { return string(duplexBytes(t, log, r.WorkerSessionID)) == "alive\n" })
	clk.Advance(time.Second)
	log := h.until("exit", func(log []frame) bool { return len(exits(t, log, r.WorkerSessionID)) > 0 })
	x := exits(t, log, r.WorkerSessionID)
	require.Len(t, x, 1)
	require.NotNil(t, x[0].ExitCode, "killed: a process exit")
	require.Equal(t, 137, *x[0].ExitCode)
}

// Releasing (and likewise destroying or stopping) a lease ends its
// channels before the provider call, reports their exit, and fails later
// opens closed.
func TestDuplexChannelsCloseOnRelease(t *testing.T) {
	e, l, id := leased(t, nil)
	h := newChanHost(t, e)
	r := h.openDuplex(l, "duplex-route-7", "cat")
	f := h.call("environmentReleaseLease", with(e.base(nil), "providerLeaseId", id, "leaseMetadata", l.Metadata))
	require.Nil(t, f.Error)
	log := h.until("exit", func(log []frame) bool { return len(exits(t, log, r.WorkerSessionID)) > 0 })
	exitAt, replyAt := -1, -1
	for i, fr := range log {
		if fr.Method == rpc.DuplexExitMethod && exitAt < 0 {
			exitAt = i
		}
		if string(fr.ID) == fmt.Sprint(h.next) {
			replyAt = i
		}
	}
	require.Less(t, exitAt, replyAt, "the channel ended before the release answered")
	f = h.call("duplexChannelOpen", with(leaseBase(l), "hostRouteId", "duplex-route-8", "command", []string{"cat"}))
	require.NotNil(t, f.Error)
	require.Equal(t, "Daytona duplex channel: no cached sandbox resolves the provider lease.", f.Error.Message)
}

// A release that ends a channel after the open's reply was written but
// before the worker started the channel's reader (the reply's write held
// until the release's kill reached Daytona) still reports the exit, before
// the release answers: a kill's 137, or no code when the socket closed
// first.
func TestChannelReleasedBeforeBind(t *testing.T) {
	for _, c := range []struct {
		name, method string
		params       func(t *testing.T, l lease) map[string]any
		exitMethod   string
		exits        func(t *testing.T, log []frame, sid string) []*int
	}{
		{"duplex", "duplexChannelOpen",
			func(_ *testing.T, l lease) map[string]any {
				return with(leaseBase(l), "hostRouteId", "duplex-route-11", "command", []string{"cat"})
			},
			rpc.DuplexExitMethod,
			func(t *testing.T, log []frame, sid string) []*int {
				var out []*int
				for _, x := range exits(t, log, sid) {
					require.Equal(t, x.ExitCode == nil, x.TransportClosed, "%+v", x)
					out = append(out, x.ExitCode)
				}
				return out
			}},
		{"login", "loginPtyOpen",
			func(t *testing.T, l lease) map[string]any {
				return with(leaseBase(l), "hostRouteId", uuid.NewString(), "loginCommandKey", "claude", "sessionHome", sessionHome(t))
			},
			rpc.LoginPtyExitMethod,
			func(t *testing.T, log []frame, sid string) []*int {
				var out []*int
				for _, x := range loginExits(t, log, sid) {
					out = append(out, x.ExitCode)
				}
				return out
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, l, id := leased(t, nil)
			h := newChanHost(t, e)
			held := h.holdNextFrame()
			open := h.send(c.method, c.params(t, l))
			var reply frame
			select {
			case b := <-held.frame:
				require.NoError(t, json.Unmarshal(b, &reply))
			case <-time.After(30 * time.Second):
				t.Fatal("the open was not answered within 30 s")
			}
			require.Equal(t, json.RawMessage(`1`), reply.ID, "the held frame is the open's reply")
			require.Nil(t, reply.Error, "open failed: %+v", reply.Error)
			var r struct {
				WorkerSessionID string `json:"workerSessionId"`
			}
			require.NoError(t, json.Unmarshal(reply.Result, &r))
			require.NotEmpty(t, r.WorkerSessionID)
			release := h.send("environmentReleaseLease", with(e.base(nil), "providerLeaseId", id, "leaseMetadata", l.Metadata))
			e.awaitRequests("DELETE", "/process/pty/{sessionId}", 1)
			close(held.release)
			require.Nil(t, h.await(open).Error)
			require.Nil(t, h.await(release).Error)
			log := h.until("exit", func(log []frame) bool { return len(c.exits(t, log, r.WorkerSessionID)) > 0 })
			codes := c.exits(t, log, r.WorkerSessionID)
			require.Len(t, codes, 1)
			require.True(t, codes[0] == nil || *codes[0] == 137, "killed: %v", codes[0])
			exitAt, replyAt := -1, -1
			for i, fr := range log {
				if fr.Method == c.exitMethod && exitAt < 0 {
					exitAt = i
				}
				if string(fr.ID) == "2" {
					replyAt = i
				}
			}
			require.Less(t, exitAt, replyAt, "the channel ended before the release answered")
		})
	}
}

// Opens fail closed: a lease this worker never served, an empty command.
func TestDuplexOpenRefusals(t *testing.T) {
	e, l, _ := leased(t, nil)
	e.d = e.newDriver() // a restarted worker: no cached sandbox
	e.reg = rpc.NewRegistry()
	e.d.Register(e.reg)
	h := newChanHost(t, e)
	f := h.call("duplexChannelOpen", with(leaseBase(l), "hostRouteId", "duplex-route-9", "command", []string{"cat"}))
	require.NotNil(t, f.Error)
	require.Equal(t, "Daytona duplex channel: no cached sandbox resolves the provider lease.", f.Error.Message)
	f = h.call("duplexChannelOpen", with(leaseBase(l), "hostRouteId", "duplex-route-9", "command", []string{}))
	require.Equal(t, "The duplex channel launch command needs at least one argument.", f.Error.Message)
	f = h.call("duplexChannelClose", map[string]any{"hostRouteId": "duplex-route-unknown"})
	require.JSONEq(t, `{"hostRouteId":"duplex-route-unknown"}`, string(f.Result), "an unknown route's close is acknowledged")
}

// More writes in flight than the host allows on a route end the channel:
// here the program never reads, so the writes pile up.
func TestDuplexChannelEndsPastPendingWrites(t *testing.T) {
	e, l, _ := leased(t, nil)
	h := newChanHost(t, e)
	r := h.openDuplex(l, "duplex-route-10", "sleep", "600")
	block := make([]byte, 64<<10)
	var pending []<-chan frame
	for range channel.MaxPendingWrites + 200 { // some are taken before the socket fills
		pending = append(pending, h.send("duplexChannelWrite", writeParams(r, block)))
	}
	refused := 0
	for _, p := range pending {
		if f := h.await(p); f.Error != nil {
			require.Contains(t, f.Error.Message, "more than 256 writes in flight")
			refused++
		}
	}
	require.Positive(t, refused)
	log := h.until("exit", func(log []frame) bool { return len(exits(t, log, r.WorkerSessionID)) > 0 })
	require.Len(t, exits(t, log, r.WorkerSessionID), 1)
}
