package daytonatest_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFaultStatusBodyHeaderTimes(t *testing.T) {
	c := newTC(t)
	h := c.srv.Inject(daytonatest.Fault{
		Method: "POST", Route: "/sandbox", Times: 1, Status: 429,
		Header: http.Header{"Retry-After-sandbox-create": {"2"}},
	})
	resp, b, err := c.req(ctxT(t), "POST", c.srv.URL()+"/sandbox", map[string]any{}, nil)
	require.NoError(t, err)
	assert.Equal(t, 429, resp.StatusCode)
	assert.Equal(t, "2", resp.Header.Get("Retry-After-sandbox-create"))
	assert.Equal(t, 429, decode[apiError](t, b).StatusCode)
	assert.Equal(t, "Too Many Requests", decode[apiError](t, b).Error)
	assert.Empty(t, c.srv.Sandboxes(), "nothing was created")
	c.create(nil) // Times: 1 — the next one passes
	assert.Equal(t, 1, h.Hits())

	// A custom body, on a toolbox route given as a concrete path.
	sb := c.create(nil)
	c.srv.Inject(daytonatest.Fault{Route: "/work-dir", Status: 502, Body: "bad gateway"})
	st, b := c.tb(sb.ID, "GET", "/work-dir", nil)
	assert.Equal(t, 502, st)
	assert.Equal(t, "bad gateway", string(b))
	reqs := c.srv.Requests()
	assert.True(t, reqs[len(reqs)-1].Fault)
	c.srv.ClearFaults()
	st, _ = c.tb(sb.ID, "GET", "/work-dir", nil)
	assert.Equal(t, 200, st)
}

func TestFaultScopedToSandboxAndSkip(t *testing.T) {
	c := newTC(t)
	a := c.create(map[string]any{"name": "a"})
	b := c.create(map[string]any{"name": "b"})
	h := c.srv.Inject(daytonatest.Fault{Method: "GET", Route: "/sandbox/{sandboxIdOrName}", Sandbox: "b", Skip: 1, Status: 500})
	st, _ := c.get(a.ID)
	assert.Equal(t, 200, st)
	st, _ = c.get(b.ID) // skipped
	assert.Equal(t, 200, st)
	st, _ = c.get("b")
	assert.Equal(t, 500, st)
	h.Remove()
	st, _ = c.get("b")
	assert.Equal(t, 200, st)
}

func TestFaultHangDropGate(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)

	// Hang: the request blocks until the client gives up.
	c.srv.Inject(daytonatest.Fault{Method: "GET", Route: "/sandbox/{sandboxIdOrName}", Times: 1, Hang: true})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.req(ctx, "GET", c.srv.URL()+"/sandbox/"+sb.ID, nil, nil)
		errc <- err
	}()
	require.NoError(t, c.srv.AwaitRequests(ctxT(t), "GET", "/sandbox/{sandboxIdOrName}", 1))
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
	require.NoError(t, c.srv.Await(ctxT(t), func() bool {
		r := c.srv.Requests()
		return r[len(r)-1].Done
	}))
	r := c.srv.Requests()
	assert.Equal(t, 0, r[len(r)-1].Status, "no reply was sent")

	// Delay: answered normally, later.
	hd := c.srv.Inject(daytonatest.Fault{Method: "GET", Route: "/sandbox/{sandboxIdOrName}", Times: 1, Delay: 20 * time.Millisecond})
	st, _ := c.get(sb.ID)
	assert.Equal(t, 200, st)
	assert.Equal(t, 1, hd.Hits())

	// Drop: the connection closes without a reply.
	// (A POST: Go's transport would transparently retry a GET dropped on
	// a reused connection.)
	c.srv.Inject(daytonatest.Fault{Method: "POST", Route: "/sandbox/{sandboxId}/last-activity", Times: 1, Drop: true})
	_, _, err := c.req(ctxT(t), "POST", c.srv.URL()+"/sandbox/"+sb.ID+"/last-activity", nil, nil)
	require.Error(t, err)

	// Gate: held until the test releases it.
	gate := make(chan struct{})
	c.srv.Inject(daytonatest.Fault{Method: "POST", Route: "/sandbox/{sandboxIdOrName}/autostop/{interval}", Times: 1, Gate: gate})
	done := make(chan int, 1)
	go func() {
		resp, _, err := c.req(context.Background(), "POST", c.srv.URL()+"/sandbox/"+sb.ID+"/autostop/5", nil, nil)
		if err != nil {
			done <- -1
			return
		}
		done <- resp.StatusCode
	}()
	require.NoError(t, c.srv.AwaitRequests(ctxT(t), "POST", "/sandbox/{sandboxIdOrName}/autostop/{interval}", 1))
	select {
	case <-done:
		t.Fatal("gated request answered before release")
	default:
	}
	close(gate)
	assert.Equal(t, 201, <-done)
}

