package provider

import (
	"fmt"
	"github.com/daytonaworker/daytona-worker/rpc"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
)

const rSnapshotOf = "/sandbox/{sandboxIdOrName}/snapshot"

func TestTemplateNamesAreSanitised(t *testing.T) {
	for _, c := range []struct{ label, want string }{
		{" Paperclip Env 1 ", "paperclip-env-1"},
		{"My_Template.v2", "my_template.v2"},
		{"--a  b--", "a-b"},
		{"../../etc/passwd", "..-..-etc-passwd"},
		{"Ünïcode ✓ name", "n-code-name"},
		{"a\x00b\nc", "a-b-c"},
		{strings.Repeat("x", 200), strings.Repeat("x", 96)},
		{strings.Repeat("x", 95) + "-y", strings.Repeat("x", 95)},
	} {
		require.Equal(t, c.want, templateName(c.label, "env-1"), "%q", c.label)
	}
	for _, label := range []string{"", "   ", "!!!", "✓"} {
		require.Regexp(t, `^paperclip-env-1-[0-9a-f]{8}$`, templateName(label, "env-1"), "%q", label)
	}
	require.Regexp(t, `^paperclip-env-x-[0-9a-f]{8}$`, templateName("", "Env X"))
}

// TestCaptureTemplateFromALiveSetupSandbox: the snapshot has the sanitised
// label's name and the per-call timeout, and the metadata names no
// template reference (reference test 44).
func TestCaptureTemplateFromALiveSetupSandbox(t *testing.T) {
	e := newTestEnv(t, nil)
	s, err := e.startSetup()
	require.NoError(t, err)
	id := *s.ProviderLeaseID
	raw, err := e.call("environmentCaptureTemplate", e.setupParams(id, "templateLabel", " Paperclip Env 1 ", "timeoutMs", 120000.7,
		"sourceTemplateRef", "source-secret-ref", "previousTemplateRef", "previous-secret-ref"))
	require.NoError(t, err)
	got := decode[rpc.CaptureResult](t, raw)
	require.Equal(t, "paperclip-env-1", got.TemplateRef)
	require.Equal(t, "snapshot", got.TemplateKind)
	md := got.Metadata
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, md["capturedAt"])
	require.Equal(t, map[string]any{"provider": "daytona", "sandboxId": id, "timeoutMs": float64(120000),
		"sourceTemplateRefRedacted": true, "previousTemplateRefRedacted": true, "capturedAt": md["capturedAt"]}, md)
	require.NotContains(t, string(raw), "secret-ref")
	require.Equal(t, []daytonatest.SnapshotInfo{{ID: e.srv.Snapshots()[0].ID, Name: "paperclip-env-1", State: "active", SourceSandboxID: id}}, e.srv.Snapshots())
	require.Equal(t, daytonatest.StateStarted, e.state(id), "the setup sandbox is live again after the capture")

	// The same name twice is Daytona's conflict; the worker keeps serving.
	_, err = e.call("environmentCaptureTemplate", e.setupParams(id, "templateLabel", "paperclip-env-1"))
	require.ErrorIs(t, err, daytona.ErrConflict)
	raw, err = e.call("environmentCaptureTemplate", e.setupParams(id))
	require.NoError(t, err)
	require.Regexp(t, `^paperclip-env-1-[0-9a-f]{8}$`, decode[rpc.CaptureResult](t, raw).TemplateRef)

	_, err = e.call("environmentCaptureTemplate", e.setupParams(nil))
	require.EqualError(t, err, "Cannot capture a Daytona template without a setup sandbox lease.")
}

