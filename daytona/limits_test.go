package daytona

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The client's bounds, each at the bound and one past it (docs/testing.md,
// "Limits at the limit"). An argument out of range is refused before any
// request (the fixture fails the test on an unexpected request).
func TestClientLimitsAtTheLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var lists, previews, setters atomic.Int32
	f.handle("GET /api/sandbox", func(w http.ResponseWriter, r *http.Request) {
		lists.Add(1)
		writeJSON(w, 200, map[string]any{"items": []any{}})
	})
	f.handle("GET /api/sandbox/{id}/ports/{port}/preview-url", func(w http.ResponseWriter, r *http.Request) {
		previews.Add(1)
		writeJSON(w, 200, map[string]any{"url": "https://p.example", "token": "tok-" + r.PathValue("port")})
	})
	f.handle("GET /api/sandbox/{id}/ports/{port}/signed-preview-url", func(w http.ResponseWriter, r *http.Request) {
		previews.Add(1)
		writeJSON(w, 200, map[string]any{"url": "https://p.example/s", "token": "stok-" + r.PathValue("port"), "port": 1})
	})
	var sentIntervals []string
	f.handle("POST /api/sandbox/{id}/{kind}/{interval}", func(w http.ResponseWriter, r *http.Request) {
		setters.Add(1)
		sentIntervals = append(sentIntervals, r.PathValue("kind")+"="+r.PathValue("interval"))
		w.WriteHeader(201)
	})
	ctx := t.Context()

	// List page size: 1 to 200 (0 = the server default).
	for limit, ok := range map[int]bool{-1: false, 0: true, 1: true, 200: true, 201: false} {
		_, _, err := f.c.Sandboxes.ListPage(ctx, &ListOptions{Limit: limit})
		if ok {
			require.NoError(t, err, "limit %d", limit)
		} else {
			require.ErrorIs(t, err, ErrInvalidArgument, "limit %d", limit)
		}
	}
	require.EqualValues(t, 3, lists.Load(), "refused limits send nothing")

	// Ports: 1 to 65535, for both preview calls.
	for port, ok := range map[int]bool{0: false, 1: true, 65535: true, 65536: false, -1: false} {
		_, _, err := f.c.Sandboxes.PreviewURL(ctx, "sb", port)
		_, _, serr := f.c.Sandboxes.SignedPreviewURL(ctx, "sb", port, 0)
		if ok {
			require.NoError(t, err, "port %d", port)
			require.NoError(t, serr, "port %d", port)
		} else {
			require.ErrorIs(t, err, ErrInvalidArgument, "port %d", port)
			require.ErrorIs(t, serr, ErrInvalidArgument, "port %d", port)
		}
	}
	require.EqualValues(t, 4, previews.Load())

	// Intervals (minutes): auto-stop, auto-archive and TTL from 0;
	// auto-delete from -1, lower values sent as -1.
	for _, c := range []struct {
		name string
		call func(int) error
		min  int
	}{
		{"autostop", func(m int) error { _, _, err := f.c.Sandboxes.SetAutoStopInterval(ctx, "sb", m); return err }, 0},
		{"autoarchive", func(m int) error { _, _, err := f.c.Sandboxes.SetAutoArchiveInterval(ctx, "sb", m); return err }, 0},
	} {
		require.NoError(t, c.call(c.min), c.name)
		require.ErrorIs(t, c.call(c.min-1), ErrInvalidArgument, c.name)
	}
	_, _, err := f.c.Sandboxes.SetTTL(ctx, "sb", -1)
	require.ErrorIs(t, err, ErrInvalidArgument)
	for _, m := range []int{0, -1, -2} {
		_, _, err := f.c.Sandboxes.SetAutoDeleteInterval(ctx, "sb", m)
		require.NoError(t, err)
	}
	require.Equal(t, []string{"autostop=0", "autoarchive=0", "autodelete=0", "autodelete=-1", "autodelete=-1"}, sentIntervals)
	require.EqualValues(t, 5, setters.Load())

	// File modes: one to four octal digits.
	for mode, ok := range map[string]bool{"0": true, "7": true, "8": false, "7777": true, "17777": false, "": false} {
		assert.Equal(t, ok, isOctal(mode), "mode %q", mode)
	}
}

