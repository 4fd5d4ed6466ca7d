package daytonatest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptrace"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
)

// TestLatencyHoldsEveryPlane: API requests, toolbox requests and WebSocket
// upgrades are each handled only after the latency, measured between the
// emulator's own arrival and handling stamps (timers never fire early, so
// no load can make this fail).
func TestLatencyHoldsEveryPlane(t *testing.T) {
	const latency = 50 * time.Millisecond
	c := newTC(t, daytonatest.WithLatency(latency))
	sb := c.create(nil)
	before := time.Now()
	st, _ := c.get(sb.ID)
	require.Equal(t, http.StatusOK, st)
	c.session(sb.ID, "s")
	r := c.exec(sb.ID, "s", "echo hi", false)
	conn, err := c.dial(ctxT(t), sb.ID, "/process/session/s/command/"+r.CmdID+"/logs?follow=true")
	require.NoError(t, err)
	got, _, err := readAll(ctxT(t), conn)
	assert.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err))
	assert.Contains(t, string(got), "hi")

	reqs := settled(t, c)
	seen := map[string]bool{}
	for _, rec := range reqs {
		kind := rec.Plane
		if rec.WebSocket {
			kind = "websocket"
		}
		seen[kind] = true
		require.False(t, rec.Handled.IsZero(), "%s %s was handled", rec.Method, rec.Route)
		assert.GreaterOrEqual(t, rec.Handled.Sub(rec.Time), latency, "%s %s held for the latency", rec.Method, rec.Route)
	}
	assert.Equal(t, map[string]bool{"api": true, "toolbox": true, "websocket": true}, seen)
	get := reqs[1]
	require.Equal(t, "/sandbox/{sandboxIdOrName}", get.Route)
	assert.GreaterOrEqual(t, get.Handled.Sub(before), latency, "measured from the client's side too")
}

// settled waits until every logged request's handler returned (a
// WebSocket's after the client saw the close) and returns the log.
func settled(t *testing.T, c *tc) []daytonatest.Request {
	t.Helper()
	require.NoError(t, c.srv.Await(ctxT(t), func() bool {
		for _, rec := range c.srv.Requests() {
			if !rec.Done {
				return false
			}
		}
		return true
	}))
	return c.srv.Requests()
}

// heldRequest sends GET /sandbox on ctx against an emulator with an hour
// of latency and returns once the emulator has logged it; the channel
// yields the client's error.
func heldRequest(t *testing.T, c *tc, ctx context.Context) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", c.srv.URL()+"/sandbox", nil)
		req.Header.Set("Authorization", "Bearer "+c.srv.APIKey())
		resp, err := c.hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	require.NoError(t, c.srv.AwaitRequests(ctxT(t), "GET", "/sandbox", 1))
	return errc
}

// TestLatencyEndsWhenClientGoesAway: a request held for an hour ends (its
// handler returns, nothing is left waiting) as soon as the client gives
// up; the emulator's own log endpoint is not held meanwhile.
func TestLatencyEndsWhenClientGoesAway(t *testing.T) {
	c := newTC(t, daytonatest.WithLatency(time.Hour))
	ctx, cancel := context.WithCancel(ctxT(t))
	errc := heldRequest(t, c, ctx)

	entries := simRequests(t, c, "")
	require.Len(t, entries, 1, "the held request is logged on arrival; the log read is neither held nor logged")
	assert.Equal(t, float64(0), entries[0]["status"], "no reply yet")

	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	require.NoError(t, c.srv.Await(ctxT(t), func() bool { return c.srv.Requests()[0].Done }))
	rec := c.srv.Requests()[0]
	assert.True(t, rec.Handled.IsZero(), "never handled")
	assert.Zero(t, rec.Status)
}

// TestLatencyEndsWhenServerCloses: Close does not wait out an hour of
// latency (httptest's Close waits for every handler to return).
func TestLatencyEndsWhenServerCloses(t *testing.T) {
	c := newTC(t, daytonatest.WithLatency(time.Hour))
	errc := heldRequest(t, c, ctxT(t))
	closed := make(chan struct{})
	go func() {
		c.srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctxT(t).Done():
		t.Fatal("Close is waiting out the latency")
	}
	assert.Error(t, <-errc, "the held request got no reply")
	rec := c.srv.Requests()[0]
	assert.True(t, rec.Done)
	assert.True(t, rec.Handled.IsZero(), "held until the close, never handled")
	assert.Zero(t, rec.Status)
}

