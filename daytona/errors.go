package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/daytonaworker/daytona-worker/internal/clamp"
)

// Sentinel errors. Every error the client returns for a failed call matches
// the sentinels that describe it with errors.Is; use errors.As with
// [*ErrorResponse], [*RateLimitError], [*TransportError], [*SandboxStateError]
// or [*StreamError] for details.
var (
	// ErrNotFound matches 404 answers (unknown sandbox, session, command, file).
	ErrNotFound = errors.New("daytona: not found")
	// ErrConflict matches 409 answers (name clash, "Sandbox state change in
	// progress", session already exists).
	ErrConflict = errors.New("daytona: conflict")
	// ErrRateLimited matches 429 answers; see [RateLimitError.RetryAfter].
	ErrRateLimited = errors.New("daytona: rate limited")
	// ErrBadRequest matches 400 and 422 answers (validation, invalid state, quota).
	ErrBadRequest = errors.New("daytona: bad request")
	// ErrQuota matches the 400 quota answers of docs/daytona.md#quotas-rate-limits-and-names (it also
	// matches ErrBadRequest).
	ErrQuota = errors.New("daytona: quota exceeded")
	// ErrUnauthorized matches 401 answers (bad or expired API key).
	ErrUnauthorized = errors.New("daytona: unauthorized")
	// ErrForbidden matches 403 answers (suspended organization, region, permission).
	ErrForbidden = errors.New("daytona: forbidden")
	// ErrGone matches 410 answers (command already completed, PTY terminated).
	ErrGone = errors.New("daytona: gone")
	// ErrContainerMissing matches the runner's "missing container" condition
	// (docs/daytona.md#missing-container): a toolbox 404 whose message contains
	// "sandbox container not found", and a sandbox in state error whose
	// errorReason is exactly the Docker "No such container" text.
	ErrContainerMissing = errors.New("daytona: sandbox container missing")
	// ErrTimeout matches a 408 (one-shot exec timeout), a 504, a context
	// deadline hit during a call, and a wait whose deadline passed.
	ErrTimeout = errors.New("daytona: timeout")
	// ErrDiskFull matches an answer whose message names an exhausted disk,
	// quota or file-size limit ("No space left on device", "Disk quota
	// exceeded", "File too large"), e.g. a bulk upload into a full sandbox.
	// It also matches the answer's status sentinel (usually ErrBadRequest).
	ErrDiskFull = errors.New("daytona: sandbox disk full")
	// ErrServer matches 5xx answers.
	ErrServer = errors.New("daytona: server error")
	// ErrRedirect matches an unexpected 3xx answer; the client never follows
	// redirects, so credentials are never forwarded to another location.
	ErrRedirect = errors.New("daytona: unexpected redirect")
	// ErrInvalidArgument is returned before any request for arguments the
	// client can reject itself (empty ID, image and snapshot together, ...).
	ErrInvalidArgument = errors.New("daytona: invalid argument")
	// ErrMalformedResponse matches a 2xx answer whose body could not be decoded.
	ErrMalformedResponse = errors.New("daytona: malformed response")
	// ErrSessionEnded matches an exec answer that proves the session's
	// shell did not take the command (docs/daytona.md#session-exec): a 410
	// with code SESSION_ENDED (newer daemons), and the v0.190.0 daemon's
	// 500s whose message says the session is not found (lost with a
	// restart) or that the write of the command met a broken pipe (the
	// shell died). It also matches the status's own sentinel.
	ErrSessionEnded = errors.New("daytona: session ended")
	// ErrUnreachable matches a call that never reached the server: no
	// connection could be made (name resolution, connect, TLS handshake),
	// so the request was provably never written and had no effect. A
	// failure after a connection was made (a reset, a timeout) may have
	// reached the server and does not match.
	ErrUnreachable = errors.New("daytona: server unreachable")
)

// maxErrorBodySize bounds how much of an error body is read (go-github's 1 MiB).
const maxErrorBodySize = 1 << 20

