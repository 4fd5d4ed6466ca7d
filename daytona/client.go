package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
)

const (
	// DefaultAPIURL is the Daytona Cloud API base URL, including /api.
	DefaultAPIURL = "https://app.daytona.io/api"
	// SDKVersion is the protocol level this client speaks, sent as
	// X-Daytona-SDK-Version. At >= 0.167.0 the toolbox returns stdout and
	// stderr separately and keeps the stream markers (docs/daytona.md#version-headers).
	SDKVersion = "0.190.0"
	// DefaultSource is sent as X-Daytona-Source. It is deliberately not
	// "sdk-go": the daemon strips fields for old sdk-go decoders.
	DefaultSource = "daytona-worker-go"
	// DefaultUserAgent is the User-Agent of every request.
	DefaultUserAgent = "daytona-worker-go/" + SDKVersion
)

// Header names of docs/daytona.md#client-setup.
const (
	HeaderSDKVersion   = "X-Daytona-SDK-Version"
	HeaderSource       = "X-Daytona-Source"
	HeaderPreviewToken = "X-Daytona-Preview-Token"
	HeaderSplitOutput  = "X-Daytona-Split-Output"
)

// Client talks to one Daytona organization. It is safe for concurrent use.
// Build it with [NewClient].
type Client struct {
	apiURL *url.URL
	apiKey string
	target string
	hc     *http.Client

	retry     RetryPolicy
	poll      func() backoff.BackOff
	jsonLimit int64 // bound of decoded JSON answers (maxJSONBody; tests lower it)
	// headerGrace: how long a cancellation is held back while an answer's
	// header is read (headerStallGrace; tests lower it), see cancelGate.
	headerGrace time.Duration

	mu      sync.Mutex
	secrets []string // learned tokens to redact (preview tokens, signed URLs)

	common service

	// Sandboxes is the control plane: create, get, list, lifecycle, intervals.
	Sandboxes *SandboxesService
	// Toolbox runs commands: one-shot execute, sessions, logs, work dirs.
	Toolbox *ToolboxService
	// Files transfers and manages files inside a sandbox.
	Files *FilesService
	// PTY creates and drives pseudo-terminals.
	PTY *PTYService
	// Snapshots reads and deletes snapshots.
	Snapshots *SnapshotsService
}

// service is shared by every service, as in go-github.
type service struct{ client *Client }

// Response carries what a caller may want from a successful HTTP answer.
// It deliberately does not expose the *http.Request (its headers hold the
// API key).
type Response struct {
	StatusCode int
	Header     http.Header
	Route      string // "METHOD /template"
	Attempts   int    // 1 unless the call was retried
}

// RetryPolicy controls the retries of idempotent calls. The zero value of a
// field keeps its default.
type RetryPolicy struct {
	// MaxRetries is the number of retries after the first attempt
	// (default 3; negative disables retries).
	MaxRetries int
	// BackOff returns a fresh back-off for one call (default: exponential,
	// 250 ms initial, ×2, 5 s cap). Its MaxElapsedTime is ignored: the
	// caller's context is the budget.
	BackOff func() backoff.BackOff
	// MaxRetryAfter: a Retry-After longer than this is not waited for; the
	// *RateLimitError is returned instead (default 60 s).
	MaxRetryAfter time.Duration
	// Sleep waits d or until ctx is done (default: a timer). Tests inject
	// a fast one.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Option configures a [Client]. Options validate their input.
type Option func(*Client) error

// WithAPIURL sets the API base URL including the /api suffix
// (default https://app.daytona.io/api). It must be http(s), with a host and
// without credentials, query or fragment.
func WithAPIURL(raw string) Option {
	return func(c *Client) error {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			return fmt.Errorf("%w: API URL does not parse", ErrInvalidArgument)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Errorf("%w: API URL must be http or https", ErrInvalidArgument)
		}
		if u.Host == "" {
			return fmt.Errorf("%w: API URL has no host", ErrInvalidArgument)
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("%w: API URL must not carry credentials, a query or a fragment", ErrInvalidArgument)
		}
		u.Path = strings.TrimRight(u.Path, "/")
		u.RawPath = ""
		c.apiURL = u
		return nil
	}
}

// WithAPIKey sets the bearer credential, an organization API key (the
// client sends no organization header, so a user JWT is not enough).
func WithAPIKey(key string) Option {
	return func(c *Client) error {
		if key == "" {
			return fmt.Errorf("%w: API key is empty", ErrInvalidArgument)
		}
		if strings.ContainsAny(key, " \t\r\n") {
			return fmt.Errorf("%w: API key contains whitespace", ErrInvalidArgument)
		}
		c.apiKey = key
		return nil
	}
}

