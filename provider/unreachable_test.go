package provider

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/stretchr/testify/require"
)

// A wrong or unreachable apiUrl is a definitive failure that says so: no
// cleanup envelope, and the probe says the same.

func closedLoopbackURL(t *testing.T) string {
	t.Helper()
	// A loopback port that was just served and closed: nothing listens.
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL + "/api"
}

func TestAnUnreachableAPIURLIsSaidPlainly(t *testing.T) {
	e := newTestEnv(t, nil)
	d := &net.Dialer{Resolver: testenv.OfflineResolver()}
	e.use(e.driverWith(func(o *Options) {
		o.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}))
	closed := closedLoopbackURL(t)
	for _, c := range []struct{ apiURL, want string }{
		{closed, "cannot reach Daytona at " + closed + ": connection refused"},
		{"http://daytona.invalid/api", "cannot reach Daytona at http://daytona.invalid/api: no such host"},
	} {
		cfg := map[string]any{"apiUrl": c.apiURL}
		err := e.acquireErr(cfg)
		require.EqualError(t, err, c.want)
		var ce *cleanup.Error
		require.NotErrorAs(t, err, &ce, "no cleanup envelope: nothing can have been created")
		require.Zero(t, e.d.idle.report().UncertainCleanups, "nothing to clean up")

		raw, err := e.call("environmentProbe", e.base(cfg))
		require.NoError(t, err)
		res := decode[rpc.ProbeResult](t, raw)
		require.False(t, res.OK)
		require.Equal(t, c.want, res.Summary)
		require.Equal(t, c.want, res.Diagnostics[0].Message)
	}
}

func TestAWrongAPIKeyStillReadsAsUnauthorized(t *testing.T) {
	e := newTestEnv(t, nil)
	err := e.acquireErr(map[string]any{"apiKey": "wrong-key"})
	require.Contains(t, err.Error(), "401 Unauthorized")
	require.NotContains(t, err.Error(), "cannot reach")
	require.NotContains(t, err.Error(), "wrong-key")
}
