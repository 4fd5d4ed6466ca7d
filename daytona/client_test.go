package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testKey = "dtn_secret_key_0123456789abcdef"

// fixture is a plain httptest server with the API mounted under /api and
// the toolbox under /toolbox/{id}/, plus a client pointed at it whose
// retry and poll delays are recorded instead of slept.
type fixture struct {
	t      *testing.T
	mux    *http.ServeMux
	srv    *httptest.Server
	c      *Client
	ref    SandboxRef
	mu     sync.Mutex
	sleeps []time.Duration
}

func newFixture(t *testing.T, opts ...Option) *fixture {
	t.Helper()
	f := &fixture{t: t, mux: http.NewServeMux()}
	f.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
		http.Error(w, "unexpected", http.StatusTeapot)
	})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.checkRoute(r)
		f.mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	base := []Option{
		WithAPIURL(f.srv.URL + "/api"),
		WithAPIKey(testKey),
		WithRetryPolicy(RetryPolicy{BackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) },
			Sleep: f.sleep}),
		WithPollBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }),
	}
	c, err := NewClient(append(base, opts...)...)
	require.NoError(t, err)
	f.c = c
	f.ref = SandboxRef{ID: "sb-1", ToolboxProxyURL: f.srv.URL + "/toolbox/"}
	return f
}

// checkRoute proves that the request matches a route of the client's
// table (method, template, declared query parameters): together with
// TestFidelityRoutes this shows every request the client sends exists in
// the OpenAPI documents.
func (f *fixture) checkRoute(r *http.Request) {
	p := r.URL.EscapedPath()
	var rel string
	switch {
	case strings.HasPrefix(p, "/api/"):
		rel = strings.TrimPrefix(p, "/api")
	case strings.HasPrefix(p, "/toolbox/"):
		parts := strings.SplitN(strings.TrimPrefix(p, "/toolbox/"), "/", 2)
		if len(parts) == 2 {
			rel = "/" + parts[1]
		}
	}
	ws := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	rt := matchRoute(r.Method, rel, ws)
	if rt == nil {
		f.t.Errorf("request %s %s (ws=%v) matches no route of the client's table", r.Method, p, ws)
		return
	}
	routeHits.Store(rt, true)
	for k := range r.URL.Query() {
		if !slices.Contains(rt.query, k) {
			f.t.Errorf("request %s %s: query parameter %q not declared on %s", r.Method, p, k, rt)
		}
	}
}

// sleep records the delay and returns at once (or the ctx error).
func (f *fixture) sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	f.sleeps = append(f.sleeps, d)
	f.mu.Unlock()
	return ctx.Err()
}

func (f *fixture) sleepsSeen() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.sleeps...)
}

func (f *fixture) handle(pattern string, h http.HandlerFunc) { f.mux.HandleFunc(pattern, h) }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"path": "/api/x", "timestamp": "2026-06-23T10:00:00.000Z",
		"statusCode": code, "error": http.StatusText(code), "message": msg})
}

func sandboxJSON(id, name string, state SandboxState) map[string]any {
	return map[string]any{"id": id, "organizationId": "org", "name": name, "state": state, "desiredState": state,
		"labels": map[string]string{}, "env": map[string]string{}, "toolboxProxyUrl": "https://proxy.example/toolbox",
		"autoStopInterval": 15, "autoArchiveInterval": 60, "autoDeleteInterval": -1, "cpu": 1, "memory": 1, "disk": 3}
}

// A toolbox call goes only to an http(s) toolboxProxyUrl with a host: a
// sandbox record without one, or with another scheme, or no host, is
// refused before anything is sent.
func TestToolboxCallsNeedAnHTTPProxyURL(t *testing.T) {
	t.Parallel()
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.Errorf("sent %s", r.URL)
		return nil, errors.New("sent")
	})}
	c := unreachableClient(t, "http://127.0.0.1:1/api", hc)
	for _, proxy := range []string{"", "ftp://proxy.example/toolbox", "https:///toolbox", "https://proxy.example/%zz"} {
		_, _, err := c.Toolbox.WorkDir(t.Context(), SandboxRef{ID: "sb-1", ToolboxProxyURL: proxy})
		require.ErrorIs(t, err, ErrInvalidArgument, proxy)
	}
}