// ErrorResponse is a non-2xx answer from the API, the toolbox or the proxy.
//
// Message, Reason and Code come from the JSON body shapes of
// docs/daytona.md#error-bodies (API: message/error; toolbox: message/code; PTY: error) or from the
// raw body text; all are redacted of known secrets.
type ErrorResponse struct {
	Method     string // HTTP method
	Route      string // route template, e.g. "/sandbox/{sandboxIdOrName}"; never a concrete URL
	StatusCode int
	Message    string // server message (redacted, at most 1 MiB)
	Reason     string // the "error" field (HTTP reason phrase, or PTY error text)
	Code       string // toolbox error code, e.g. "NOT_FOUND", "REQUEST_TIMEOUT"
	Errors     []string
}

// Error implements error. It names the route template, never the URL.
func (e *ErrorResponse) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "daytona: %s %s: %d %s", e.Method, e.Route, e.StatusCode, http.StatusText(e.StatusCode))
	msg := e.Message
	if msg == "" {
		msg = e.Reason
	}
	if msg == "" && len(e.Errors) > 0 {
		msg = strings.Join(e.Errors, ", ")
	}
	if msg != "" {
		b.WriteString(": ")
		b.WriteString(clamp.Echo(msg))
	}
	return b.String()
}

// Is makes errors.Is match the sentinels that describe the answer.
func (e *ErrorResponse) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrConflict:
		return e.StatusCode == http.StatusConflict
	case ErrRateLimited:
		return e.StatusCode == http.StatusTooManyRequests
	case ErrBadRequest:
		return e.StatusCode == http.StatusBadRequest || e.StatusCode == http.StatusUnprocessableEntity
	case ErrQuota:
		return e.StatusCode == http.StatusBadRequest && IsQuotaMessage(e.Message)
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrForbidden:
		return e.StatusCode == http.StatusForbidden
	case ErrGone:
		return e.StatusCode == http.StatusGone
	case ErrContainerMissing:
		return e.StatusCode == http.StatusNotFound && strings.Contains(e.Message, containerNotFoundText)
	case ErrTimeout:
		return e.StatusCode == http.StatusRequestTimeout || e.StatusCode == http.StatusGatewayTimeout || e.Code == "REQUEST_TIMEOUT"
	case ErrDiskFull:
		if IsDiskFullMessage(e.Message) || IsDiskFullMessage(e.Reason) {
			return true
		}
		for _, m := range e.Errors {
			if IsDiskFullMessage(m) {
				return true
			}
		}
		return false
	case ErrSessionEnded:
		return e.Code == "SESSION_ENDED" || e.StatusCode == http.StatusInternalServerError &&
			(strings.Contains(e.Message, "session not found") ||
				strings.Contains(e.Message, "failed to write command") && strings.Contains(e.Message, "broken pipe"))
	case ErrServer:
		return e.StatusCode >= 500
	case ErrRedirect:
		return e.StatusCode >= 300 && e.StatusCode < 400
	}
	return false
}

// RateLimitError is a 429 answer. RetryAfter is the largest of the
// Retry-After and Retry-After-<bucket> headers (0 if none was sent).
type RateLimitError struct {
	*ErrorResponse
	RetryAfter time.Duration
	Bucket     string // e.g. "sandbox-create", "sandbox-lifecycle", "authenticated"
}

// Error implements error.
func (e *RateLimitError) Error() string {
	s := e.ErrorResponse.Error()
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return s
}

// Unwrap gives errors.As access to the [*ErrorResponse].
func (e *RateLimitError) Unwrap() error { return e.ErrorResponse }

// TransportError is a call that got no HTTP answer: connection refused or
// reset, a context canceled or past its deadline, a broken body. It names
// the route template, never the URL (which could carry a token).
type TransportError struct {
	Method string
	Route  string
	Err    error // the cause, with any URL stripped
	// NotSent: no connection was ever made, so the request was never
	// written (see ErrUnreachable).
	NotSent bool
	// BaseURL is the API base URL of a main-API call, without credentials,
	// query or fragment; "" for toolbox calls.
	BaseURL string
}

