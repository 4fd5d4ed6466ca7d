package daytonatest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAuthRequired(t *testing.T) {
	c := newTC(t)
	for _, hdr := range []map[string]string{{"Authorization": ""}, {"Authorization": "Bearer wrong"}} {
		resp, b, err := c.req(ctxT(t), "GET", c.srv.URL()+"/sandbox", nil, hdr)
		require.NoError(t, err)
		assert.Equal(t, 401, resp.StatusCode)
		assert.NotContains(t, string(b), c.srv.APIKey())
	}
	sb := c.create(nil)
	resp, _, err := c.req(ctxT(t), "GET", c.srv.ToolboxURL()+"/"+sb.ID+"/work-dir", nil, map[string]string{"Authorization": ""})
	require.NoError(t, err)
	assert.Equal(t, 401, resp.StatusCode)
}

func TestZeroValueServerIsAHandler(t *testing.T) {
	var srv daytonatest.Server
	t.Cleanup(srv.Close)
	r, _ := http.NewRequest("GET", "/api/sandbox", nil)
	r.Header.Set("Authorization", "Bearer "+srv.APIKey())
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	assert.Equal(t, 200, w.Code)
	assert.JSONEq(t, `{"items":[],"nextCursor":null}`, w.Body.String())
}

func TestLifecycle(t *testing.T) {
	c := newTC(t)
	sb := c.create(map[string]any{"name": "life", "labels": map[string]string{"k": "v"}, "env": map[string]string{"A": "1"}})
	assert.Equal(t, "started", sb.State)
	assert.Equal(t, "life", sb.Name)
	assert.Equal(t, c.srv.ToolboxURL(), sb.ToolboxProxyURL)
	assert.True(t, strings.HasSuffix(sb.ToolboxProxyURL, daytonatest.ToolboxPrefix))
	assert.Equal(t, map[string]string{"A": "1"}, sb.Env)
	assert.Equal(t, 15, sb.AutoStopInterval)
	assert.Equal(t, 10080, sb.AutoArchiveInterval)
	assert.Equal(t, -1, sb.AutoDeleteInterval)

	// Stop: stopping is observable while held, then stopped.
	release := c.srv.HoldTransitions(sb.ID)
	st, b := c.api("POST", "/sandbox/life/stop", nil)
	require.Equal(t, 200, st, string(b))
	assert.Equal(t, "stopping", decode[sbDTO](t, b).State)
	_, got := c.get(sb.ID)
	assert.Equal(t, "stopping", got.State)
	assert.Equal(t, "stopped", got.DesiredState)
	// A start now is refused: a state change is in progress.
	st, b = c.api("POST", "/sandbox/life/start", nil)
	assert.Equal(t, 409, st)
	assert.Equal(t, "Sandbox state change in progress", decode[apiError](t, b).Message)
	release()
	require.NoError(t, c.srv.AwaitState(ctxT(t), sb.ID, "stopped"))

	st, b = c.api("POST", "/sandbox/"+sb.ID+"/stop", nil)
	assert.Equal(t, 400, st)
	assert.Equal(t, "Sandbox is not in a stoppable state", decode[apiError](t, b).Message)

	// Start waits server-side for started.
	st, b = c.api("POST", "/sandbox/"+sb.ID+"/start", nil)
	require.Equal(t, 200, st)
	assert.Equal(t, "started", decode[sbDTO](t, b).State)
	// Start on started is a no-op.
	st, _ = c.api("POST", "/sandbox/"+sb.ID+"/start", nil)
	assert.Equal(t, 200, st)

	// Archive needs stopped.
	st, b = c.api("POST", "/sandbox/"+sb.ID+"/archive", nil)
	assert.Equal(t, 400, st)
	assert.Equal(t, "Sandbox is not stopped", decode[apiError](t, b).Message)
	c.api("POST", "/sandbox/"+sb.ID+"/stop", nil)
	require.NoError(t, c.srv.AwaitState(ctxT(t), sb.ID, "stopped"))
	st, b = c.api("POST", "/sandbox/"+sb.ID+"/archive", nil)
	require.Equal(t, 200, st, string(b))
	require.NoError(t, c.srv.AwaitState(ctxT(t), sb.ID, "archived"))
	// Toolbox of an archived sandbox: no runner.
	st, b = c.tb(sb.ID, "GET", "/work-dir", nil)
	assert.Equal(t, 400, st)
	assert.Contains(t, decode[apiError](t, b).Message, "bad request: failed to get runner info")
	// Start from archived returns at once (restoring), then started.
	st, _ = c.api("POST", "/sandbox/"+sb.ID+"/start", nil)
	assert.Equal(t, 200, st)
	require.NoError(t, c.srv.AwaitState(ctxT(t), sb.ID, "started"))
}