func TestNewClientValidatesOptions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts []Option
	}{
		{"no key", nil},
		{"empty key", []Option{WithAPIKey("")}},
		{"key with newline", []Option{WithAPIKey("a\nb")}},
		{"bad scheme", []Option{WithAPIKey("k"), WithAPIURL("ftp://x/api")}},
		{"no host", []Option{WithAPIKey("k"), WithAPIURL("http:///api")}},
		{"credentials in URL", []Option{WithAPIKey("k"), WithAPIURL("https://u:p@x/api")}},
		{"query in URL", []Option{WithAPIKey("k"), WithAPIURL("https://x/api?token=1")}},
		{"fragment in URL", []Option{WithAPIKey("k"), WithAPIURL("https://x/api#part")}},
		{"nil http client", []Option{WithAPIKey("k"), WithHTTPClient(nil)}},
		{"nil poll", []Option{WithAPIKey("k"), WithPollBackOff(nil)}},
		{"negative retry-after cap", []Option{WithAPIKey("k"), WithRetryPolicy(RetryPolicy{MaxRetryAfter: -1})}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewClient(tc.opts...)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidArgument)
		})
	}
	c, err := NewClient(WithAPIKey("k"))
	require.NoError(t, err)
	assert.Equal(t, DefaultAPIURL, c.apiURL.String())
	assert.Zero(t, c.hc.Timeout, "no hidden global timeout")

	hc := &http.Client{}
	c, err = NewClient(WithAPIKey("k"), WithHTTPClient(hc), WithAPIURL("http://127.0.0.1:1/api/"))
	require.NoError(t, err)
	assert.NotSame(t, hc, c.hc, "the HTTP client is copied")
	assert.Nil(t, hc.CheckRedirect, "the caller's client is not modified")
	assert.Equal(t, "http://127.0.0.1:1/api", c.apiURL.String())
}

// A client built without WithAPIURL sends its calls to Daytona Cloud,
// https://app.daytona.io/api, and every request names the worker with
// the literal X-Daytona-Source and User-Agent values (never "sdk-go",
// whose old decoders make the daemon strip fields). The transport records
// the request and fails it, so nothing reaches the network. (Pins a
// default: DefaultAPIURL, DefaultSource and DefaultUserAgent.)
func TestDefaultAPIURLAndIdentityHeadersOnTheWire(t *testing.T) {
	t.Parallel()
	var sent []*http.Request
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent = append(sent, r)
		return nil, errors.New("recorded, not sent")
	})}
	c, err := NewClient(WithAPIKey("k"), WithHTTPClient(hc), WithRetryPolicy(RetryPolicy{MaxRetries: -1}))
	require.NoError(t, err)
	_, _, err = c.Sandboxes.Get(t.Context(), "abc")
	require.Error(t, err)
	require.Len(t, sent, 1, "one attempt: retries are off")
	r := sent[0]
	assert.Equal(t, "GET", r.Method)
	assert.Equal(t, "https://app.daytona.io/api/sandbox/abc", r.URL.String())
	assert.Equal(t, "daytona-worker-go", r.Header.Get("X-Daytona-Source"))
	assert.Equal(t, "daytona-worker-go/0.190.0", r.Header.Get("User-Agent"))
}

// decodeBody decodes a handler's JSON request body.
func decodeBody[T any](t *testing.T, r *http.Request) T {
	var v T
	require.NoError(t, json.NewDecoder(r.Body).Decode(&v))
	return v
}

func TestHeadersOnAPIAndToolbox(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	check := func(r *http.Request) {
		assert.Equal(t, "Bearer "+testKey, r.Header.Get("Authorization"))
		assert.Equal(t, "0.190.0", r.Header.Get("X-Daytona-SDK-Version"))
		assert.Equal(t, DefaultSource, r.Header.Get("X-Daytona-Source"))
		assert.Empty(t, r.Header.Get("X-Daytona-Organization-ID"), "an API key names its organization")
		assert.Equal(t, DefaultUserAgent, r.Header.Get("User-Agent"))
		assert.Empty(t, r.Header.Get("X-Daytona-Skip-Last-Activity-Update"))
	}
	f.handle("GET /api/sandbox/{id}", func(w http.ResponseWriter, r *http.Request) {
		check(r)
		writeJSON(w, 200, sandboxJSON(r.PathValue("id"), "n", StateStarted))
	})
	f.handle("GET /toolbox/sb-1/work-dir", func(w http.ResponseWriter, r *http.Request) {
		check(r)
		writeJSON(w, 200, map[string]string{"dir": "/home/daytona"})
	})
	sb, resp, err := f.c.Sandboxes.Get(t.Context(), "abc")
	require.NoError(t, err)
	assert.Equal(t, "abc", sb.ID)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, SandboxRef{ID: "abc", ToolboxProxyURL: "https://proxy.example/toolbox"}, sb.Ref())
	dir, _, err := f.c.Toolbox.WorkDir(t.Context(), f.ref)
	require.NoError(t, err)
	assert.Equal(t, "/home/daytona", dir)
}