// Error implements error.
func (e *TransportError) Error() string {
	return fmt.Sprintf("daytona: %s %s: %v", e.Method, e.Route, e.Err)
}

// Unwrap returns the cause (context.Canceled, context.DeadlineExceeded, ...).
func (e *TransportError) Unwrap() error { return e.Err }

// Reason is the cause in a few words, for messages: "connection refused",
// "no such host", or the (redacted) TLS or transport error.
func (e *TransportError) Reason() string {
	var dns *net.DNSError
	if errors.As(e.Err, &dns) && dns.Err != "" {
		return clamp.Echo(dns.Err)
	}
	var op *net.OpError
	if errors.As(e.Err, &op) && op.Err != nil {
		var sys *os.SyscallError
		if errors.As(op.Err, &sys) && sys.Err != nil {
			return clamp.Echo(sys.Err.Error())
		}
		return clamp.Echo(op.Err.Error())
	}
	if e.Err == nil {
		return "unknown error"
	}
	return clamp.Echo(e.Err.Error())
}

// Is matches ErrTimeout for deadlines and network timeouts, and
// ErrUnreachable for a request that was never sent.
func (e *TransportError) Is(target error) bool {
	if target == ErrUnreachable {
		return e.NotSent
	}
	if target == ErrTimeout {
		if errors.Is(e.Err, context.DeadlineExceeded) {
			return true
		}
		var ne net.Error
		return errors.As(e.Err, &ne) && ne.Timeout()
	}
	return false
}

// SandboxStateError is returned by the wait helpers when the sandbox reaches
// a state they cannot wait past (error, build_failed), and by those helpers
// when their deadline passes (then it matches ErrTimeout).
type SandboxStateError struct {
	SandboxID   string
	State       SandboxState
	ErrorReason string
	Recoverable bool
	Waiting     []SandboxState // the states that were awaited
	Err         error          // non-nil for a deadline: the context error
}

// Error implements error.
func (e *SandboxStateError) Error() string {
	want := make([]string, len(e.Waiting))
	for i, s := range e.Waiting {
		want[i] = string(s)
	}
	if e.Err != nil {
		return fmt.Sprintf("daytona: sandbox %s still %q while waiting for %s: %v", clamp.Echo(e.SandboxID), e.State, strings.Join(want, "|"), e.Err)
	}
	s := fmt.Sprintf("daytona: sandbox %s is %q while waiting for %s", clamp.Echo(e.SandboxID), e.State, strings.Join(want, "|"))
	if e.ErrorReason != "" {
		s += ": " + clamp.Echo(e.ErrorReason)
	}
	return s
}

// Unwrap returns the context error of a wait that ran out of time.
func (e *SandboxStateError) Unwrap() error { return e.Err }

// Is matches ErrTimeout for a deadline and ErrContainerMissing for the
// exact missing-container errorReason.
func (e *SandboxStateError) Is(target error) bool {
	switch target {
	case ErrTimeout:
		return e.Err != nil && errors.Is(e.Err, context.DeadlineExceeded)
	case ErrContainerMissing:
		return e.State == StateError && IsMissingContainerReason(e.ErrorReason, e.SandboxID)
	}
	return false
}

// containerNotFoundText is the toolbox proxy's marker for a missing container.
const containerNotFoundText = "sandbox container not found"