func TestCreateHeldShowsCreating(t *testing.T) {
	c := newTC(t)
	release := c.srv.HoldTransitions("")
	sb := c.create(map[string]any{"name": "held"})
	assert.Equal(t, "creating", sb.State)
	st, b := c.tb(sb.ID, "GET", "/work-dir", nil)
	assert.Equal(t, 400, st)
	assert.Contains(t, string(b), "Is the Sandbox started?")
	release()
	require.NoError(t, c.srv.AwaitState(ctxT(t), "held", "started"))

	// A name can be held before the sandbox exists.
	releaseName := c.srv.HoldTransitions("by-name")
	assert.Equal(t, "creating", c.create(map[string]any{"name": "by-name"}).State)
	releaseName()
	require.NoError(t, c.srv.AwaitState(ctxT(t), "by-name", "started"))

	// Build path returns at once in pending_build. Held: otherwise the
	// first 5 ms transition may already have run when the reply is made,
	// on a loaded machine.
	releaseBuild := c.srv.HoldTransitions("built")
	st, b = c.api("POST", "/sandbox", map[string]any{"name": "built", "buildInfo": map[string]any{"dockerfileContent": "FROM alpine\n"}, "cpu": 2})
	require.Equal(t, 200, st, string(b))
	d := decode[sbDTO](t, b)
	assert.Equal(t, "pending_build", d.State)
	releaseBuild()
	require.NoError(t, c.srv.AwaitState(ctxT(t), d.ID, "started"))

	// Resources with a snapshot are refused.
	st, b = c.api("POST", "/sandbox", map[string]any{"snapshot": "x", "cpu": 2})
	assert.Equal(t, 400, st)
	assert.Equal(t, "Cannot specify Sandbox resources when using a snapshot", decode[apiError](t, b).Message)
}

func TestNamesUniqueAndDeleteAsync(t *testing.T) {
	c := newTC(t)
	sb := c.create(map[string]any{"name": "dup"})
	st, b := c.api("POST", "/sandbox", map[string]any{"name": "dup"})
	assert.Equal(t, 409, st)
	e := decode[apiError](t, b)
	assert.Equal(t, "Sandbox with name dup already exists", e.Message)
	assert.Equal(t, "Conflict", e.Error)
	assert.Equal(t, 409, e.StatusCode)

	release := c.srv.HoldTransitions(sb.ID)
	st, b = c.api("DELETE", "/sandbox/dup", nil)
	require.Equal(t, 200, st, string(b))
	d := decode[sbDTO](t, b)
	assert.Equal(t, "destroyed", d.DesiredState)
	assert.True(t, strings.HasPrefix(d.Name, "DESTROYED_dup_"), d.Name)
	assert.Equal(t, "started", d.State)
	// By name: gone at once; by id: still there.
	st, _ = c.get("dup")
	assert.Equal(t, 404, st)
	st, got := c.get(sb.ID)
	assert.Equal(t, 200, st)
	assert.Equal(t, "destroyed", got.DesiredState)
	// The name is free again.
	again := c.create(map[string]any{"name": "dup"})
	assert.NotEqual(t, sb.ID, again.ID)
	// Listed while destroying (clients filter it out).
	st, b = c.api("GET", "/sandbox", nil)
	require.Equal(t, 200, st)
	assert.Contains(t, string(b), sb.ID)
	release()
	require.NoError(t, c.srv.AwaitGone(ctxT(t), sb.ID))
	st, b = c.api("GET", "/sandbox/"+sb.ID, nil)
	assert.Equal(t, 404, st)
	assert.Equal(t, "Sandbox with ID or name "+sb.ID+" not found", decode[apiError](t, b).Message)
	st, _ = c.api("DELETE", "/sandbox/"+sb.ID, nil)
	assert.Equal(t, 404, st)
	st, b = c.api("GET", "/sandbox", nil)
	require.Equal(t, 200, st)
	assert.NotContains(t, string(b), sb.ID)
}

