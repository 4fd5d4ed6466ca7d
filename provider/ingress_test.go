package provider

import (
	"bytes"
	"errors"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/rpc"
)

const (
	ingressRoute   = "/sandbox/{sandboxIdOrName}/ports/{port}/preview-url"
	ingressConnect = "/api/runner/v1/connect/00000000-0000-4000-8000-000000000001"
)

func (e *testEnv) ingress(l lease, port any, path string) (rpc.IngressEndpoint, error) {
	e.t.Helper()
	raw, err := e.call("environmentRunnerIngressEndpoint", with(e.base(nil), "lease", l, "port", port, "path", path))
	if err != nil {
		return rpc.IngressEndpoint{}, err
	}
	return decode[rpc.IngressEndpoint](e.t, raw), nil
}

// checkHostIngress applies the host's acceptance rules for an ingress
// reply: wss:, no user info, query or fragment, the path asked for, a
// generation, header names that are tokens with values.
func checkHostIngress(t *testing.T, ep rpc.IngressEndpoint, path string) {
	t.Helper()
	u, err := url.Parse(ep.WebsocketURL)
	require.NoError(t, err)
	require.Equal(t, "wss", u.Scheme)
	require.Nil(t, u.User)
	require.Empty(t, u.RawQuery)
	require.Empty(t, u.Fragment)
	require.Equal(t, path, u.EscapedPath())
	require.Equal(t, "authenticated_websocket", ep.Kind)
	require.Regexp(t, `^[0-9a-f]{64}$`, ep.Generation)
	for _, h := range ep.SecretHeaders {
		require.Regexp(t, "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$", h.Name)
		require.NotEmpty(t, h.Value)
	}
}

// TestRunnerIngressPrivateWebSocket: the private preview URL of port 43127
// becomes a wss: URL with the token only in a secret header, and the
// generation survives a token rotation but not a lifecycle revision
// (reference tests 4 and 5).
func TestRunnerIngressPrivateWebSocket(t *testing.T) {
	var logs bytes.Buffer
	e := newTestEnv(t, nil)
	e.use(e.driverWith(func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }))
	l := e.acquire(nil)
	id := *l.ProviderLeaseID

	ep, err := e.ingress(l, RunnerIngressPort, ingressConnect)
	require.NoError(t, err)
	checkHostIngress(t, ep, ingressConnect)
	require.Equal(t, "wss://43127-"+strings.ToLower(id)+"."+daytonatest.PreviewDomain+ingressConnect, ep.WebsocketURL)
	pv, _, err := e.client.Sandboxes.PreviewURL(t.Context(), id, RunnerIngressPort)
	require.NoError(t, err)
	require.Equal(t, []rpc.SecretHeader{{Name: "X-Daytona-Preview-Token", Value: pv.Token}}, ep.SecretHeaders)
	require.NotContains(t, ep.WebsocketURL, pv.Token)
	require.NotContains(t, ep.WebsocketURL, e.srv.APIKey())

	rotated, err := e.srv.RotatePreviewToken(id)
	require.NoError(t, err)
	again, err := e.ingress(l, RunnerIngressPort, ingressConnect)
	require.NoError(t, err)
	require.Equal(t, ep.Generation, again.Generation, "a token rotation keeps the generation")
	require.Equal(t, rotated, again.SecretHeaders[0].Value)
	require.Equal(t, ep.WebsocketURL, again.WebsocketURL)

	// A lifecycle revision: stopped behind the worker's back, started again
	// by the ingress call itself.
	require.NoError(t, e.srv.StopSandbox(id))
	e.await(id, daytonatest.StateStopped)
	revised, err := e.ingress(l, RunnerIngressPort, ingressConnect)
	require.NoError(t, err)
	require.Equal(t, daytonatest.StateStarted, e.state(id))
	require.NotEqual(t, ep.Generation, revised.Generation, "a stop and start changes the generation")
	checkHostIngress(t, revised, ingressConnect)

	for _, secret := range []string{pv.Token, rotated, e.srv.APIKey()} {
		require.NotContains(t, logs.String(), secret)
	}
}