// WithTarget sets the default region for new sandboxes; a
// [CreateSandboxRequest.Target] overrides it. Empty means the
// organization's default region.
func WithTarget(target string) Option {
	return func(c *Client) error {
		c.target = strings.TrimSpace(target)
		return nil
	}
}

// WithHTTPClient uses a copy of hc. Its Timeout, if any, is kept (the client
// adds none); its CheckRedirect is replaced so redirects are never followed.
// Its Transport serves every call and WebSocket dial; a nil one is Go's
// default transport, whose pool keeps only 2 idle connections per host, so
// build hc around [NewTransport] unless a test needs otherwise.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return fmt.Errorf("%w: HTTP client is nil", ErrInvalidArgument)
		}
		cp := *hc
		c.hc = &cp
		return nil
	}
}

// WithRetryPolicy replaces the retry policy of idempotent calls.
func WithRetryPolicy(p RetryPolicy) Option {
	return func(c *Client) error {
		if p.MaxRetryAfter < 0 {
			return fmt.Errorf("%w: MaxRetryAfter is negative", ErrInvalidArgument)
		}
		if p.MaxRetries != 0 {
			c.retry.MaxRetries = p.MaxRetries
		}
		if p.BackOff != nil {
			c.retry.BackOff = p.BackOff
		}
		if p.MaxRetryAfter != 0 {
			c.retry.MaxRetryAfter = p.MaxRetryAfter
		}
		if p.Sleep != nil {
			c.retry.Sleep = p.Sleep
		}
		return nil
	}
}

// WithPollBackOff sets the polling interval of the wait helpers. The default
// follows the SDKs (docs/daytona.md#waiting): 100 ms, growing ×1.1 per poll,
// capped at 1 s. Tests pass a short constant back-off.
func WithPollBackOff(f func() backoff.BackOff) Option {
	return func(c *Client) error {
		if f == nil {
			return fmt.Errorf("%w: poll back-off is nil", ErrInvalidArgument)
		}
		c.poll = f
		return nil
	}
}

// NewClient builds a client. An API key is required.
func NewClient(opts ...Option) (*Client, error) {
	c := &Client{
		retry: RetryPolicy{
			MaxRetries:    3,
			BackOff:       defaultRetryBackOff,
			MaxRetryAfter: 60 * time.Second,
			Sleep:         sleepCtx,
		},
		poll:        defaultPollBackOff,
		jsonLimit:   maxJSONBody,
		headerGrace: headerStallGrace,
	}
	if err := WithAPIURL(DefaultAPIURL)(c); err != nil {
		return nil, err
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if c.apiKey == "" {
		return nil, fmt.Errorf("%w: an API key (WithAPIKey) is required", ErrInvalidArgument)
	}
	if c.hc == nil {
		// No Timeout: a synchronous exec answers only when its command ends.
		c.hc = &http.Client{Transport: NewTransport()}
	}
	c.hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.common.client = c
	c.Sandboxes = (*SandboxesService)(&c.common)
	c.Toolbox = (*ToolboxService)(&c.common)
	c.Files = (*FilesService)(&c.common)
	c.PTY = (*PTYService)(&c.common)
	c.Snapshots = (*SnapshotsService)(&c.common)
	return c, nil
}

func defaultRetryBackOff() backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(250*time.Millisecond),
		backoff.WithMaxInterval(5*time.Second),
		backoff.WithMaxElapsedTime(0),
	)
}

func defaultPollBackOff() backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(100*time.Millisecond),
		backoff.WithMultiplier(1.1),
		backoff.WithRandomizationFactor(0),
		backoff.WithMaxInterval(time.Second),
		backoff.WithMaxElapsedTime(0),
	)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ---- requests --------------------------------------------------------------

// SandboxRef addresses one sandbox's toolbox: its ID (never the name) and
// its toolboxProxyUrl (docs/daytona.md#toolbox-address).
type SandboxRef struct {
	ID              string
	ToolboxProxyURL string
}