// TestRequestLogMarksNewConnections: NewConn agrees with the client's own
// view of its connections: the first request of a connection is new, a
// request on a kept-alive one is not.
func TestRequestLogMarksNewConnections(t *testing.T) {
	c := newTC(t)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c.hc = &http.Client{Transport: tr}
	var reused []bool
	send := func() {
		t.Helper()
		ctx := httptrace.WithClientTrace(ctxT(t), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = append(reused, info.Reused) },
		})
		resp, _, err := c.req(ctx, "GET", c.srv.URL()+"/sandbox", nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	send()
	send()
	tr.CloseIdleConnections()
	send()
	require.Equal(t, []bool{false, true, false}, reused, "the client reused its connection once")

	reqs := c.srv.Requests()
	require.Len(t, reqs, 3)
	for i, rec := range reqs {
		assert.Equal(t, !reused[i], rec.NewConn, "request %d", i)
	}
	assert.Equal(t, 2, c.srv.NewConnections())

	c.srv.ResetRequests()
	send()
	assert.Equal(t, 0, c.srv.NewConnections(), "a warm connection opens none")
}

// simRequests reads URL()+SimRequestsPath+query with the API key.
func simRequests(t *testing.T, c *tc, query string) []map[string]any {
	t.Helper()
	resp, b, err := c.req(ctxT(t), "GET", c.srv.URL()+daytonatest.SimRequestsPath+query, nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var out []map[string]any
	require.NoError(t, json.Unmarshal(b, &out), string(b))
	require.NotNil(t, out, "an array, never null: %s", b)
	return out
}

// TestSimRequestsEndpoint: the request log for out-of-process readers, in
// exactly the shape they parse.
func TestSimRequestsEndpoint(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	c.session(sb.ID, "s")
	r := c.exec(sb.ID, "s", "echo hi", false)
	conn, err := c.dial(ctxT(t), sb.ID, "/process/session/s/command/"+r.CmdID+"/logs?follow=true")
	require.NoError(t, err)
	_, _, err = readAll(ctxT(t), conn)
	assert.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err))
	st, _ := c.api("GET", "/nope", nil)
	require.Equal(t, http.StatusNotFound, st)

	reqs := settled(t, c)
	entries := simRequests(t, c, "")
	require.Len(t, entries, len(reqs), "its own reads are not logged")
	assert.Len(t, c.srv.Requests(), len(reqs))
	var ws bool
	for i, e := range entries {
		keys := make([]string, 0, len(e))
		for k := range e {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		require.Equal(t, []string{"method", "newConn", "route", "sandbox", "status", "webSocket"}, keys)
		rec := reqs[i]
		assert.Equal(t, map[string]any{
			"method": rec.Method, "route": rec.Route, "status": float64(rec.Status),
			"newConn": rec.NewConn, "webSocket": rec.WebSocket, "sandbox": rec.Sandbox,
		}, e, "entry %d", i)
		ws = ws || rec.WebSocket
	}
	assert.True(t, ws, "the follow upgrade is in the log")
	assert.Equal(t, "/process/session/{sessionId}/exec", entries[2]["route"])
	assert.Equal(t, sb.ID, entries[2]["sandbox"])
	assert.Equal(t, true, entries[0]["newConn"])

	assert.Equal(t, entries[2:], simRequests(t, c, "?since=2"))
	assert.Empty(t, simRequests(t, c, "?since=1000"))
	// since counts every entry ever logged: after a reset it still skips
	// exactly what a reader has already seen.
	c.srv.ResetRequests()
	c.api("GET", "/sandbox", nil)
	after := simRequests(t, c, "?since="+strconv.Itoa(len(entries)))
	require.Len(t, after, 1)
	assert.Equal(t, "/sandbox", after[0]["route"])
	assert.Equal(t, after, simRequests(t, c, ""))

	for _, tc := range []struct {
		name, method, query, auth string
		status                    int
	}{
		{"no key", "GET", "", "", http.StatusUnauthorized},
		{"wrong key", "GET", "", "Bearer nope", http.StatusUnauthorized},
		{"not GET", "POST", "", "", http.StatusMethodNotAllowed},
		{"since not a number", "GET", "?since=x", "", http.StatusBadRequest},
		{"since negative", "GET", "?since=-1", "", http.StatusBadRequest},
	} {
		hdr := map[string]string{}
		if tc.status == http.StatusUnauthorized {
			hdr["Authorization"] = tc.auth
		}
		resp, b, err := c.req(ctxT(t), tc.method, c.srv.URL()+daytonatest.SimRequestsPath+tc.query, nil, hdr)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.status, resp.StatusCode, "%s: %s", tc.name, b)
		e := decode[apiError](t, b)
		assert.Equal(t, tc.status, e.StatusCode, tc.name)
		assert.NotContains(t, string(b), c.srv.APIKey(), tc.name)
	}
}