func TestCreateBody(t *testing.T) {
	t.Parallel()
	f := newFixture(t, WithTarget("eu"))
	var got map[string]any
	var calls atomic.Int32
	f.handle("POST /api/sandbox", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		require.NoError(t, json.NewDecoder(r.Body).Decode(&got))
		writeJSON(w, 200, sandboxJSON("id1", "paperclip-create-1", StateStarted))
	})
	sb, _, err := f.c.Sandboxes.Create(t.Context(), &CreateSandboxRequest{
		Name: "paperclip-create-1", Image: "node:22-slim", Labels: map[string]string{"a": "b"},
		Env: map[string]string{"X": "1"}, CPU: 2, Memory: 4, Disk: 10,
		AutoStopInterval: new(15), AutoArchiveInterval: new(60), AutoDeleteInterval: new(0), TTLMinutes: new(30),
	})
	require.NoError(t, err)
	assert.Equal(t, "id1", sb.ID)
	assert.Equal(t, map[string]any{
		"name": "paperclip-create-1", "labels": map[string]any{"a": "b"}, "env": map[string]any{"X": "1"},
		"target": "eu", "cpu": float64(2), "memory": float64(4), "disk": float64(10),
		"autoStopInterval": float64(15), "autoArchiveInterval": float64(60), "autoDeleteInterval": float64(0),
		"ttlMinutes": float64(30), "buildInfo": map[string]any{"dockerfileContent": "FROM node:22-slim\n"},
	}, got)

	for _, bad := range []*CreateSandboxRequest{
		{Image: "x", Snapshot: "y"},
		{Snapshot: "y", CPU: 2},
		{AutoStopInterval: new(-1)},
		{TTLMinutes: new(0)},
	} {
		_, _, err := f.c.Sandboxes.Create(t.Context(), bad)
		assert.ErrorIs(t, err, ErrInvalidArgument)
	}
	assert.EqualValues(t, 1, calls.Load())
}

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	f := newFixture(t, WithRetryPolicy(RetryPolicy{MaxRetries: -1}))
	cases := []struct {
		code  int
		body  string
		is    []error
		isNot []error
	}{
		{404, `{"statusCode":404,"error":"Not Found","message":"Sandbox with ID or name x not found"}`, []error{ErrNotFound}, []error{ErrContainerMissing, ErrConflict}},
		{409, `{"statusCode":409,"message":"Sandbox state change in progress"}`, []error{ErrConflict}, nil},
		{400, `{"statusCode":400,"message":"Total CPU limit exceeded. Maximum allowed: 10.\nTo increase..."}`, []error{ErrBadRequest, ErrQuota}, nil},
		{400, `{"statusCode":400,"message":"Sandbox is not stopped"}`, []error{ErrBadRequest}, []error{ErrQuota}},
		{401, `{"statusCode":401,"message":"Unauthorized"}`, []error{ErrUnauthorized}, nil},
		{403, `{"statusCode":403,"message":"Organization is suspended"}`, []error{ErrForbidden}, nil},
		{410, `{"statusCode":410,"message":"gone: command has already completed with exit code 0","code":"GONE"}`, []error{ErrGone}, nil},
		{408, `{"statusCode":408,"message":"request timeout: command execution timeout","code":"REQUEST_TIMEOUT"}`, []error{ErrTimeout}, nil},
		{500, `An unexpected error occurred.`, []error{ErrServer}, []error{ErrNotFound}},
		{422, `{"message":["a must be x","b must be y"]}`, []error{ErrBadRequest}, []error{ErrDiskFull}},
		{400, `{"errors":["/home/x: write: No space left on device"],"files":[]}`, []error{ErrBadRequest, ErrDiskFull}, []error{ErrQuota}},
		{404, ``, []error{ErrNotFound}, nil},
		{404, `{"statusCode":404,"message":"not found: sandbox container not found: not found: failed to inspect sandbox container abc: Error response from daemon: No such container: abc","code":"NOT_FOUND"}`,
			[]error{ErrNotFound, ErrContainerMissing}, nil},
		{404, `{"statusCode":404,"message":"not found: session not found","code":"NOT_FOUND"}`, []error{ErrNotFound}, []error{ErrContainerMissing}},
	}
	for i, tc := range cases {
		path := fmt.Sprintf("/toolbox/sb-1/process/session/case%d", i)
		f.handle("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.code)
			_, _ = io.WriteString(w, tc.body)
		})
		_, _, err := f.c.Toolbox.GetSession(t.Context(), f.ref, fmt.Sprintf("case%d", i))
		require.Error(t, err, "case %d", i)
		for _, want := range tc.is {
			assert.ErrorIs(t, err, want, "case %d: %v", i, err)
		}
		for _, not := range tc.isNot {
			assert.NotErrorIs(t, err, not, "case %d: %v", i, err)
		}
		var er *ErrorResponse
		require.ErrorAs(t, err, &er)
		assert.Equal(t, tc.code, er.StatusCode)
		assert.Equal(t, "/process/session/{sessionId}", er.Route)
	}
	var er *ErrorResponse
	_, _, err := f.c.Toolbox.GetSession(t.Context(), f.ref, "case9")
	require.ErrorAs(t, err, &er)
	assert.Equal(t, "a must be x, b must be y", er.Message)
}