// call is one request.
type call struct {
	rt     *route
	ref    SandboxRef // toolbox routes only
	args   []string   // path placeholders in order
	query  url.Values
	body   []byte    // JSON body (replayable)
	stream io.Reader // streamed body (never retried); wins over body
	ctype  string
	header http.Header // extra headers
	limit  int64       // max bytes of a decoded JSON answer (default maxJSONBody)
	// rawLogs asks the toolbox for raw marker logs: no SDK-version header,
	// X-Daytona-Split-Output: true instead (docs/daytona.md#version-headers).
	rawLogs bool
}

// maxJSONBody bounds a decoded 2xx JSON answer so a hostile or broken
// server cannot make the client buffer without limit.
const maxJSONBody = 32 << 20

func (c *Client) baseURL(cl *call) (*url.URL, error) {
	if cl.rt.api == mainAPI {
		u := *c.apiURL
		return &u, nil
	}
	if cl.ref.ID == "" {
		return nil, fmt.Errorf("%w: sandbox ID is empty", ErrInvalidArgument)
	}
	if cl.ref.ToolboxProxyURL == "" {
		return nil, fmt.Errorf("%w: sandbox %s has no toolboxProxyUrl", ErrInvalidArgument, cl.ref.ID)
	}
	u, err := url.Parse(cl.ref.ToolboxProxyURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: toolboxProxyUrl of sandbox %s is not an http(s) URL", ErrInvalidArgument, cl.ref.ID)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/" + url.PathEscape(cl.ref.ID)
	u.RawPath = ""
	u.RawQuery = ""
	u.Fragment = ""
	return u, nil
}

func (c *Client) requestURL(cl *call) (string, error) {
	u, err := c.baseURL(cl)
	if err != nil {
		return "", err
	}
	p := cl.rt.path(cl.args...)
	// Keep the escaped form of path arguments (a sandbox name may hold '/').
	u.RawPath = u.EscapedPath() + p
	u.Path, _ = url.PathUnescape(u.RawPath)
	if len(cl.query) > 0 {
		u.RawQuery = cl.query.Encode()
	}
	return u.String(), nil
}

// setHeaders sets what every request carries: credentials and the
// client's identity.
func (c *Client) setHeaders(h http.Header) {
	h.Set("Authorization", "Bearer "+c.apiKey)
	h.Set(HeaderSDKVersion, SDKVersion)
	h.Set(HeaderSource, DefaultSource)
	h.Set("User-Agent", DefaultUserAgent)
}

// send performs cl with the route's retry policy and returns the open 2xx
// answer; the caller closes its body. Non-2xx answers become typed errors.
func (c *Client) send(ctx context.Context, cl *call) (*http.Response, *Response, error) {
	if ctx == nil {
		return nil, nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	for i, a := range cl.args {
		if a == "" {
			return nil, nil, fmt.Errorf("%w: %s: path argument %d is empty", ErrInvalidArgument, cl.rt, i+1)
		}
	}
	target, err := c.requestURL(cl)
	if err != nil {
		return nil, nil, err
	}
	maxRetries := c.retry.MaxRetries
	if cl.rt.retry == retryNever || cl.stream != nil {
		maxRetries = 0
	}
	var bo backoff.BackOff
	for attempt := 1; ; attempt++ {
		var body io.Reader
		switch {
		case cl.stream != nil:
			body = cl.stream
		case cl.body != nil:
			body = bytes.NewReader(cl.body)
		}
		// The transport sees the request under the gate's context, never
		// ctx itself: see cancelGate for the cancellation of one request
		// that Go's transport would otherwise turn against another.
		gate := newCancelGate(ctx, c.headerGrace)
		req, err := http.NewRequestWithContext(gate.ctx, cl.rt.method, target, body)
		if err != nil {
			gate.release()
			return nil, nil, &TransportError{Method: cl.rt.method, Route: cl.rt.tmpl, Err: c.cleanTransportErr(err)}
		}
		if cl.stream != nil {
			req.ContentLength = -1
		}
		c.setHeaders(req.Header)
		if cl.rawLogs {
			req.Header.Del(HeaderSDKVersion)
			req.Header.Set(HeaderSplitOutput, "true")
		}
		req.Header.Set("Accept", "application/json")
		if cl.ctype != "" {
			req.Header.Set("Content-Type", cl.ctype)
		} else if cl.body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, vs := range cl.header {
			req.Header[k] = vs
		}

		var conn connTrace
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), gate.trace(conn.trace())))
		if ctx.Err() != nil {
			// The gate forwards a cancellation from a goroutine of its
			// own, which may not have run yet: a call cancelled before it
			// starts must not be sent (the transport refused ctx itself
			// when it saw it directly).
			gate.release()
			return nil, nil, &TransportError{Method: cl.rt.method, Route: cl.rt.tmpl, Err: ctx.Err()}
		}
		resp, err := c.hc.Do(req)
		gate.answered()
		var callErr error
		var retryAfter time.Duration
		retryable := false
		if err != nil {
			gate.release()
			if ctx.Err() != nil {
				// The context's error is more useful than the transport's.
				return nil, nil, &TransportError{Method: cl.rt.method, Route: cl.rt.tmpl, Err: ctx.Err()}
			}
			te := &TransportError{Method: cl.rt.method, Route: cl.rt.tmpl, Err: c.cleanTransportErr(err), NotSent: conn.neverConnected(err)}
			if ab := (*abandonedError)(nil); errors.As(err, &ab) {
				// Another request's cancellation closed the connection
				// under this one (its own context is alive). The request
				// may have been written already, so it is retried only
				// where any failure is (idempotent and keyed routes).
				te.Err = errConnAbandoned
			}
			if cl.rt.api == mainAPI {
				te.BaseURL = safeURL(c.apiURL)
			}
			callErr = te
			retryable = cl.rt.retry.resendable()
		} else if resp.StatusCode >= 200 && resp.StatusCode < 300 ||
			resp.StatusCode == http.StatusConflict && attempt > 1 && cl.rt.retry == retryKeyed {
			// A keyed create's resend that finds its ID taken: an earlier
			// attempt, whose answer was lost, created it.
			resp.Body = &gatedBody{ReadCloser: resp.Body, gate: gate}
			return resp, &Response{StatusCode: resp.StatusCode, Header: resp.Header, Route: cl.rt.String(), Attempts: attempt}, nil
		} else {
			callErr = c.newErrorResponse(cl.rt, resp)
			gate.release()
			switch {
			case resp.StatusCode == http.StatusTooManyRequests:
				var rl *RateLimitError
				if errors.As(callErr, &rl) {
					retryAfter = rl.RetryAfter
				}
				switch cl.rt.retry {
				case retryIdempotent, retryKeyed:
					retryable = true
				case retryRateLimited:
					retryable = retryAfter > 0
				}
				if retryAfter > c.retry.MaxRetryAfter {
					retryable = false
				}
			case resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout:
				retryable = cl.rt.retry.resendable()
			}
		}
		if !retryable || attempt > maxRetries {
			return nil, nil, callErr
		}
		if bo == nil {
			bo = c.retry.BackOff()
			bo.Reset()
		}
		delay := bo.NextBackOff()
		if delay == backoff.Stop {
			return nil, nil, callErr
		}
		if retryAfter > delay {
			delay = retryAfter
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < delay {
			// Waiting would outlive the caller: report the real cause now.
			return nil, nil, callErr
		}
		if err := c.retry.Sleep(ctx, delay); err != nil {
			return nil, nil, callErr
		}
	}
}