// A JSON answer of exactly the limit decodes, with or without the newline
// most servers end it with; one byte more is refused as malformed, never
// decoded in part. (A value of limit+1 bytes used to pass: the byte read to
// tell a cut answer from a whole one was decoded as well.)
func TestJSONAnswerLimitAtTheLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, WithRetryPolicy(RetryPolicy{MaxRetries: -1}))
	const limit = 4096
	f.c.jsonLimit = limit
	answer := func(n int) string { // a sandbox DTO of exactly n bytes
		head := `{"id":"x","name":"`
		return head + strings.Repeat("n", n-len(head)-2) + `"}`
	}
	require.Len(t, answer(limit), limit)
	f.handle("GET /api/sandbox/{size}", func(w http.ResponseWriter, r *http.Request) {
		size, nl := strings.CutSuffix(r.PathValue("size"), "nl")
		var n int
		_, _ = fmt.Sscan(size, &n)
		_, _ = io.WriteString(w, answer(n))
		if nl {
			_, _ = io.WriteString(w, "\n")
		}
	})
	sb, _, err := f.c.Sandboxes.Get(t.Context(), fmt.Sprint(limit)+"nl")
	require.NoError(t, err)
	require.Len(t, sb.Name, limit-len(`{"id":"x","name":""}`))
	_, _, err = f.c.Sandboxes.Get(t.Context(), fmt.Sprint(limit))
	require.NoError(t, err)
	for _, over := range []string{fmt.Sprint(limit + 1), fmt.Sprint(limit+1) + "nl", fmt.Sprint(limit + 2)} {
		_, _, err = f.c.Sandboxes.Get(t.Context(), over)
		require.ErrorIs(t, err, ErrMalformedResponse, over)
		require.Contains(t, err.Error(), "larger than 4096 bytes", over)
	}
}

// Retries: exactly MaxRetries after the first attempt; a Retry-After equal
// to MaxRetryAfter is waited for, one second more is not.
func TestRetryLimitsAtTheLimit(t *testing.T) {
	t.Parallel()
	for _, max := range []int{1, 2} {
		f := newFixture(t, WithRetryPolicy(RetryPolicy{MaxRetries: max}))
		var n atomic.Int32
		f.handle("GET /api/sandbox/down", func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			w.WriteHeader(503)
		})
		_, _, err := f.c.Sandboxes.Get(t.Context(), "down")
		require.ErrorIs(t, err, ErrServer)
		require.EqualValues(t, 1+max, n.Load(), "MaxRetries %d", max)
	}

	// Every other read is refused with a Retry-After of the id's seconds.
	var n atomic.Int32
	retryAfterID := func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 1 {
			w.Header().Set("Retry-After", r.PathValue("id"))
			apiError(w, 429, "Rate limit exceeded")
			return
		}
		writeJSON(w, 200, sandboxJSON(r.PathValue("id"), "x", StateStarted))
	}
	f := newFixture(t, WithRetryPolicy(RetryPolicy{MaxRetryAfter: 30 * time.Second}))
	f.handle("GET /api/sandbox/{id}", retryAfterID)
	_, resp, err := f.c.Sandboxes.Get(t.Context(), "30")
	require.NoError(t, err, "a Retry-After of exactly the cap is waited for")
	require.Equal(t, 2, resp.Attempts)
	require.Equal(t, []time.Duration{30 * time.Second}, f.sleepsSeen())
	_, _, err = f.c.Sandboxes.Get(t.Context(), "31")
	require.ErrorIs(t, err, ErrRateLimited, "one second over the cap is returned")
	require.EqualValues(t, 3, n.Load())

	// The default cap is 60 s (sample-5 bug 29 made it 30 s) and the
	// default retry count 3.
	f = newFixture(t)
	n.Store(0)
	f.handle("GET /api/sandbox/{id}", retryAfterID)
	_, _, err = f.c.Sandboxes.Get(t.Context(), "60")
	require.NoError(t, err, "the default cap is waited for")
	require.Equal(t, []time.Duration{60 * time.Second}, f.sleepsSeen())
	_, _, err = f.c.Sandboxes.Get(t.Context(), "61")
	require.ErrorIs(t, err, ErrRateLimited, "one second over the default cap")
	var down atomic.Int32
	f.handle("GET /api/sandbox/down", func(w http.ResponseWriter, r *http.Request) {
		down.Add(1)
		w.WriteHeader(503)
	})
	_, _, err = f.c.Sandboxes.Get(t.Context(), "down")
	require.ErrorIs(t, err, ErrServer)
	require.EqualValues(t, 4, down.Load(), "the default: 3 retries after the first attempt")
}

