package daytona

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A cancellation that arrives while an answer's header is read is held
// back (cancelGate), but not forever: a server that sends the first bytes
// of a header and then stalls cannot keep a cancelled call waiting.
func TestCancelDuringAStalledHeaderEndsTheCall(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-"))
		_, _ = br.ReadByte() // stalls until the client closes
	}()
	c := unreachableClient(t, "http://"+l.Addr().String()+"/api", &http.Client{Transport: NewTransport()})
	c.headerGrace = time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotFirstResponseByte: cancel})
	_, _, err = c.Sandboxes.Get(ctx, "sb-1")
	require.ErrorIs(t, err, context.Canceled)
	var te *TransportError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "daytona: GET /sandbox/{sandboxIdOrName}: context canceled", err.Error())
}

// A call that fails with another call's cancellation (the transport
// closed the connection under it for that call) says so, never with the
// other call's cause, and is not retried unless its route is idempotent:
// it may have reached the server.
func TestAnotherCallsCancellationReadsAsAClosedConnection(t *testing.T) {
	var calls int
	foreign := errors.New("fast-path bound of another call")
	hc := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		calls++
		return nil, &abandonedError{cause: foreign}
	})}
	c := unreachableClient(t, "http://127.0.0.1:1/api", hc)
	_, _, err := c.Sandboxes.Create(t.Context(), &CreateSandboxRequest{Name: "x"})
	require.Error(t, err)
	require.NotErrorIs(t, err, foreign)
	require.NotContains(t, err.Error(), foreign.Error())
	require.ErrorIs(t, err, errConnAbandoned)
	require.NotErrorIs(t, err, ErrUnreachable)
	require.Equal(t, "daytona: POST /sandbox: connection closed by another request's cancellation; the request may have reached the server", err.Error())
	require.Equal(t, 1, calls, "a create is never retried")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A call whose context is cancelled before it starts sends nothing,
// although the transport no longer sees the caller's context itself and
// the gate forwards a cancellation from a goroutine of its own. With one
// processor that goroutine runs only once the call blocks, and an idle
// connection lets the call write at once: a call that relied on the
// forwarding alone would be sent.
func TestCancelledBeforeTheCallSendsNothing(t *testing.T) {
	f := newFixture(t)
	var created atomic.Int64
	f.mux.HandleFunc("POST /toolbox/sb-1/process/session", func(w http.ResponseWriter, _ *http.Request) {
		created.Add(1)
		w.WriteHeader(http.StatusCreated)
	})
	_, err := f.c.Toolbox.CreateSession(t.Context(), f.ref, "warm") // leaves an idle connection
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for range 20 {
		_, err := f.c.Toolbox.CreateSession(ctx, f.ref, "s1")
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, "daytona: POST /process/session: context canceled", err.Error())
	}
	_, err = f.c.Toolbox.CreateSession(t.Context(), f.ref, "last") // the server has read all that was sent
	require.NoError(t, err)
	require.EqualValues(t, 2, created.Load(), "only the live calls reached the server")
}