// A capture whose snapshot ends in error or build_failed fails with
// Daytona's reason ("unknown error" without one); each ref flag of the
// metadata reports its own ref, absent or given.
func TestCaptureTemplateFailuresAndRefFlags(t *testing.T) {
	e := newTestEnv(t, nil)
	s, err := e.startSetup()
	require.NoError(t, err)
	id := *s.ProviderLeaseID
	for i, c := range []struct{ state, reason, want string }{
		{"error", `,"errorReason":"no space left"`, "failed: no space left"},
		{"build_failed", `,"errorReason":""`, "failed: unknown error"},
		{"error", ``, "failed: unknown error"},
	} {
		name := fmt.Sprintf("broken-%d", i)
		f := e.srv.Inject(daytonatest.Fault{Method: "GET", Route: "/snapshots/{id}", Status: 200,
			Body: `{"id":"sn-` + name + `","name":"` + name + `","state":"` + c.state + `"` + c.reason + `}`})
		_, err := e.call("environmentCaptureTemplate", e.setupParams(id, "templateLabel", name))
		f.Remove()
		require.EqualError(t, err, "Daytona snapshot "+name+" "+c.want, c.state)
	}
	for _, c := range []struct {
		params       []any
		source, prev bool
	}{
		{nil, false, false},
		{[]any{"sourceTemplateRef", "s-ref"}, true, false},
		{[]any{"previousTemplateRef", "p-ref"}, false, true},
	} {
		raw, err := e.call("environmentCaptureTemplate", e.setupParams(id, c.params...))
		require.NoError(t, err)
		md := decode[rpc.CaptureResult](t, raw).Metadata
		require.Equal(t, c.source, md["sourceTemplateRefRedacted"], "%v", c.params)
		require.Equal(t, c.prev, md["previousTemplateRefRedacted"], "%v", c.params)
	}
}

// TestDestroyWaitsForAnInFlightCapture: a destroy of the setup sandbox
// waits until a capture in progress ends (reference test 142).
func TestDestroyWaitsForAnInFlightCapture(t *testing.T) {
	e := newTestEnv(t, nil)
	s, err := e.startSetup()
	require.NoError(t, err)
	id := *s.ProviderLeaseID
	gate := make(chan struct{})
	e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rSnapshotOf, Gate: gate, Times: 1})
	capture := e.async("environmentCaptureTemplate", e.setupParams(id, "templateLabel", "held"))
	e.awaitRequests("POST", rSnapshotOf, 1)
	destroy := e.async("environmentDestroyLease", e.setupParams(id))
	awaitScope(t, e.d, e.scopeOf(id), func(st *scopeState) bool { return st.teardowns == 1 })
	require.Zero(t, e.srv.CountRequests("DELETE", rSandbox), "the destroy waits for the capture")
	close(gate)
	r := wait(t, capture)
	require.NoError(t, r.err)
	require.Equal(t, "held", decode[rpc.CaptureResult](t, r.raw).TemplateRef)
	require.NoError(t, wait(t, destroy).err)
	require.Equal(t, "gone", e.state(id))
	require.Len(t, e.srv.Snapshots(), 1, "the snapshot outlives its sandbox")
}