func TestFaultUncertainCreate(t *testing.T) {
	c := newTC(t)
	// Allocated, then an error reply.
	c.srv.Inject(daytonatest.Fault{Method: "POST", Route: "/sandbox", Sandbox: "half-1", Perform: true, Status: 500, Times: 1})
	st, _ := c.api("POST", "/sandbox", map[string]any{"name": "half-1"})
	assert.Equal(t, 500, st)
	st, got := c.get("half-1")
	require.Equal(t, 200, st)
	assert.Equal(t, "started", got.State)

	// Allocated, then no reply until the client gives up. The client gives
	// up once the allocation exists (a fixed short timeout could end the
	// request before the server saw it, on a loaded machine).
	c.srv.Inject(daytonatest.Fault{Method: "POST", Route: "/sandbox", Perform: true, Hang: true, Times: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.req(ctx, "POST", c.srv.URL()+"/sandbox", map[string]any{"name": "half-2"}, nil)
		errc <- err
	}()
	require.NoError(t, c.srv.Await(ctxT(t), func() bool {
		info, ok := c.srv.Sandbox("half-2")
		return ok && info.State == "started"
	}))
	select {
	case err := <-errc:
		t.Fatalf("a hung create answered: %v", err)
	default:
	}
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
	st, _ = c.get("half-2")
	assert.Equal(t, 200, st)
}

func TestFaultLostDeleteReply(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	c.srv.Inject(daytonatest.Fault{Method: "DELETE", Route: "/sandbox/{sandboxIdOrName}", Perform: true, Drop: true, Times: 1})
	_, _, err := c.req(ctxT(t), "DELETE", c.srv.URL()+"/sandbox/"+sb.ID, nil, nil)
	require.Error(t, err)
	require.NoError(t, c.srv.AwaitGone(ctxT(t), sb.ID))
	st, _ := c.api("DELETE", "/sandbox/"+sb.ID, nil)
	assert.Equal(t, 404, st)
}

func TestFaultLostExecReplyDispatchesOnce(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	c.session(sb.ID, "s")
	c.srv.Inject(daytonatest.Fault{Route: "/process/session/{sessionId}/exec", Perform: true, Status: 502, Times: 1})
	st, _ := c.tb(sb.ID, "POST", "/process/session/s/exec", map[string]any{"command": "echo once >> marker.txt", "runAsync": true})
	assert.Equal(t, 502, st)
	assert.Equal(t, 1, c.srv.CountDispatches("echo once"))
	ds := c.srv.Dispatches()
	res, err := c.srv.AwaitCommand(ctxT(t), sb.ID, "s", ds[len(ds)-1].CommandID)
	require.NoError(t, err)
	assert.Equal(t, 0, *res.ExitCode)
}

func TestFaultStartRefusedWhileStopping(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	release := c.srv.HoldTransitions(sb.ID)
	c.srv.Inject(daytonatest.Fault{Route: "/sandbox/{sandboxIdOrName}/start", RefuseStartWhileStopping: true, Times: 1})
	st, b := c.api("POST", "/sandbox/"+sb.ID+"/start", nil)
	assert.Equal(t, 409, st)
	assert.Equal(t, "Sandbox state change in progress", decode[apiError](t, b).Message)
	_, got := c.get(sb.ID)
	assert.Equal(t, "stopping", got.State)
	release()
	require.NoError(t, c.srv.AwaitState(ctxT(t), sb.ID, "stopped"))
	st, b = c.api("POST", "/sandbox/"+sb.ID+"/start", nil)
	require.Equal(t, 200, st)
	assert.Equal(t, "started", decode[sbDTO](t, b).State)
}

func TestFaultUnsettledSetter(t *testing.T) {
	c := newTC(t)
	sb := c.create(map[string]any{"autoDeleteInterval": 60})
	c.srv.Inject(daytonatest.Fault{Route: "/sandbox/{sandboxIdOrName}/autodelete/{interval}", Unsettled: true})
	st, b := c.api("POST", "/sandbox/"+sb.ID+"/autodelete/-1", nil)
	require.Equal(t, 201, st)
	assert.Equal(t, -1, decode[sbDTO](t, b).AutoDeleteInterval)
	_, got := c.get(sb.ID)
	assert.Equal(t, 60, got.AutoDeleteInterval, "never settles")
}

func TestFaultWebSockets(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	c.session(sb.ID, "s")
	r := c.exec(sb.ID, "s", `for i in $(seq 1 500); do echo "line $i"; done`, false)
	path := "/process/session/s/command/" + r.CmdID + "/logs?follow=true"
	full := []byte(*r.Output)
	require.Greater(t, len(full), 3000)
	route := "/process/session/{sessionId}/command/{commandId}/logs"

	// Closed abruptly after N bytes.
	c.srv.Inject(daytonatest.Fault{Route: route, WSClose: true, WSCloseAfterBytes: 1500, Times: 1})
	conn, err := c.dial(ctxT(t), sb.ID, path)
	require.NoError(t, err)
	got, _, err := readAll(ctxT(t), conn)
	require.Error(t, err)
	assert.Equal(t, websocket.StatusCode(-1), websocket.CloseStatus(err), "no close frame: %v", err)
	assert.Equal(t, full[:1500], got)

	// Close before the final data frame: a normal close, bytes missing.
	c.srv.Inject(daytonatest.Fault{Route: route, WSDropFinal: true, Times: 1})
	conn, err = c.dial(ctxT(t), sb.ID, path)
	require.NoError(t, err)
	got, sizes, err := readAll(ctxT(t), conn)
	assert.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err))
	require.NotEmpty(t, sizes)
	assert.Less(t, len(got), len(full))
	assert.True(t, bytes.HasPrefix(full, got))

	// Silent: upgraded, then nothing at all.
	c.srv.Inject(daytonatest.Fault{Route: route, WSSilent: true, Times: 1})
	conn, err = c.dial(ctxT(t), sb.ID, path)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, _, err = conn.Read(ctx)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	_ = conn.CloseNow()

	// And the next follow is healthy again.
	conn, err = c.dial(ctxT(t), sb.ID, path)
	require.NoError(t, err)
	got, _, err = readAll(ctxT(t), conn)
	assert.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err))
	assert.Equal(t, full, got)
}

func TestFaultStatusOnWebSocketRoute(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	c.session(sb.ID, "s")
	r := c.exec(sb.ID, "s", "echo hi", false)
	c.srv.Inject(daytonatest.Fault{Route: "/process/session/{sessionId}/command/{commandId}/logs", Status: 503, Times: 1})
	_, err := c.dial(ctxT(t), sb.ID, "/process/session/s/command/"+r.CmdID+"/logs?follow=true")
	require.Error(t, err)
}

func TestFaultBodyCut(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	info, _ := c.srv.Sandbox(sb.ID)
	data := bytes.Repeat([]byte("0123456789"), 10000)
	require.NoError(t, info.WriteFile("f.bin", data, 0o644))
	c.srv.Inject(daytonatest.Fault{Route: "/files/download", BodyCut: true, BodyCutAfterBytes: 5000, Times: 1})
	resp, b, err := c.req(ctxT(t), "GET", c.srv.ToolboxURL()+"/"+sb.ID+"/files/download?path=f.bin", nil, nil)
	require.Error(t, err, "the body is cut short")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, data[:5000], b)
	st, b := c.tb(sb.ID, "GET", "/files/download?path=f.bin", nil)
	assert.Equal(t, 200, st)
	assert.Equal(t, data, b)
}