// TestRunnerIngressRejectsHostileParams: a wrong port, any path but one
// plain segment under the connect prefix, or no lease is refused as
// invalid params before any provider call, and the worker keeps serving.
func TestRunnerIngressRejectsHostileParams(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	e.srv.ResetRequests()
	pathErr := "Daytona runner ingress path is invalid."
	for _, c := range []struct {
		port any
		path string
		want string
	}{
		{43128, ingressConnect, "Daytona runner ingress must use fixed port 43127."},
		{0, ingressConnect, "fixed port 43127"},
		{43127.5, ingressConnect, "fixed port 43127"},
		{-43127, ingressConnect, "fixed port 43127"},
		{43127, "", pathErr},
		{43127, "/api/runner/v1/connect/", pathErr},
		{43127, "/api/runner/v1/connect/a/b", pathErr},
		{43127, "/api/runner/v1/connect/a?x=1", pathErr},
		{43127, "/api/runner/v1/connect/a#frag", pathErr},
		{43127, "/api/runner/v1/connect/..", pathErr},
		{43127, "/api/runner/v1/connect/.", pathErr},
		{43127, "/api/runner/v1/connect/a b", pathErr},
		{43127, "/api/runner/v1/connect/a\x00b", pathErr},
		{43127, "/api/runner/v1/connect/a\nb", pathErr},
		{43127, "/api/runner/v1/connect/%zz", pathErr},
		{43127, "/api/runner/v1/connect/é", pathErr},
		{43127, "/api/runner/v1/connect/a\\b", pathErr},
		{43127, "api/runner/v1/connect/a", pathErr},
		{43127, "/api/runner/v2/connect/a", pathErr},
		{43127, "//evil.example/api/runner/v1/connect/a", pathErr},
		{43127, "/api/runner/v1/connect/" + strings.Repeat("a", 1<<20) + "/", pathErr},
	} {
		_, err := e.ingress(l, c.port, c.path)
		require.Error(t, err, "port %v path %.60q", c.port, c.path)
		require.Contains(t, err.Error(), c.want, "port %v path %.60q", c.port, c.path)
		var re *rpc.Error
		require.True(t, errors.As(err, &re), "port %v path %.60q", c.port, c.path)
		require.Equal(t, rpc.CodeInvalidParams, re.Code)
	}
	_, err := e.ingress(lease{}, RunnerIngressPort, ingressConnect)
	require.ErrorContains(t, err, "requires a provider lease id")
	_, err = e.ingress(l, "43127", ingressConnect)
	require.Error(t, err, "a port that is not a number")
	require.Empty(t, e.srv.Requests(), "nothing reached Daytona")

	ep, err := e.ingress(l, RunnerIngressPort, "/api/runner/v1/connect/runner-1.a_b~c%2A")
	require.NoError(t, err, "the worker keeps serving")
	checkHostIngress(t, ep, "/api/runner/v1/connect/runner-1.a_b~c%2A")
}

// TestRunnerIngressRejectsAnUnusablePreview: a preview endpoint without a
// URL or token, or whose URL is not plain https, is refused with an error
// that quotes neither the URL nor the token.
func TestRunnerIngressRejectsAnUnusablePreview(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	const tok = "previewTOKENsecret42"
	incomplete, invalid := "Daytona returned an incomplete private preview endpoint.", "Daytona returned an invalid private preview URL."
	for _, c := range []struct{ body, want string }{
		{`{"sandboxId":"x","url":"https://43127-x.proxy.example","token":""}`, incomplete},
		{`{"sandboxId":"x","url":"","token":"` + tok + `"}`, incomplete},
		{`{"sandboxId":"x","token":"` + tok + `"}`, incomplete},
		{`{"sandboxId":"x","url":"http://43127-x.proxy.example","token":"` + tok + `"}`, invalid},
		{`{"sandboxId":"x","url":"wss://43127-x.proxy.example","token":"` + tok + `"}`, invalid},
		{`{"sandboxId":"x","url":"https://user:` + tok + `@43127-x.proxy.example","token":"` + tok + `"}`, invalid},
		{`{"sandboxId":"x","url":"https://43127-x.proxy.example/?token=` + tok + `","token":"` + tok + `"}`, invalid},
		{`{"sandboxId":"x","url":"https://43127-x.proxy.example/?","token":"` + tok + `"}`, invalid},
		{`{"sandboxId":"x","url":"https://43127-x.proxy.example/#` + tok + `","token":"` + tok + `"}`, invalid},
		{`{"sandboxId":"x","url":"https:///nohost","token":"` + tok + `"}`, invalid},
		{`{"sandboxId":"x","url":"https:opaque` + tok + `","token":"` + tok + `"}`, invalid},
		{`{"sandboxId":"x","url":"https://bad host/` + tok + `","token":"` + tok + `"}`, invalid},
	} {
		f := e.srv.Inject(daytonatest.Fault{Method: "GET", Route: ingressRoute, Status: 200, Body: c.body})
		_, err := e.ingress(l, RunnerIngressPort, ingressConnect)
		f.Remove()
		require.Error(t, err, c.body)
		require.Equal(t, c.want, err.Error(), c.body)
		require.NotContains(t, err.Error(), tok)
	}
	// A preview URL with a path keeps it, without its trailing slashes.
	f := e.srv.Inject(daytonatest.Fault{Method: "GET", Route: ingressRoute, Status: 200,
		Body: `{"sandboxId":"x","url":"https://proxy.example/sandbox-1//","token":"` + tok + `"}`})
	ep, err := e.ingress(l, RunnerIngressPort, ingressConnect)
	f.Remove()
	require.NoError(t, err)
	require.Equal(t, "wss://proxy.example/sandbox-1"+ingressConnect, ep.WebsocketURL)

	// A torn-down lease is refused; a deleted sandbox is an error.
	_, err = e.call("environmentDestroyLease", with(e.base(nil), "providerLeaseId", *l.ProviderLeaseID))
	require.NoError(t, err)
	_, err = e.ingress(l, RunnerIngressPort, ingressConnect)
	var inactive *LeaseInactiveError
	require.ErrorAs(t, err, &inactive)
	e.use(e.newDriver()) // a restarted worker knows no tombstone
	_, err = e.ingress(l, RunnerIngressPort, ingressConnect)
	require.Error(t, err)
	require.True(t, regexp.MustCompile(`(?i)not found`).MatchString(err.Error()), err.Error())
}