func TestHugeAndOddBodies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, WithRetryPolicy(RetryPolicy{MaxRetries: -1}))
	f.c.jsonLimit = 2 << 20
	big := strings.Repeat("x", 3<<20)
	f.handle("GET /api/sandbox/huge-error", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		_, _ = io.WriteString(w, big)
	})
	f.handle("GET /api/sandbox/bad-json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id": "x", "state": `)
	})
	f.handle("GET /api/sandbox/wrong-type", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"id": 5}`)
	})
	f.handle("GET /api/sandbox/huge-ok", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"id": "x", "name": "`)
		for range 3 {
			_, _ = io.WriteString(w, strings.Repeat("y", 1<<20))
		}
		_, _ = io.WriteString(w, `"}`)
	})
	f.handle("GET /api/sandbox/binary-error", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(502)
		_, _ = w.Write([]byte{0xff, 0xfe, 0x00, 'b', 'a', 'd'})
	})

	_, _, err := f.c.Sandboxes.Get(t.Context(), "huge-error")
	var er *ErrorResponse
	require.ErrorAs(t, err, &er)
	assert.Len(t, er.Message, 1<<20, "error bodies are read through a 1 MiB limit")
	assert.Less(t, len(err.Error()), 2048, "the error string stays short")

	_, _, err = f.c.Sandboxes.Get(t.Context(), "bad-json")
	assert.ErrorIs(t, err, ErrMalformedResponse)
	_, _, err = f.c.Sandboxes.Get(t.Context(), "wrong-type")
	assert.ErrorIs(t, err, ErrMalformedResponse)
	_, _, err = f.c.Sandboxes.Get(t.Context(), "huge-ok")
	assert.ErrorIs(t, err, ErrMalformedResponse)
	assert.Contains(t, err.Error(), "larger than")
	_, _, err = f.c.Sandboxes.Get(t.Context(), "binary-error")
	assert.ErrorIs(t, err, ErrServer)
}