// Retry-After in seconds is taken below 10^6 s; larger values are ignored
// (0: no hint) rather than waited for.
func TestRetryAfterParseAtTheLimit(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]time.Duration{"0": 0, "1": time.Second, "999999": 999999 * time.Second, "1000000": 0, "-1": 0} {
		d, _ := parseRetryAfter(http.Header{"Retry-After": {v}})
		require.Equal(t, want, d, v)
	}
}

// listOnePage answers every listing with one sandbox and nextCursor
// cursor, and counts the requests it answers.
func listOnePage(f *fixture, cursor string) *atomic.Int32 {
	var n atomic.Int32
	f.handle("GET /api/sandbox", func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		writeJSON(w, 200, map[string]any{"items": []any{sandboxJSON("a", "a", StateStarted)}, "nextCursor": cursor})
	})
	return &n
}

// A page whose nextCursor is "" (or null) is the last one: one request,
// not a second listing from the start. (Planted: "" taken as a cursor.)
func TestListEndsOnAnEmptyCursor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	n := listOnePage(f, "")
	all, err := f.c.Sandboxes.ListAll(t.Context(), nil)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.EqualValues(t, 1, n.Load())
}

// Status classes at their edges: 3xx is a redirect (a wrong apiUrl), 5xx
// a server error, and the codes next to them are neither. (Planted: <= 400
// for < 400 on the redirect class.)
func TestStatusClassesAtTheirEdges(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code             int
		redirect, server bool
	}{{299, false, false}, {300, true, false}, {399, true, false}, {400, false, false}, {499, false, false}, {500, false, true}, {599, false, true}} {
		e := &ErrorResponse{StatusCode: c.code}
		assert.Equal(t, c.redirect, errors.Is(e, ErrRedirect), "%d redirect", c.code)
		assert.Equal(t, c.server, errors.Is(e, ErrServer), "%d server", c.code)
	}
}

// A server that hands out the same cursor again would be listed forever:
// the listing ends after the page that repeats it, with "cursor repeated",
// two requests in, not after 10,000 pages. (Sample-6 bug 29: the cursor
// not recorded.)
func TestListEndsOnARepeatedCursor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	n := listOnePage(f, "c1")
	_, err := f.c.Sandboxes.ListAll(t.Context(), nil)
	require.ErrorIs(t, err, ErrMalformedResponse)
	require.ErrorContains(t, err, "cursor repeated")
	require.EqualValues(t, 2, n.Load())
}

// The client takes 200 to 299 as success, and a 300 as the redirect it
// is, never as an answer to decode. (Found by make mutate: <= 300.)
func TestSuccessEndsAt299(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.handle("GET /api/sandbox/{id}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("id"))
		writeJSON(w, code, sandboxJSON("a", "a", StateStarted))
	})
	sb, _, err := f.c.Sandboxes.Get(t.Context(), "299")
	require.NoError(t, err)
	require.Equal(t, "a", sb.ID)
	_, _, err = f.c.Sandboxes.Get(t.Context(), "300")
	require.ErrorIs(t, err, ErrRedirect)
}

