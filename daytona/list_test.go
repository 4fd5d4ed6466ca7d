package daytona

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ListAll sends every filter on every page (labels as JSON, each state
// as its own states parameter, the name prefix, 200 a page), follows the
// cursor, and drops sandboxes being destroyed unless IncludeDestroying.
func TestListSendsEveryFilterOnEveryPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var pages atomic.Int32
	f.handle("GET /api/sandbox", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var labels map[string]string
		if err := json.Unmarshal([]byte(q.Get("labels")), &labels); err != nil || labels["a"] != "1" {
			t.Errorf("labels = %q", q.Get("labels"))
		}
		if got := q["states"]; len(got) != 2 || got[0] != "started" || got[1] != "stopped" {
			t.Errorf("states = %q", got)
		}
		if q.Get("name") != "pc-" || q.Get("limit") != "200" {
			t.Errorf("name %q, limit %q", q.Get("name"), q.Get("limit"))
		}
		gone := sandboxJSON("b", "pc-b", StateStarted)
		gone["desiredState"] = StateDestroyed
		switch n := pages.Add(1); q.Get("cursor") {
		case "":
			writeJSON(w, 200, map[string]any{"items": []any{sandboxJSON("a", "pc-a", StateStarted), gone}, "nextCursor": "c2"})
		case "c2":
			writeJSON(w, 200, map[string]any{"items": []any{sandboxJSON("c", "pc-c", StateStopped)}, "nextCursor": nil})
		default:
			t.Errorf("page %d: cursor %q", n, q.Get("cursor"))
		}
	})
	opts := &ListOptions{Labels: map[string]string{"a": "1"}, States: []SandboxState{StateStarted, StateStopped}, Name: "pc-"}
	all, err := f.c.Sandboxes.ListAll(t.Context(), opts)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "c"}, sandboxIDs(all))
	opts.IncludeDestroying = true
	all, err = f.c.Sandboxes.ListAll(t.Context(), opts)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, sandboxIDs(all))
	require.EqualValues(t, 4, pages.Load())
}

func sandboxIDs(sbs []Sandbox) []string {
	var out []string
	for _, sb := range sbs {
		out = append(out, sb.ID)
	}
	return out
}

// A caller that stops iterating stops the listing: no next page is
// fetched. A page that fails ends the listing with its error.
func TestListStopsWithItsCallerAndItsError(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var pages atomic.Int32
	f.handle("GET /api/sandbox", func(w http.ResponseWriter, r *http.Request) {
		if pages.Add(1) == 3 {
			writeJSON(w, 500, map[string]any{"statusCode": 500, "message": "boom"})
			return
		}
		writeJSON(w, 200, map[string]any{"items": []any{sandboxJSON("a", "a", StateStarted), sandboxJSON("b", "b", StateStarted)},
			"nextCursor": "c" + r.URL.Query().Get("cursor")})
	})
	for _, err := range f.c.Sandboxes.All(t.Context(), nil) {
		require.NoError(t, err)
		break
	}
	require.EqualValues(t, 1, pages.Load(), "one page for one sandbox")
	all, err := f.c.Sandboxes.ListAll(t.Context(), nil)
	require.ErrorIs(t, err, ErrServer)
	require.Empty(t, all)
	require.EqualValues(t, 3, pages.Load())
}

// An error's text falls back from the message to the reason to the
// validation errors; a rate limit names its wait; a state error names
// the sandbox, its state, what was awaited and why.
func TestErrorTexts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		message, reason string
		errors          []string
		want            string
	}{
		{"m", "r", []string{"e"}, ": m"},
		{"", "r", []string{"e"}, ": r"},
		{"", "", []string{"e1", "e2"}, ": e1, e2"},
		{"", "", nil, ""},
	} {
		e := &ErrorResponse{Method: "GET", Route: "/sandbox", StatusCode: 400, Message: c.message, Reason: c.reason, Errors: c.errors}
		require.Equal(t, "daytona: GET /sandbox: 400 Bad Request"+c.want, e.Error())
	}
	rl := &RateLimitError{ErrorResponse: &ErrorResponse{Method: "POST", Route: "/sandbox", StatusCode: 429}, RetryAfter: 3 * time.Second}
	require.Equal(t, "daytona: POST /sandbox: 429 Too Many Requests (retry after 3s)", rl.Error())
	require.ErrorIs(t, rl, ErrRateLimited)
	rl.RetryAfter = 0
	require.Equal(t, "daytona: POST /sandbox: 429 Too Many Requests", rl.Error())

	se := &SandboxStateError{SandboxID: "sb-1", State: StateError, ErrorReason: "disk broke", Waiting: []SandboxState{StateStarted, StateStopped}}
	require.Equal(t, `daytona: sandbox sb-1 is "error" while waiting for started|stopped: disk broke`, se.Error())
	se.Err = errors.New("deadline")
	require.Equal(t, `daytona: sandbox sb-1 still "error" while waiting for started|stopped: deadline`, se.Error())
}

// A toolbox proxy URL answer without a URL is malformed, not an empty
// address to send the toolbox calls to.
func TestToolboxProxyURLMustNotBeEmpty(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.handle("GET /api/sandbox/{id}/toolbox-proxy-url", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"url": " "})
	})
	_, _, err := f.c.Sandboxes.ToolboxProxyURL(t.Context(), "sb-1")
	require.ErrorIs(t, err, ErrMalformedResponse)
}
