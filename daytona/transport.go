package daytona

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"time"
)

// Connection pool of the tuned transport. Against the real API every new
// connection costs a TCP and a TLS handshake (one to two extra round trips
// across the internet), so the pool is sized for a worker's concurrency
// rather than Go's default of 2 idle connections per host, which closes
// all but two connections after every burst of parallel calls.
const (
	// maxIdleConnsPerHost keeps a connection for every call a busy worker
	// has in flight to one host: a few leases at once, each with a one-shot
	// or session execute (dispatch, status and snapshot calls), a file
	// sync's transfers and the control plane's polls.
	maxIdleConnsPerHost = 64
	// maxIdleConns covers the API host plus the toolbox proxy of every
	// region a worker talks to.
	maxIdleConns = 256
	// idleConnTimeout retires an idle connection before the 60 s idle
	// timeout common load balancers apply: a connection the client drops
	// first is never one the server is closing while a (non-retryable)
	// POST is written on it.
	idleConnTimeout = 50 * time.Second
	// h2PingAfter: an HTTP/2 connection carries every call to a host, so
	// one that silently died must be noticed (by a ping) rather than wait
	// for TCP to give up, which would stall every call multiplexed on it.
	h2PingAfter = 30 * time.Second
	// socketBuffer: transfers move in 64 KiB pieces; Go's default 4 KiB
	// buffers cost a syscall per 4 KiB.
	socketBuffer = 64 << 10
	// tlsSessions bounds the TLS session cache: a connection that is new
	// anyway (every WebSocket takes its own) resumes a session instead of
	// receiving and verifying the certificate chain again.
	tlsSessions = 64
	// dialTimeout and tlsHandshakeTimeout bound connection set-up (the
	// values of Go's default transport); an answer itself has no timeout,
	// as a synchronous execute answers only when its command ends.
	dialTimeout         = 30 * time.Second
	tcpKeepAlive        = 30 * time.Second
	tlsHandshakeTimeout = 10 * time.Second
)

// NewTransport returns the transport a [Client] uses when it is given no
// HTTP client: proxy settings from the environment, HTTP/2 when a TLS
// server offers it (also after the caller changes TLSClientConfig or
// DialContext, which would otherwise turn HTTP/2 off), TLS session
// resumption, a connection pool sized for many calls in flight, and no
// response timeout. WebSocket dials
// (log follow, PTY) go through the same transport, so they share its TLS
// settings, proxy and dialer; the transport sends them over HTTP/1.1.
// Share one transport between clients so they share its connections.
func NewTransport() *http.Transport {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: tcpKeepAlive}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		TLSClientConfig:       &tls.Config{ClientSessionCache: tls.NewLRUClientSessionCache(tlsSessions)},
		ForceAttemptHTTP2:     true,
		HTTP2:                 &http.HTTP2Config{SendPingTimeout: h2PingAfter},
		MaxIdleConns:          maxIdleConns,
		MaxIdleConnsPerHost:   maxIdleConnsPerHost,
		IdleConnTimeout:       idleConnTimeout,
		TLSHandshakeTimeout:   tlsHandshakeTimeout,
		ExpectContinueTimeout: time.Second,
		WriteBufferSize:       socketBuffer,
		ReadBufferSize:        socketBuffer,
	}
}

// maxDrain bounds what is read after a decoded answer: its trailing
// newline and the chunked encoding's terminator.
const maxDrain = 4 << 10

// drain reads the rest of a decoded answer (at most maxDrain bytes) before
// its body is closed. A body closed before its end cannot go back to the
// pool: the transport drops its connection and the next call pays for a
// new one (two extra round trips over TLS). Called only after a successful
// decode, so a broken answer is never waited for.
func drain(body io.Reader) { _, _ = io.CopyN(io.Discard, body, maxDrain) }
