package daytona

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http/httptrace"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
)

var (
	reBearer   = regexp.MustCompile(`(?i)(bearer\s+)[^\s"',;]+`)
	reQueryTok = regexp.MustCompile(`(?i)([?&;](?:token|access_token|daytona_sandbox_auth_key|signature|sig|x-amz-signature|x-amz-credential|x-goog-signature|key|auth)=)[^&\s"'#]+`)
	reTokenHdr = regexp.MustCompile(`(?i)(x-daytona-preview-token["']?\s*[:=]\s*["']?)[^\s"',;]+`)
)

// rememberSecret makes s redacted from every later error string.
func (c *Client) rememberSecret(s string) {
	if len(s) < 4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.secrets {
		if x == s {
			return
		}
	}
	c.secrets = append(c.secrets, s)
}

// redact removes the API key, learned tokens and token-shaped substrings.
func (c *Client) redact(s string) string {
	if s == "" {
		return s
	}
	if c.apiKey != "" {
		s = strings.ReplaceAll(s, c.apiKey, "REDACTED")
	}
	c.mu.Lock()
	for _, x := range c.secrets {
		s = strings.ReplaceAll(s, x, "REDACTED")
	}
	c.mu.Unlock()
	s = reBearer.ReplaceAllString(s, "${1}REDACTED")
	s = reQueryTok.ReplaceAllString(s, "${1}REDACTED")
	s = reTokenHdr.ReplaceAllString(s, "${1}REDACTED")
	return s
}

// cleanTransportErr strips the URL from *url.Error (it may carry a query
// token) and redacts what is left.
func (c *Client) cleanTransportErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &redactedError{msg: c.redact(err.Error()), err: err}
}

// connTrace records whether a request ever got a connection. Only a
// request that never got one (and failed while resolving, connecting or
// handshaking) is known not to have reached the server: once a connection
// exists, a failure may come after the server read the request.
type connTrace struct {
	connected, tlsFailed atomic.Bool
}

func (t *connTrace) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { t.connected.Store(true) },
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			if err != nil {
				t.tlsFailed.Store(true)
			}
		},
	}
}

// neverConnected: err is a resolution, connect or TLS handshake failure of
// a request that never got a connection. Both must hold: a transport that
// reports no trace events proves nothing by its silence alone.
func (t *connTrace) neverConnected(err error) bool {
	if t.connected.Load() {
		return false
	}
	if t.tlsFailed.Load() {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect")
}

// safeURL is u without credentials, query or fragment.
func safeURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	v := *u
	v.User, v.RawQuery, v.ForceQuery, v.Fragment, v.RawFragment = nil, "", false, "", ""
	return v.String()
}

// redactedError keeps the cause for errors.Is/As but prints a redacted text.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }

func (e *redactedError) Unwrap() error { return e.err }