func TestRetries(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var n429, n503, nCreate, nStart, nStartNoRA, nDown atomic.Int32
	f.handle("GET /api/sandbox/rl", func(w http.ResponseWriter, r *http.Request) {
		if n429.Add(1) <= 2 {
			w.Header().Set("Retry-After-authenticated", "7")
			apiError(w, 429, "Rate limit exceeded")
			return
		}
		writeJSON(w, 200, sandboxJSON("rl", "rl", StateStarted))
	})
	f.handle("GET /api/sandbox/flaky", func(w http.ResponseWriter, r *http.Request) {
		if n503.Add(1) <= 3 {
			w.WriteHeader(503)
			return
		}
		writeJSON(w, 200, sandboxJSON("flaky", "flaky", StateStarted))
	})
	f.handle("POST /api/sandbox", func(w http.ResponseWriter, r *http.Request) {
		nCreate.Add(1)
		w.Header().Set("Retry-After-sandbox-create", "1")
		apiError(w, 429, "Rate limit exceeded")
	})
	f.handle("POST /api/sandbox/s1/start", func(w http.ResponseWriter, r *http.Request) {
		if nStart.Add(1) == 1 {
			w.Header().Set("Retry-After-sandbox-lifecycle", "2")
			apiError(w, 429, "Rate limit exceeded")
			return
		}
		writeJSON(w, 200, sandboxJSON("s1", "s1", StateStarted))
	})
	f.handle("POST /api/sandbox/s2/start", func(w http.ResponseWriter, r *http.Request) {
		nStartNoRA.Add(1)
		w.WriteHeader(503)
	})
	f.handle("GET /api/sandbox/down", func(w http.ResponseWriter, r *http.Request) {
		nDown.Add(1)
		w.WriteHeader(503)
	})

	sb, resp, err := f.c.Sandboxes.Get(t.Context(), "rl")
	require.NoError(t, err)
	assert.Equal(t, "rl", sb.ID)
	assert.Equal(t, 3, resp.Attempts)
	assert.Equal(t, []time.Duration{7 * time.Second, 7 * time.Second}, f.sleepsSeen(), "Retry-After wins over the back-off")

	_, resp, err = f.c.Sandboxes.Get(t.Context(), "flaky")
	require.NoError(t, err)
	assert.Equal(t, 4, resp.Attempts)

	_, _, err = f.c.Sandboxes.Get(t.Context(), "down")
	assert.ErrorIs(t, err, ErrServer)
	assert.EqualValues(t, 4, nDown.Load(), "1 attempt + 3 retries")

	_, _, err = f.c.Sandboxes.Create(t.Context(), &CreateSandboxRequest{Name: "x"})
	var rl *RateLimitError
	require.ErrorAs(t, err, &rl)
	assert.ErrorIs(t, err, ErrRateLimited)
	assert.Equal(t, time.Second, rl.RetryAfter)
	assert.Equal(t, "sandbox-create", rl.Bucket)
	assert.EqualValues(t, 1, nCreate.Load(), "create is never retried")

	_, resp, err = f.c.Sandboxes.Start(t.Context(), "s1")
	require.NoError(t, err)
	assert.Equal(t, 2, resp.Attempts, "a lifecycle call refused with 429 + Retry-After is resent")

	_, _, err = f.c.Sandboxes.Start(t.Context(), "s2")
	assert.ErrorIs(t, err, ErrServer)
	assert.EqualValues(t, 1, nStartNoRA.Load(), "a 5xx on a POST is not retried")
}

func TestRetryRespectsDeadlineAndRetryAfterCap(t *testing.T) {
	t.Parallel()
	f := newFixture(t, WithRetryPolicy(RetryPolicy{MaxRetryAfter: 30 * time.Second}))
	var n atomic.Int32
	f.handle("GET /api/sandbox/{id}", func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Retry-After", r.PathValue("id"))
		apiError(w, 429, "Rate limit exceeded")
	})
	_, _, err := f.c.Sandboxes.Get(t.Context(), "120")
	assert.ErrorIs(t, err, ErrRateLimited)
	assert.EqualValues(t, 1, n.Load(), "a Retry-After above the cap is returned, not waited for")

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, _, err = f.c.Sandboxes.Get(ctx, "20")
	assert.ErrorIs(t, err, ErrRateLimited)
	assert.EqualValues(t, 2, n.Load(), "a wait beyond the caller's deadline is not started")
}

func TestContextDeadlineIsTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	f.handle("GET /api/sandbox/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, _, err := f.c.Sandboxes.Get(ctx, "slow")
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrTimeout)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	var te *TransportError
	assert.ErrorAs(t, err, &te)
}

func TestNoSecretsInErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, WithRetryPolicy(RetryPolicy{MaxRetries: -1}))
	const previewToken = "ul67qtv-jl6wb9z5o3eii-ljqt9qed6l"
	signed := f.srv.URL + "/signed/abcSIGNEDtoken123?token=querysecret987"
	f.handle("GET /api/sandbox/{id}/ports/{port}/preview-url", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]string{"sandboxId": "s", "url": "https://3000-s.proxy.example", "token": previewToken})
	})
	f.handle("GET /api/sandbox/{id}/ports/{port}/signed-preview-url", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"sandboxId": "s", "port": 3000, "url": signed, "token": "abcSIGNEDtoken123"})
	})
	// Echo every credential the request carried, and the learned tokens.
	echo := func(w http.ResponseWriter, r *http.Request) {
		apiError(w, 400, fmt.Sprintf("bad auth header %q for %s (preview %s, signed %s, x-daytona-preview-token: %s) Bearer %s",
			r.Header.Get("Authorization"), r.URL.String(), previewToken, signed, previewToken, "otherBearerSecret"))
	}
	f.handle("GET /api/sandbox/echo", echo)
	f.handle("GET /api/sandbox/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, signed+"&DAYTONA_SANDBOX_AUTH_KEY="+testKey, http.StatusFound)
	})
	f.handle("GET /signed/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a redirect was followed to %s", r.URL.Path)
	})
	f.handle("GET /toolbox/sb-1/files/download", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(403)
		fmt.Fprintf(w, "denied for key=%s token=%s Authorization: %s", testKey, previewToken, r.Header.Get("Authorization"))
	})

	_, _, err := f.c.Sandboxes.PreviewURL(t.Context(), "s", 3000)
	require.NoError(t, err)
	_, _, err = f.c.Sandboxes.SignedPreviewURL(t.Context(), "s", 3000, 60)
	require.NoError(t, err)

	var errs []error
	_, _, err = f.c.Sandboxes.Get(t.Context(), "echo")
	errs = append(errs, err)
	_, _, err = f.c.Sandboxes.Get(t.Context(), "redirect")
	assert.ErrorIs(t, err, ErrRedirect)
	errs = append(errs, err)
	_, _, err = f.c.Files.Download(t.Context(), f.ref, "/x")
	assert.ErrorIs(t, err, ErrForbidden)
	errs = append(errs, err)
	// A transport error against a URL carrying a token.
	bad := SandboxRef{ID: "sb-1", ToolboxProxyURL: "http://127.0.0.1:1/toolbox?token=" + testKey}
	_, _, err = f.c.Toolbox.WorkDir(t.Context(), bad)
	errs = append(errs, err)

	for _, err := range errs {
		require.Error(t, err)
		s := err.Error()
		for _, secret := range []string{testKey, previewToken, "abcSIGNEDtoken123", "querysecret987", "otherBearerSecret", signed} {
			assert.NotContains(t, s, secret)
		}
		var er *ErrorResponse
		if errors.As(err, &er) {
			for _, secret := range []string{testKey, previewToken, "abcSIGNEDtoken123", "querysecret987"} {
				assert.NotContains(t, er.Message, secret)
				assert.NotContains(t, er.Reason, secret)
			}
		}
	}
	assert.Contains(t, errs[0].Error(), "REDACTED")
}

func TestListPaginationAndFilter(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var queries []string
	f.handle("GET /api/sandbox", func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.RawQuery)
		var labels map[string]string
		require.NoError(t, json.Unmarshal([]byte(r.URL.Query().Get("labels")), &labels))
		assert.Equal(t, map[string]string{"paperclip-provider": "daytona"}, labels)
		switch r.URL.Query().Get("cursor") {
		case "":
			dead := sandboxJSON("d", "DESTROYED_x_1", StateStarted)
			dead["desiredState"] = "destroyed"
			writeJSON(w, 200, map[string]any{"items": []any{sandboxJSON("a", "a", StateStarted), dead}, "nextCursor": "c1"})
		case "c1":
			writeJSON(w, 200, map[string]any{"items": []any{}, "nextCursor": "c2"})
		case "c2":
			writeJSON(w, 200, map[string]any{"items": []any{sandboxJSON("b", "b", StateStopped)}, "nextCursor": nil})
		}
	})
	all, err := f.c.Sandboxes.ListAll(t.Context(), &ListOptions{Labels: map[string]string{"paperclip-provider": "daytona"}})
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.Equal(t, "a", all[0].ID)
	assert.Equal(t, "b", all[1].ID)
	assert.Len(t, queries, 3)
	assert.Contains(t, queries[0], "limit=200")

	f2 := newFixture(t)
	f2.handle("GET /api/sandbox", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"items": []any{}, "nextCursor": "same"})
	})
	_, err = f2.c.Sandboxes.ListAll(t.Context(), nil)
	assert.ErrorIs(t, err, ErrMalformedResponse, "a repeated cursor ends the listing")
}