// An idempotent call is retried after 502, 503 and 504 alike; 500 and
// 501 are not retried. (Planted: 504 dropped from the retryable codes.)
func TestRetryableStatusCodes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var n atomic.Int32
	f.handle("GET /api/sandbox/{code}", func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 1 {
			var code int
			_, _ = fmt.Sscan(r.PathValue("code"), &code)
			w.WriteHeader(code)
			return
		}
		writeJSON(w, 200, sandboxJSON("s", "s", StateStarted))
	})
	for code, retried := range map[int]bool{502: true, 503: true, 504: true, 500: false, 501: false} {
		n.Store(0)
		_, resp, err := f.c.Sandboxes.Get(t.Context(), fmt.Sprint(code))
		if retried {
			require.NoError(t, err, "%d", code)
			require.Equal(t, 2, resp.Attempts, "%d", code)
		} else {
			require.Error(t, err, "%d", code)
			require.EqualValues(t, 1, n.Load(), "%d", code)
		}
	}
}

// A remembered secret (a preview token) is redacted from later errors
// from 4 characters on; a shorter one is too likely to match ordinary
// text. (Planted: <= 4 for < 4.)
func TestRememberedSecretLengthAtTheLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.c.rememberSecret("wxyz")
	f.c.rememberSecret("abc")
	got := f.c.redact("token wxyz and abc")
	assert.NotContains(t, got, "wxyz")
	assert.Contains(t, got, "abc")
}

// TestStatusSentinelsByCode: which sentinel each status names, for every
// status the worker tells apart and its neighbours (a message-free
// answer: the quota, container, disk and session sentinels need their
// texts and match none). A timeout is 408 or 504 and no other code; 502
// is a server error, not a timeout. (Planted: 504 swapped for 502.)
func TestStatusSentinelsByCode(t *testing.T) {
	t.Parallel()
	codes := []int{400, 401, 403, 404, 407, 408, 409, 410, 422, 429, 500, 502, 503, 504}
	want := map[error][]int{
		ErrBadRequest:   {400, 422},
		ErrUnauthorized: {401},
		ErrForbidden:    {403},
		ErrNotFound:     {404},
		ErrTimeout:      {408, 504},
		ErrConflict:     {409},
		ErrGone:         {410},
		ErrRateLimited:  {429},
		ErrServer:       {500, 502, 503, 504},
		ErrQuota:        nil, ErrContainerMissing: nil, ErrDiskFull: nil, ErrSessionEnded: nil, ErrRedirect: nil,
	}
	for sentinel, in := range want {
		for _, code := range codes {
			e := &ErrorResponse{StatusCode: code}
			assert.Equal(t, slices.Contains(in, code), errors.Is(e, sentinel), "%d is %v", code, sentinel)
		}
	}
	assert.ErrorIs(t, &ErrorResponse{StatusCode: 400, Code: "REQUEST_TIMEOUT"}, ErrTimeout, "the code names a timeout too")
}

// The default back-offs: a state poll starts at 100 ms and grows by a
// tenth up to 1 s, never randomised and never giving up on its own (the
// caller's deadline is the budget); a retry starts around 250 ms (±50 %)
// and grows up to 5 s, also without an elapsed-time limit of its own.
func TestDefaultBackOffs(t *testing.T) {
	t.Parallel()
	poll := defaultPollBackOff()
	poll.Reset()
	want := 100 * time.Millisecond
	for i := range 40 {
		got := poll.NextBackOff()
		require.InDelta(t, float64(want), float64(got), float64(time.Millisecond), "poll %d", i)
		want = min(time.Duration(float64(want)*1.1), time.Second)
	}
	require.Equal(t, time.Second, poll.NextBackOff(), "capped at 1 s")

	retry := defaultRetryBackOff()
	retry.Reset()
	first := retry.NextBackOff()
	require.GreaterOrEqual(t, first, 125*time.Millisecond)
	require.LessOrEqual(t, first, 375*time.Millisecond)
	var last time.Duration
	for range 60 {
		last = retry.NextBackOff()
		require.NotEqual(t, backoff.Stop, last, "no elapsed-time limit")
	}
	require.GreaterOrEqual(t, last, 2500*time.Millisecond)
	require.LessOrEqual(t, last, 7500*time.Millisecond, "capped at 5 s ±50 %")
}