// IsMissingContainerReason reports whether errorReason is exactly the
// runner's text for a lost Docker container (docs/daytona.md#missing-container):
//
//	not found: failed to inspect sandbox container <ID>: Error response from daemon: No such container: <ID>
//
// If sandboxID is empty any ID is accepted (both occurrences must still agree).
func IsMissingContainerReason(errorReason, sandboxID string) bool {
	const prefix = "not found: failed to inspect sandbox container "
	const middle = ": Error response from daemon: No such container: "
	rest, ok := strings.CutPrefix(errorReason, prefix)
	if !ok {
		return false
	}
	id1, id2, ok := strings.Cut(rest, middle)
	if !ok || id1 == "" || id1 != id2 {
		return false
	}
	return sandboxID == "" || id1 == sandboxID
}

// IsQuotaMessage reports whether a 400 message is one of the quota texts of
// docs/daytona.md#quotas-rate-limits-and-names.
func IsQuotaMessage(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "limit exceeded") ||
		strings.Contains(m, "exceeds maximum allowed") ||
		strings.Contains(m, "only ephemeral sandboxes are permitted")
}

// IsDiskFullMessage reports whether text names an exhausted disk, disk
// quota or file-size limit (docs/behavior.md#streaming-export), case-insensitively.
// Use it on command output too.
func IsDiskFullMessage(text string) bool {
	t := strings.ToLower(text)
	return strings.Contains(t, "no space left on device") ||
		strings.Contains(t, "disk quota exceeded") ||
		strings.Contains(t, "file too large")
}

// errorBody is the union of the error body shapes of docs/daytona.md#error-bodies.
type errorBody struct {
	Message json.RawMessage `json:"message"` // string, or an array of strings from validation
	Error   string          `json:"error"`
	Code    string          `json:"code"`
	Errors  []string        `json:"errors"`
}

// newErrorResponse reads (at most maxErrorBodySize of) resp.Body, closes it
// and builds the typed error.
func (c *Client) newErrorResponse(rt *route, resp *http.Response) error {
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodySize))
	e := &ErrorResponse{Method: rt.method, Route: rt.tmpl, StatusCode: resp.StatusCode}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// The body and Location of a redirect are not shown: a redirect to
		// a signed URL would carry its signature.
		e.Message = "redirect not followed"
		return e
	}
	var eb errorBody
	if len(raw) > 0 && json.Unmarshal(raw, &eb) == nil {
		var s string
		var list []string
		switch {
		case json.Unmarshal(eb.Message, &s) == nil:
			e.Message = s
		case json.Unmarshal(eb.Message, &list) == nil:
			e.Message = strings.Join(list, ", ")
		}
		e.Reason = eb.Error
		e.Code = eb.Code
		e.Errors = eb.Errors
	} else if len(raw) > 0 {
		e.Message = strings.TrimSpace(string(raw))
		if !utf8.ValidString(e.Message) {
			e.Message = strings.ToValidUTF8(e.Message, "\uFFFD")
		}
	}
	e.Message = c.redact(e.Message)
	e.Reason = c.redact(e.Reason)
	for i := range e.Errors {
		e.Errors[i] = c.redact(e.Errors[i])
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		ra, bucket := parseRetryAfter(resp.Header)
		return &RateLimitError{ErrorResponse: e, RetryAfter: ra, Bucket: bucket}
	}
	return e
}

// parseRetryAfter reads Retry-After and Retry-After-<bucket> (seconds, or an
// HTTP date for the plain header) and returns the largest with its bucket.
func parseRetryAfter(h http.Header) (time.Duration, string) {
	var best time.Duration
	var bucket string
	for k, vs := range h {
		lk := strings.ToLower(k)
		if !strings.HasPrefix(lk, "retry-after") || len(vs) == 0 {
			continue
		}
		v := strings.TrimSpace(vs[0])
		var d time.Duration
		if n, err := strconv.ParseFloat(v, 64); err == nil && n >= 0 && n < 1e6 {
			d = time.Duration(n * float64(time.Second))
		} else if t, err := http.ParseTime(v); err == nil {
			d = time.Until(t)
		}
		if d > best {
			best = d
			bucket = strings.TrimPrefix(strings.TrimPrefix(lk, "retry-after"), "-")
		}
	}
	return best, bucket
}
