package daytona_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// connCounter counts the connections a server accepted, and those of them
// that became WebSockets (hijacked), through its ConnState hook.
type connCounter struct{ opened, hijacked atomic.Int64 }

func (c *connCounter) hook(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		c.opened.Add(1)
	case http.StateHijacked:
		c.hijacked.Add(1)
	}
}

// plain is the number of accepted connections that carried HTTP calls (a
// WebSocket takes a connection of its own for its life).
func (c *connCounter) plain() int64 { return c.opened.Load() - c.hijacked.Load() }

// tlsEmulator serves the emulator on a loopback TLS httptest server that
// offers HTTP/2 and counts its connections; gate sees every request first.
func tlsEmulator(t *testing.T, gate func(*http.Request)) (*daytonatest.Server, *httptest.Server, *connCounter) {
	t.Helper()
	emu := daytonatest.New(daytonatest.WithDir(t.TempDir()))
	var conns connCounter
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gate(r)
		emu.ServeHTTP(w, r)
	}))
	hs.Config.ConnState = conns.hook
	hs.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted dial's handshake failures
	hs.EnableHTTP2 = true
	hs.StartTLS()
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close(); emu.Close() })
	return emu, hs, &conns
}

// A second wave of as many calls in flight as the first opens no
// connection (the emulator's request log marks each connection's first
// request): the client's default pool keeps every connection the first
// wave opened, where Go's default keeps 2 per host and closes the rest.
func TestConcurrentCallsReuseEveryConnection(t *testing.T) {
	const inFlight = 16
	env := testenv.New(t)
	sb := env.StartSandbox(t, nil)
	const route = "/sandbox/{sandboxIdOrName}"
	wave := func() int {
		env.Server.ResetRequests()
		// Every call of the wave is held until all of them are in flight,
		// so the wave needs inFlight connections at once.
		gate := make(chan struct{})
		env.Server.Inject(daytonatest.Fault{Method: http.MethodGet, Route: route, Gate: gate, Times: inFlight})
		var wg sync.WaitGroup
		for range inFlight {
			wg.Go(func() {
				_, _, err := env.Client.Sandboxes.Get(t.Context(), sb.ID)
				assert.NoError(t, err)
			})
		}
		require.NoError(t, env.Server.AwaitRequests(t.Context(), http.MethodGet, route, inFlight))
		close(gate)
		wg.Wait()
		return env.Server.NewConnections()
	}
	require.GreaterOrEqual(t, wave(), inFlight-1, "the first wave needs a connection per call")
	assert.Zero(t, wave(), "new connections in the second wave")
}

// trustOnly makes tr trust the test server's certificate and nothing else
// (not the system roots), keeping the rest of its TLS config.
func trustOnly(tr *http.Transport, hs *httptest.Server) {
	pool := x509.NewCertPool()
	pool.AddCert(hs.Certificate())
	tr.TLSClientConfig.RootCAs = pool
}

// Over TLS, with the server's certificate trusted only through the
// transport's own TLS config: calls use HTTP/2 when the server offers it,
// one connection carries them all, and the WebSocket dials (log follow,
// PTY) succeed with the same settings, over HTTP/1.1, resuming the TLS
// session instead of a full handshake.
func TestTunedTransportOverTLS(t *testing.T) {
	var protos sync.Map // proto -> true
	var upgrades, resumed atomic.Int64
	emu, hs, conns := tlsEmulator(t, func(r *http.Request) {
		protos.Store(r.Proto, true)
		if r.Header.Get("Upgrade") != "" {
			upgrades.Add(1)
			if r.TLS.DidResume {
				resumed.Add(1)
			}
		}
	})
	tr := daytona.NewTransport()
	trustOnly(tr, hs)
	c := testenv.Client(t, hs.URL+daytonatest.APIPrefix, emu.APIKey(), daytona.WithHTTPClient(&http.Client{Transport: tr}))
	ctx, ref := t.Context(), testenv.StartSandbox(t, c, nil).Ref()
	_, h2 := protos.Load("HTTP/2.0")
	require.True(t, h2, "the calls used HTTP/2")
	assert.EqualValues(t, 1, conns.plain(), "one HTTP/2 connection carries every call")

	_, err := c.Toolbox.CreateSession(ctx, ref, "s")
	require.NoError(t, err)
	ex, _, err := c.Toolbox.ExecuteSessionCommand(ctx, ref, "s", &daytona.SessionExecuteRequest{Command: "echo followed", RunAsync: true})
	require.NoError(t, err)
	var out bytes.Buffer
	err = c.Toolbox.FollowSessionCommandLogs(ctx, ref, "s", ex.CmdID, nil, func(ch daytona.LogChunk) error { out.Write(ch.Data); return nil })
	require.NoError(t, err, "the follow socket's TLS dial trusts what the transport trusts")
	assert.Equal(t, "followed\n", out.String())

	id, _, err := c.PTY.Create(ctx, ref, &daytona.PTYCreateRequest{ID: "term", LazyStart: true})
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	p, err := c.PTY.Connect(cctx, ref, id)
	require.NoError(t, err, "the PTY socket's TLS dial trusts what the transport trusts")
	_, err = p.Write([]byte("exit 3\r"))
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, p)
	require.NoError(t, err)
	ex2, ok := p.Exit()
	require.True(t, ok)
	assert.Equal(t, 3, ex2.Code)
	require.NoError(t, p.Close())
	_, h1 := protos.Load("HTTP/1.1")
	assert.True(t, h1, "the WebSocket upgrades went over HTTP/1.1")
	assert.EqualValues(t, 2, conns.hijacked.Load(), "two WebSockets")
	assert.EqualValues(t, 2, upgrades.Load())
	assert.EqualValues(t, 2, resumed.Load(), "the WebSockets' handshakes resumed the calls' TLS session")
	assert.EqualValues(t, 1, conns.plain(), "still one connection for the calls")

	// Without the transport's config the same server is not trusted: the
	// dial above did not succeed by some other route.
	plain := testenv.Client(t, hs.URL+daytonatest.APIPrefix, emu.APIKey())
	_, _, err = plain.Sandboxes.Get(ctx, ref.ID)
	require.ErrorIs(t, err, daytona.ErrUnreachable)
}