func TestSettersAcceptAny2xx(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var paths []string
	var mu sync.Mutex
	h := func(code int, body bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			paths = append(paths, r.URL.Path)
			mu.Unlock()
			if body {
				writeJSON(w, code, sandboxJSON("s", "s", StateStarted))
				return
			}
			w.WriteHeader(code)
		}
	}
	f.handle("POST /api/sandbox/s/autostop/{n}", h(201, true))
	f.handle("POST /api/sandbox/s/autoarchive/{n}", h(200, false))
	f.handle("POST /api/sandbox/s/autodelete/{n}", h(204, false))
	f.handle("POST /api/sandbox/s/last-activity", h(201, false))
	sb, _, err := f.c.Sandboxes.SetAutoStopInterval(t.Context(), "s", 30)
	require.NoError(t, err)
	assert.Equal(t, "s", sb.ID)
	_, _, err = f.c.Sandboxes.SetAutoArchiveInterval(t.Context(), "s", 0)
	require.NoError(t, err)
	_, _, err = f.c.Sandboxes.SetAutoDeleteInterval(t.Context(), "s", -1)
	require.NoError(t, err)
	_, err = f.c.Sandboxes.UpdateLastActivity(t.Context(), "s")
	require.NoError(t, err)
	assert.Equal(t, []string{"/api/sandbox/s/autostop/30", "/api/sandbox/s/autoarchive/0", "/api/sandbox/s/autodelete/-1", "/api/sandbox/s/last-activity"}, paths)
	_, _, err = f.c.Sandboxes.SetAutoStopInterval(t.Context(), "s", -5)
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

func TestLifecycleCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	seen := map[string]string{}
	var mu sync.Mutex
	rec := func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method+" "+r.URL.Path] = r.URL.RawQuery
		mu.Unlock()
		if r.Method == "PUT" {
			var b map[string]map[string]string
			_ = json.NewDecoder(r.Body).Decode(&b)
			sb := sandboxJSON("s", "s", StateStarted)
			sb["labels"] = b["labels"]
			writeJSON(w, 200, sb)
			return
		}
		writeJSON(w, 200, sandboxJSON("s", "s", StateStarted))
	}
	for _, p := range []string{"POST /api/sandbox/s/stop", "POST /api/sandbox/s/recover", "POST /api/sandbox/s/archive", "PUT /api/sandbox/s/labels", "POST /api/sandbox/my%2Fname/start"} {
		f.handle(p, rec)
	}
	f.handle("GET /api/sandbox/s/toolbox-proxy-url", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]string{"url": "https://proxy/toolbox"})
	})
	_, _, err := f.c.Sandboxes.Stop(t.Context(), "s", true)
	require.NoError(t, err)
	_, _, err = f.c.Sandboxes.Recover(t.Context(), "s", true)
	require.NoError(t, err)
	_, _, err = f.c.Sandboxes.Archive(t.Context(), "s")
	require.NoError(t, err)
	labels, _, err := f.c.Sandboxes.ReplaceLabels(t.Context(), "s", map[string]string{"k": "v"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"k": "v"}, labels)
	u, _, err := f.c.Sandboxes.ToolboxProxyURL(t.Context(), "s")
	require.NoError(t, err)
	assert.Equal(t, "https://proxy/toolbox", u)
	_, _, err = f.c.Sandboxes.Start(t.Context(), "my/name")
	require.NoError(t, err, "names are path-escaped")
	assert.Equal(t, "force=true", seen["POST /api/sandbox/s/stop"])
	assert.Equal(t, "skipStart=true", seen["POST /api/sandbox/s/recover"])
	_, _, err = f.c.Sandboxes.Get(t.Context(), "")
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

