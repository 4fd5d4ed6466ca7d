package provider

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/stretchr/testify/require"
)

// A wrong or unreachable apiUrl is a definitive failure that says so: no
// cleanup envelope, and the probe says the same.

func closedLoopbackURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "http://" + addr + "/api"
}

// offlineResolver answers every query NXDOMAIN in memory: no DNS traffic.
func offlineResolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			for {
				var n [2]byte
				if _, err := io.ReadFull(server, n[:]); err != nil {
					return
				}
				q := make([]byte, binary.BigEndian.Uint16(n[:]))
				if _, err := io.ReadFull(server, q); err != nil || len(q) < 12 {
					return
				}
				q[2] |= 0x80    // a response
				q[3] = 0x80 | 3 // NXDOMAIN
				if _, err := server.Write(append(n[:], q...)); err != nil {
					return
				}
			}
		}()
		return client, nil
	}}
}

func TestAnUnreachableAPIURLIsSaidPlainly(t *testing.T) {
	e := newTestEnv(t, nil)
	d := &net.Dialer{Resolver: offlineResolver()}
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
