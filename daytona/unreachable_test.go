package daytona

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A call that never reached the server is ErrUnreachable, with a short
// reason and the API URL; a call that reached it is never.

func unreachableClient(t *testing.T, apiURL string, hc *http.Client) *Client {
	t.Helper()
	if hc == nil {
		hc = &http.Client{}
	}
	c, err := NewClient(WithAPIKey("test-api-key"), WithAPIURL(apiURL), WithHTTPClient(hc), WithRetryPolicy(RetryPolicy{MaxRetries: 0}))
	require.NoError(t, err)
	return c
}

func createErr(t *testing.T, c *Client) (*TransportError, error) {
	t.Helper()
	_, _, err := c.Sandboxes.Create(t.Context(), &CreateSandboxRequest{Name: "x"})
	require.Error(t, err)
	var te *TransportError
	errors.As(err, &te)
	return te, err
}

func closedLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestUnreachableConnectionRefused(t *testing.T) {
	addr := closedLoopbackAddr(t)
	te, err := createErr(t, unreachableClient(t, "http://"+addr+"/api", nil))
	require.ErrorIs(t, err, ErrUnreachable)
	require.NotNil(t, te)
	require.Equal(t, "connection refused", te.Reason())
	require.Equal(t, "http://"+addr+"/api", te.BaseURL)
	require.NotContains(t, err.Error(), "test-api-key")
}

// offlineDNS is a resolver that never leaves this process: every query is
// answered NXDOMAIN over an in-memory pipe.
func offlineDNS() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			for {
				var n [2]byte // DNS over a stream: a 2-byte length, then the message
				if _, err := io.ReadFull(server, n[:]); err != nil {
					return
				}
				q := make([]byte, binary.BigEndian.Uint16(n[:]))
				if _, err := io.ReadFull(server, q); err != nil || len(q) < 12 {
					return
				}
				q[2] |= 0x80    // QR: this is the response
				q[3] = 0x80 | 3 // RA; RCODE 3: no such name
				if _, err := server.Write(append(n[:], q...)); err != nil {
					return
				}
			}
		}()
		return client, nil
	}}
}

func TestUnreachableUnresolvableHost(t *testing.T) {
	d := &net.Dialer{Resolver: offlineDNS()}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	te, err := createErr(t, unreachableClient(t, "http://daytona.invalid/api", hc))
	require.ErrorIs(t, err, ErrUnreachable)
	require.NotNil(t, te)
	require.Equal(t, "no such host", te.Reason())
	require.Equal(t, "http://daytona.invalid/api", te.BaseURL)
}

func TestUnreachableTLSHandshake(t *testing.T) {
	t.Run("https client, plain server", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("request reached the server") }))
		defer srv.Close()
		te, err := createErr(t, unreachableClient(t, strings.Replace(srv.URL, "http:", "https:", 1)+"/api", nil))
		require.ErrorIs(t, err, ErrUnreachable)
		require.NotEmpty(t, te.Reason())
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("request reached the server") }))
		defer srv.Close()
		te, err := createErr(t, unreachableClient(t, srv.URL+"/api", nil))
		require.ErrorIs(t, err, ErrUnreachable)
		require.Contains(t, te.Reason(), "certificate")
	})
	t.Run("plain client, TLS server", func(t *testing.T) {
		// The TLS server answers a plain request with 400: an answer, so
		// Daytona's refusal is definitive as it is, not "unreachable".
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		defer srv.Close()
		_, err := createErr(t, unreachableClient(t, strings.Replace(srv.URL, "https:", "http:", 1)+"/api", nil))
		require.ErrorIs(t, err, ErrBadRequest)
		require.NotErrorIs(t, err, ErrUnreachable)
	})
}

func TestAResetAfterTheRequestWasWrittenIsNotUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := l.Accept()
		if err != nil {
			return
		}
		// Read the whole request head, then drop the connection unanswered.
		_, _ = http.ReadRequest(bufio.NewReader(conn))
		_ = conn.Close()
	}()
	te, err := createErr(t, unreachableClient(t, "http://"+l.Addr().String()+"/api", nil))
	<-done
	require.NotErrorIs(t, err, ErrUnreachable, "the server read the request: the create is uncertain")
	require.NotNil(t, te)
	require.False(t, te.NotSent)
}

func TestSafeURLDropsCredentialsAndQuery(t *testing.T) {
	u, err := url.Parse("https://user:secret@daytona.example/api?token=secret#frag")
	require.NoError(t, err)
	require.Equal(t, "https://daytona.example/api", safeURL(u))
}