func TestWaitHelpers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var mu sync.Mutex
	states := map[string][]SandboxState{
		"boot":  {StateCreating, StateStarting, StateStarted},
		"fail":  {StateStarting, StateError},
		"gone":  {StateStarted, StateDestroying},
		"stuck": {StateStarting},
	}
	f.handle("GET /api/sandbox/{id}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		id := r.PathValue("id")
		seq := states[id]
		if len(seq) == 0 {
			apiError(w, 404, "Sandbox with ID or name "+id+" not found")
			return
		}
		st := seq[0]
		if len(seq) > 1 || id == "gone" {
			states[id] = seq[1:]
		}
		sb := sandboxJSON(id, id, st)
		if st == StateError {
			sb["errorReason"] = "not found: failed to inspect sandbox container fail: Error response from daemon: No such container: fail"
		}
		writeJSON(w, 200, sb)
	})
	f.handle("DELETE /api/sandbox/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "never" {
			apiError(w, 404, "not found")
			return
		}
		sb := sandboxJSON("gone", "DESTROYED_gone_1", StateStarted)
		sb["desiredState"] = "destroyed"
		writeJSON(w, 200, sb)
	})

	sb, err := f.c.Sandboxes.WaitUntilStarted(t.Context(), "boot")
	require.NoError(t, err)
	assert.Equal(t, StateStarted, sb.State)

	_, err = f.c.Sandboxes.WaitUntilStarted(t.Context(), "fail")
	var se *SandboxStateError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, StateError, se.State)
	assert.ErrorIs(t, err, ErrContainerMissing)
	assert.NotErrorIs(t, err, ErrTimeout)

	require.NoError(t, f.c.Sandboxes.DeleteAndWait(t.Context(), "gone-by-name"))
	require.NoError(t, f.c.Sandboxes.DeleteAndWait(t.Context(), "never"), "deleting an unknown sandbox succeeds")

	// The deadline case: the caller's deadline passes while the sandbox is
	// still starting. The deadline passes when the server has answered
	// twice, not after a wall-clock interval: a short real timeout could
	// pass before the first answer on a loaded machine, and the wait would
	// then rightly report no state at all.
	ctx := newManualDeadline(t.Context())
	var polls atomic.Int32
	fast := newFixture(t)
	fast.handle("GET /api/sandbox/{id}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, sandboxJSON("stuck", "stuck", StateStarting))
		if polls.Add(1) == 2 {
			ctx.expire()
		}
	})
	// Real sleeping poller for the deadline case.
	fast.c.retry.Sleep = sleepCtx
	_, err = fast.c.Sandboxes.WaitUntilStarted(ctx, "stuck")
	require.ErrorAs(t, err, &se)
	assert.ErrorIs(t, err, ErrTimeout)
	assert.Equal(t, StateStarting, se.State)
	assert.GreaterOrEqual(t, polls.Load(), int32(2), "polled until the deadline")

	_, err = f.c.Sandboxes.WaitUntilStopped(t.Context(), "unknown")
	require.NoError(t, err, "an ephemeral sandbox deleted by stop ends the wait")
}

func TestMissingContainerReason(t *testing.T) {
	t.Parallel()
	const id = "3c1d"
	exact := "not found: failed to inspect sandbox container 3c1d: Error response from daemon: No such container: 3c1d"
	assert.True(t, IsMissingContainerReason(exact, id))
	assert.True(t, IsMissingContainerReason(exact, ""))
	assert.False(t, IsMissingContainerReason(exact, "other"))
	assert.False(t, IsMissingContainerReason(exact+" ", id))
	assert.False(t, IsMissingContainerReason("not found: failed to inspect sandbox container 3c1d: Error response from daemon: No such container: 9", ""))
	assert.False(t, IsMissingContainerReason("Timeout while starting sandbox", id))
	sb := &Sandbox{ID: id, State: StateError, ErrorReason: exact}
	assert.True(t, sb.ContainerMissing())
	sb.State = StateStopped
	assert.False(t, sb.ContainerMissing())
}

// manualDeadline is a context whose deadline passes when the test calls
// expire, so a deadline case depends on what the code has done, not on how
// fast a loaded machine runs it.
type manualDeadline struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newManualDeadline(parent context.Context) *manualDeadline {
	return &manualDeadline{Context: parent, done: make(chan struct{})}
}

func (c *manualDeadline) expire() { c.once.Do(func() { close(c.done) }) }

func (c *manualDeadline) Done() <-chan struct{} { return c.done }

func (c *manualDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