// TestDeleteSnapshotTemplates (reference test 46).
func TestDeleteSnapshotTemplates(t *testing.T) {
	e := newTestEnv(t, nil)
	s, err := e.startSetup()
	require.NoError(t, err)
	_, err = e.call("environmentCaptureTemplate", e.setupParams(*s.ProviderLeaseID, "templateLabel", "to-delete"))
	require.NoError(t, err)

	raw, err := e.call("environmentDeleteTemplate", with(e.base(nil), "templateRef", "to-delete", "reason", "replaced"))
	require.NoError(t, err)
	require.JSONEq(t, `{"deleted":true,"metadata":{"provider":"daytona","templateKind":"snapshot","templateRefRedacted":true,"reason":"replaced"}}`, string(raw))
	require.Empty(t, e.srv.Snapshots())
	_, _, err = e.client.Snapshots.Get(t.Context(), "to-delete")
	require.ErrorIs(t, err, daytona.ErrNotFound)

	raw, err = e.call("environmentDeleteTemplate", with(e.base(nil), "templateRef", "to-delete", "templateKind", "snapshot"))
	require.NoError(t, err)
	require.JSONEq(t, `{"deleted":false,"metadata":{"provider":"daytona","templateKind":"snapshot","templateRefRedacted":true,"reason":null,"missing":true}}`, string(raw))

	_, err = e.call("environmentDeleteTemplate", with(e.base(nil), "templateRef", "x", "templateKind", "image"))
	require.EqualError(t, err, "Daytona can delete snapshot templates only, not image.")
	_, err = e.call("environmentDeleteTemplate", with(e.base(nil), "templateRef", " "))
	require.ErrorContains(t, err, "without a template reference")

	// A refused delete is an error, not "deleted" or "missing", and the
	// snapshot stays; the ref is trimmed.
	_, err = e.call("environmentCaptureTemplate", e.setupParams(*s.ProviderLeaseID, "templateLabel", "kept"))
	require.NoError(t, err)
	f := e.srv.Inject(daytonatest.Fault{Method: "DELETE", Route: "/snapshots/{id}", Status: 400, Body: `{"statusCode":400,"message":"snapshot in use"}`})
	_, err = e.call("environmentDeleteTemplate", with(e.base(nil), "templateRef", " kept "))
	f.Remove()
	require.ErrorIs(t, err, daytona.ErrBadRequest)
	require.Len(t, e.srv.Snapshots(), 1)
	raw, err = e.call("environmentDeleteTemplate", with(e.base(nil), "templateRef", " kept "))
	require.NoError(t, err)
	require.Equal(t, true, decode[rpc.DeleteTemplateResult](t, raw).Deleted)
	require.Empty(t, e.srv.Snapshots())
}

// TestCaptureTemplateWithHostileParams: an absurd timeout is bounded to a
// day, a non-positive one falls back to the config's, and a huge label is
// cut to a valid snapshot name.
func TestCaptureTemplateWithHostileParams(t *testing.T) {
	e := newTestEnv(t, nil)
	s, err := e.startSetup()
	require.NoError(t, err)
	id := *s.ProviderLeaseID
	for _, c := range []struct {
		timeout any
		label   string
		want    float64
	}{
		{1e300, strings.Repeat("Ä b/", 1<<18), 86400000},
		{-5, "neg", 20000},
		{0, "zero", 20000},
	} {
		raw, err := e.call("environmentCaptureTemplate", e.setupParams(id, "templateLabel", c.label, "timeoutMs", c.timeout))
		require.NoError(t, err, "timeout %v", c.timeout)
		got := decode[rpc.CaptureResult](t, raw)
		require.Equal(t, c.want, got.Metadata["timeoutMs"])
		require.Regexp(t, `^[a-z0-9._-]{1,96}$`, got.TemplateRef)
	}
	_, err = e.call("environmentCaptureTemplate", e.setupParams(id, "timeoutMs", "soon"))
	require.ErrorContains(t, err, "timeoutMs", "a timeout that is not a number")
}

// TestDeleteTemplateWithHostileRefs: a ref with path syntax, a NUL byte or
// a megabyte of text reaches Daytona as one escaped path segment (never
// another route) and never comes back in a result or an error.
func TestDeleteTemplateWithHostileRefs(t *testing.T) {
	e := newTestEnv(t, nil)
	for _, ref := range []string{"../sandbox/x", "a/b?c#d", "nul\x00byte", strings.Repeat("r", 1<<20)} {
		raw, err := e.call("environmentDeleteTemplate", with(e.base(nil), "templateRef", ref))
		if err != nil {
			require.Less(t, len(err.Error()), 2000, "%.40q", ref)
			continue
		}
		got := decode[rpc.DeleteTemplateResult](t, raw)
		require.NotContains(t, string(raw), ref)
		require.Equal(t, "snapshot", got.Metadata["templateKind"], "%.40q", ref)
	}
	for _, r := range e.srv.Requests() {
		require.True(t, strings.HasPrefix(r.Route, "/snapshots/"), "only snapshot routes were called: %.60s", r.Route)
	}
}