// valueSeen tells the server (through seen) that the client has read an
// answer's JSON value, its line.
type valueSeen struct {
	http.RoundTripper
	seen chan struct{}
}

func (v valueSeen) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := v.RoundTripper.RoundTrip(r)
	if err == nil {
		resp.Body = &seenBody{ReadCloser: resp.Body, seen: v.seen}
	}
	return resp, err
}

type seenBody struct {
	io.ReadCloser
	seen chan struct{}
	once sync.Once
}

func (b *seenBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if bytes.IndexByte(p[:n], '\n') >= 0 {
		b.once.Do(func() { b.seen <- struct{}{} })
	}
	return n, err
}

// An answer whose end (the chunked terminator) comes after its JSON value
// is read to that end before it is closed, so its connection serves the
// next call; closed early, the connection would be dropped.
func TestADecodedAnswerIsReadToItsEnd(t *testing.T) {
	seen := make(chan struct{}, 1)
	var conns connCounter
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/process/execute") {
			_, _ = io.WriteString(w, `{"exitCode":0,"result":"done"}`+"\n")
		} else {
			_, _ = io.WriteString(w, `{"id":"sb-1","state":"started"}`+"\n")
		}
		w.(http.Flusher).Flush() // the value goes out on its own
		select {                 // the terminator only once the client has the value
		case <-seen:
		case <-r.Context().Done():
		}
	}))
	hs.Config.ConnState = conns.hook
	hs.Start()
	t.Cleanup(hs.Close)
	hc := &http.Client{Transport: valueSeen{RoundTripper: daytona.NewTransport(), seen: seen}}
	c := testenv.Client(t, hs.URL+"/api", "key", daytona.WithHTTPClient(hc))
	ref := daytona.SandboxRef{ID: "sb-1", ToolboxProxyURL: hs.URL + "/toolbox"}
	for range 2 {
		res, _, err := c.Toolbox.Execute(t.Context(), ref, &daytona.ExecuteRequest{Command: "x"})
		require.NoError(t, err)
		require.Equal(t, "done", res.Result)
		sb, _, err := c.Sandboxes.Get(t.Context(), "sb-1")
		require.NoError(t, err)
		require.Equal(t, "sb-1", sb.ID)
	}
	assert.EqualValues(t, 1, conns.plain(), "one connection for every call")
}

// The WebSocket dial takes the transport's proxy like every call: the API
// host does not resolve, so only a dial through the proxy reaches it.
func TestWebSocketsTakeTheTransportsProxy(t *testing.T) {
	emu := daytonatest.New(daytonatest.WithDir(t.TempDir()))
	var proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Host == "daytona.invalid" { // a proxy request names its target
			proxied.Add(1)
		}
		emu.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { proxy.CloseClientConnections(); proxy.Close(); emu.Close() })
	tr := daytona.NewTransport()
	u, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	tr.Proxy = http.ProxyURL(u)
	tr.DialContext = (&net.Dialer{Resolver: testenv.OfflineResolver()}).DialContext
	c := testenv.Client(t, "http://daytona.invalid"+daytonatest.APIPrefix, emu.APIKey(), daytona.WithHTTPClient(&http.Client{Transport: tr}))
	ctx, ref := t.Context(), testenv.StartSandbox(t, c, nil).Ref()
	_, err = c.Toolbox.CreateSession(ctx, ref, "s")
	require.NoError(t, err)
	ex, _, err := c.Toolbox.ExecuteSessionCommand(ctx, ref, "s", &daytona.SessionExecuteRequest{Command: "echo proxied", RunAsync: true})
	require.NoError(t, err)
	before := proxied.Load()
	var out bytes.Buffer
	err = c.Toolbox.FollowSessionCommandLogs(ctx, ref, "s", ex.CmdID, nil, func(ch daytona.LogChunk) error { out.Write(ch.Data); return nil })
	require.NoError(t, err)
	assert.Equal(t, "proxied\n", out.String())
	assert.Greater(t, proxied.Load(), before, "the follow's upgrade went through the proxy")
}

// The transport's timeouts: an idle connection is retired at 50 s, before
// the 60 s a load balancer commonly drops it after (a POST is never
// written on a connection the server is closing), and an HTTP/2
// connection that is silent for 30 s is pinged. (Pins defaults:
// idleConnTimeout, h2PingAfter, tlsHandshakeTimeout.)
func TestTransportRetiresIdleConnectionsBeforeALoadBalancer(t *testing.T) {
	t.Parallel()
	tr := daytona.NewTransport()
	require.Equal(t, 50*time.Second, tr.IdleConnTimeout)
	require.Equal(t, 30*time.Second, tr.HTTP2.SendPingTimeout)
	require.Equal(t, 10*time.Second, tr.TLSHandshakeTimeout)
	require.True(t, tr.ForceAttemptHTTP2)
}