func TestEphemeralStopDeletes(t *testing.T) {
	c := newTC(t, daytonatest.WithTransitionDelay(0))
	sb := c.create(map[string]any{"autoDeleteInterval": 0})
	st, _ := c.api("POST", "/sandbox/"+sb.ID+"/stop", nil)
	require.Equal(t, 200, st)
	require.NoError(t, c.srv.AwaitGone(ctxT(t), sb.ID))
}

func TestLabelFilterAndPagination(t *testing.T) {
	c := newTC(t)
	want := map[string]bool{}
	for i := 0; i < 5; i++ {
		sb := c.create(map[string]any{"name": fmt.Sprintf("p%d", i), "labels": map[string]string{"team": "a", "i": fmt.Sprint(i)}})
		want[sb.ID] = true
	}
	c.create(map[string]any{"labels": map[string]string{"team": "b"}})
	c.create(nil)

	seen := map[string]bool{}
	cursor := ""
	pages := 0
	for {
		q := url.Values{"labels": {`{"team":"a"}`}, "limit": {"2"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		st, b := c.api("GET", "/sandbox?"+q.Encode(), nil)
		require.Equal(t, 200, st, string(b))
		var page struct {
			Items      []sbDTO `json:"items"`
			NextCursor *string `json:"nextCursor"`
		}
		require.NoError(t, json.Unmarshal(b, &page))
		require.LessOrEqual(t, len(page.Items), 2)
		for _, it := range page.Items {
			assert.False(t, seen[it.ID], "duplicate %s", it.ID)
			seen[it.ID] = true
			assert.Equal(t, "a", it.Labels["team"])
			assert.Nil(t, it.Env, "list items carry no env")
		}
		pages++
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	assert.Equal(t, want, seen)
	assert.Equal(t, 3, pages)

	st, b := c.api("GET", "/sandbox?labels="+url.QueryEscape(`{"team":"a","i":"3"}`), nil)
	require.Equal(t, 200, st)
	assert.Contains(t, string(b), `"p3"`)
	assert.NotContains(t, string(b), `"p2"`)

	st, b = c.api("GET", "/sandbox?labels=notjson", nil)
	assert.Equal(t, 400, st)
	assert.Equal(t, "Invalid labels JSON format", decode[apiError](t, b).Message)
	st, _ = c.api("GET", "/sandbox?limit=201", nil)
	assert.Equal(t, 400, st)

	// Deprecated page-based listing.
	st, b = c.api("GET", "/sandbox/paginated?page=2&limit=2&labels="+url.QueryEscape(`{"team":"a"}`), nil)
	require.Equal(t, 200, st)
	var pg struct {
		Items      []sbDTO `json:"items"`
		Total      int     `json:"total"`
		Page       int     `json:"page"`
		TotalPages int     `json:"totalPages"`
	}
	require.NoError(t, json.Unmarshal(b, &pg))
	assert.Equal(t, 5, pg.Total)
	assert.Equal(t, 3, pg.TotalPages)
	assert.Len(t, pg.Items, 2)
}

func TestIntervalsAndSetters(t *testing.T) {
	c := newTC(t)
	sb := c.create(map[string]any{"autoStopInterval": 30, "autoArchiveInterval": 0, "autoDeleteInterval": 10080})
	assert.Equal(t, 30, sb.AutoStopInterval)
	assert.Equal(t, 43200, sb.AutoArchiveInterval)
	assert.Equal(t, 10080, sb.AutoDeleteInterval)

	st, b := c.api("POST", "/sandbox/"+sb.ID+"/autostop/45", nil)
	assert.Equal(t, 201, st)
	assert.Equal(t, 45, decode[sbDTO](t, b).AutoStopInterval)
	st, _ = c.api("POST", "/sandbox/"+sb.ID+"/autoarchive/99999", nil)
	assert.Equal(t, 201, st)
	st, _ = c.api("POST", "/sandbox/"+sb.ID+"/autodelete/-5", nil)
	assert.Equal(t, 201, st)
	st, b = c.api("POST", "/sandbox/"+sb.ID+"/autostop/-1", nil)
	assert.Equal(t, 400, st)
	assert.Equal(t, "Auto-stop interval must be non-negative", decode[apiError](t, b).Message)
	_, got := c.get(sb.ID)
	assert.Equal(t, 45, got.AutoStopInterval)
	assert.Equal(t, 43200, got.AutoArchiveInterval)
	assert.Equal(t, -1, got.AutoDeleteInterval)

	st, b = c.api("PUT", "/sandbox/"+sb.ID+"/labels", map[string]any{"labels": map[string]string{"only": "this"}})
	require.Equal(t, 200, st)
	assert.Equal(t, map[string]string{"only": "this"}, decode[sbDTO](t, b).Labels)
	st, _ = c.api("POST", "/sandbox/"+sb.ID+"/last-activity", nil)
	assert.Equal(t, 201, st)
	st, b = c.api("GET", "/sandbox/"+sb.ID+"/toolbox-proxy-url", nil)
	require.Equal(t, 200, st)
	assert.JSONEq(t, `{"url":"`+c.srv.ToolboxURL()+`"}`, string(b))
}

func TestErrorRecoverAndMissingContainer(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	require.NoError(t, c.srv.SetError(sb.ID, "no space left on device", true))
	_, got := c.get(sb.ID)
	assert.Equal(t, "error", got.State)
	assert.True(t, got.Recoverable)
	st, b := c.api("POST", "/sandbox/"+sb.ID+"/stop", nil)
	assert.Equal(t, 400, st)
	assert.Equal(t, "Sandbox is in an errored state", decode[apiError](t, b).Message)
	st, b = c.api("POST", "/sandbox/"+sb.ID+"/recover", nil)
	require.Equal(t, 200, st, string(b))
	assert.Equal(t, "started", decode[sbDTO](t, b).State)

	require.NoError(t, c.srv.SetError(sb.ID, "boom", false))
	st, b = c.api("POST", "/sandbox/"+sb.ID+"/recover", nil)
	assert.Equal(t, 400, st)
	assert.Equal(t, "Sandbox is not in a recoverable state", decode[apiError](t, b).Message)

	// Missing container: toolbox 404 with the runner's text; start → error.
	other := c.create(nil)
	require.NoError(t, c.srv.LoseContainer(other.ID))
	st, b = c.tb(other.ID, "GET", "/work-dir", nil)
	assert.Equal(t, 404, st)
	e := decode[apiError](t, b)
	assert.Equal(t, "NOT_FOUND", e.Code)
	assert.Equal(t, "not found: sandbox container not found: "+daytonatest.MissingContainerReason(other.ID), e.Message)
	c.api("POST", "/sandbox/"+other.ID+"/stop", nil)
	require.NoError(t, c.srv.AwaitState(ctxT(t), other.ID, "stopped"))
	st, b = c.api("POST", "/sandbox/"+other.ID+"/start", nil)
	assert.Equal(t, 400, st)
	assert.Equal(t, "Sandbox failed to start: "+daytonatest.MissingContainerReason(other.ID), decode[apiError](t, b).Message)
	_, got = c.get(other.ID)
	assert.Equal(t, "error", got.State)
	assert.False(t, got.Recoverable)
	assert.Equal(t, "not found: failed to inspect sandbox container "+other.ID+": Error response from daemon: No such container: "+other.ID, got.ErrorReason)
}

func TestRequestLog(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	c.get(sb.ID)
	c.get(sb.Name)
	c.tb(sb.ID, "GET", "/user-home-dir", nil)
	assert.Equal(t, 1, c.srv.CountRequests("POST", "/sandbox"))
	assert.Equal(t, 2, c.srv.CountRequests("GET", "/sandbox/{sandboxIdOrName}"))
	assert.Equal(t, 2, c.srv.CountRequests("GET", "/sandbox/"+sb.ID))
	assert.Equal(t, 1, c.srv.CountRequests("GET", "/user-home-dir"))
	reqs := c.srv.Requests()
	last := reqs[len(reqs)-1]
	assert.Equal(t, "toolbox", last.Plane)
	assert.Equal(t, sb.ID, last.Sandbox)
	assert.Equal(t, 200, last.Status)
	assert.Equal(t, "0.190.0", last.Header.Get("X-Daytona-SDK-Version"))
	assert.Equal(t, "[redacted]", last.Header.Get("Authorization"))
	c.api("GET", "/sandbox?limit=5", nil)
	reqs = c.srv.Requests()
	assert.Equal(t, "limit=5", reqs[len(reqs)-1].Query)
	for _, r := range reqs {
		for _, vs := range r.Header {
			for _, v := range vs {
				assert.NotContains(t, v, c.srv.APIKey())
			}
		}
	}
	require.NoError(t, c.srv.AwaitRequests(context.Background(), "GET", "/user-home-dir", 1))
}

func TestDeleteErroredSandboxHidesAtOnce(t *testing.T) {
	c := newTC(t)
	sb := c.create(map[string]any{"labels": map[string]string{"x": "1"}})
	require.NoError(t, c.srv.SetError(sb.ID, "boom", false))
	release := c.srv.HoldTransitions(sb.ID)
	defer release()
	st, _ := c.api("DELETE", "/sandbox/"+sb.ID, nil)
	require.Equal(t, 200, st)
	st, _ = c.get(sb.ID)
	assert.Equal(t, 404, st)
	q := url.Values{"labels": {`{"x":"1"}`}}
	_, b := c.api("GET", "/sandbox?"+q.Encode(), nil)
	assert.NotContains(t, string(b), sb.ID)
	q.Set("includeErroredDeleted", "true")
	_, b = c.api("GET", "/sandbox?"+q.Encode(), nil)
	assert.Contains(t, string(b), sb.ID)
	release()
	require.NoError(t, c.srv.AwaitState(ctxT(t), sb.ID, "destroyed"))
	info, ok := c.srv.Sandbox(sb.ID)
	require.True(t, ok)
	assert.Equal(t, "destroyed", info.State)
	_, err := os.Stat(info.Root)
	assert.True(t, os.IsNotExist(err), "the sandbox tree is removed")
}

func TestNewAndStartLoopbackOnly(t *testing.T) {
	srv := daytonatest.New(daytonatest.WithAPIKey("k"), daytonatest.WithDir(t.TempDir()))
	defer srv.Close()
	assert.Equal(t, "", srv.URL(), "not listening yet")
	_, err := srv.Start("0.0.0.0:0")
	require.Error(t, err)
	u, err := srv.Start("127.0.0.1:0")
	require.NoError(t, err)
	assert.Equal(t, srv.URL(), u)
	req, _ := http.NewRequest("GET", u+"/sandbox", nil)
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
}

func TestRunAutoLifecycle(t *testing.T) {
	c := newTC(t)
	keep := c.create(map[string]any{"autoStopInterval": 0})
	short := c.create(map[string]any{"autoStopInterval": 10})
	eph := c.create(map[string]any{"autoStopInterval": 10, "autoDeleteInterval": 0})
	now := time.Now()
	assert.Equal(t, 0, c.srv.RunAutoLifecycle(now.Add(5*time.Minute)))
	assert.Equal(t, 2, c.srv.RunAutoLifecycle(now.Add(11*time.Minute)))
	require.NoError(t, c.srv.AwaitState(ctxT(t), short.ID, "stopped"))
	require.NoError(t, c.srv.AwaitGone(ctxT(t), eph.ID))
	_, got := c.get(keep.ID)
	assert.Equal(t, "started", got.State)
	// Stopped long enough: archived (autoArchive 10080 min by default).
	assert.Equal(t, 1, c.srv.RunAutoLifecycle(now.Add(8*24*time.Hour)))
	require.NoError(t, c.srv.AwaitState(ctxT(t), short.ID, "archived"))
}

func TestProposedTTL(t *testing.T) {
	c := newTC(t)
	sb := c.create(map[string]any{"name": "ttl-box", "ttlMinutes": 30})
	st, b := c.api("GET", "/sandbox/"+sb.ID, nil)
	require.Equal(t, 200, st)
	at, err := time.Parse(time.RFC3339, decode[map[string]any](t, b)["autoDestroyAt"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(30*time.Minute), at, time.Minute)

	st, _ = c.api("POST", "/sandbox/ttl-box/ttl/5", nil)
	require.Equal(t, 201, st)
	_, b = c.api("GET", "/sandbox/ttl-box", nil)
	at, err = time.Parse(time.RFC3339, decode[map[string]any](t, b)["autoDestroyAt"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(5*time.Minute), at, time.Minute)

	plain := c.create(map[string]any{"name": "no-ttl"})
	_, b = c.api("GET", "/sandbox/"+plain.ID, nil)
	require.NotContains(t, decode[map[string]any](t, b), "autoDestroyAt")
}