// do performs cl and decodes a JSON answer into out (if non-nil).
func (c *Client) do(ctx context.Context, cl *call, out any) (*Response, error) {
	resp, r, err := c.send(ctx, cl)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBodySize))
		return r, nil
	}
	limit := cl.limit
	if limit <= 0 {
		limit = c.jsonLimit
	}
	lr := &io.LimitedReader{R: resp.Body, N: limit + 1}
	dec := json.NewDecoder(lr)
	if err := dec.Decode(out); err != nil || dec.InputOffset() > limit {
		// The extra byte read tells a cut answer from a whole one; a value
		// that ends on it is one byte over, not within the limit.
		if lr.N <= 0 {
			return r, fmt.Errorf("%w: %s: answer larger than %d bytes", ErrMalformedResponse, cl.rt, limit)
		}
		if ctx.Err() != nil {
			return r, &TransportError{Method: cl.rt.method, Route: cl.rt.tmpl, Err: ctx.Err()}
		}
		return r, fmt.Errorf("%w: %s: %s", ErrMalformedResponse, cl.rt, c.redact(err.Error()))
	}
	drain(resp.Body)
	return r, nil
}

// jsonBody marshals v for a call body.
func jsonBody(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own request types are marshalled; they always encode.
		panic(fmt.Sprintf("daytona: encoding request: %v", err))
	}
	return b
}

// limitJSON bounds a JSON answer decoded outside do.
func limitJSON(r io.Reader) io.Reader { return io.LimitReader(r, maxJSONBody) }
