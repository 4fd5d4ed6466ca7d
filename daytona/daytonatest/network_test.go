package daytonatest_test

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// timedGet sends GET url with a fresh-enough client and returns how long
// the answer took to arrive, read to its end, from the client's side.
func timedGet(t *testing.T, hc *http.Client, srv *daytonatest.Server, url string) time.Duration {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), "GET", url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+srv.APIKey())
	start := time.Now()
	resp, err := hc.Do(req)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return time.Since(start)
}

// TestNetworkChargesRoundTrips: with WithNetwork a request on a warm
// connection costs at least one round trip, the first request of a new
// connection two (the TCP handshake), and over TLS three (the TLS 1.3
// handshake too). Measured from the client's side with a real
// http.Client; lower bounds only (a loaded machine can only add), and the
// connection counter shows the warm requests reused the connection.
func TestNetworkChargesRoundTrips(t *testing.T) {
	const rtt = 60 * time.Millisecond
	for _, tc := range []struct {
		name  string
		tls   bool
		fresh time.Duration
	}{{"plain", false, 2 * rtt}, {"tls", true, 3 * rtt}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []daytonatest.Option{daytonatest.WithNetwork(daytonatest.Network{RTT: rtt})}
			tr := &http.Transport{}
			if tc.tls {
				opts = append(opts, daytonatest.WithTLS())
			}
			srv := testenv.Server(t, opts...)
			if tc.tls {
				require.True(t, strings.HasPrefix(srv.URL(), "https://"), srv.URL())
				roots := x509.NewCertPool()
				require.True(t, roots.AppendCertsFromPEM(srv.CertPEM()))
				tr.TLSClientConfig = &tls.Config{RootCAs: roots}
			}
			hc := &http.Client{Transport: tr}
			defer tr.CloseIdleConnections()
			first := timedGet(t, hc, srv, srv.URL()+"/sandbox")
			assert.GreaterOrEqual(t, first, tc.fresh, "a new connection's first request")
			for i := range 3 {
				warm := timedGet(t, hc, srv, srv.URL()+"/sandbox")
				assert.GreaterOrEqual(t, warm, rtt, "warm request %d", i)
			}
			assert.EqualValues(t, 1, srv.Connections(), "the warm requests reused the connection")
			reqs := srv.Requests()
			require.Len(t, reqs, 4)
			assert.True(t, reqs[0].NewConn)
			assert.False(t, reqs[3].NewConn)
		})
	}
}

// TestNetworkCountsConnections: every accepted TCP connection counts,
// also without a network model.
func TestNetworkCountsConnections(t *testing.T) {
	srv := testenv.Server(t)
	assert.Zero(t, srv.Connections())
	for i := range 3 {
		tr := &http.Transport{DisableKeepAlives: true}
		timedGet(t, &http.Client{Transport: tr}, srv, srv.URL()+"/sandbox")
		assert.EqualValues(t, i+1, srv.Connections())
	}
}

// TestNetworkCarriesBytesIntact: through a shaped network with a
// bandwidth limit, over TLS, a large file goes up and comes back byte for
// byte, no sooner than its size allows each way, and a command's output
// arrives whole and in order through a WebSocket follow.
func TestNetworkCarriesBytesIntact(t *testing.T) {
	const bw = 8 << 20
	srv := testenv.Server(t, daytonatest.WithNetwork(daytonatest.Network{RTT: 10 * time.Millisecond, Bandwidth: bw}), daytonatest.WithTLS())
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(srv.CertPEM()))
	tr := daytona.NewTransport()
	tr.TLSClientConfig.RootCAs = roots
	c := testenv.Client(t, srv.URL(), srv.APIKey(), daytona.WithHTTPClient(&http.Client{Transport: tr}))
	sb := testenv.StartSandbox(t, c, nil)

	content := make([]byte, 2<<20+5)
	_, _ = rand.Read(content)
	start := time.Now()
	_, err := c.Files.UploadFile(ctxT(t), sb.Ref(), "big.bin", bytes.NewReader(content))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), time.Duration(len(content))*time.Second/bw, "upload at the bandwidth")
	start = time.Now()
	rc, _, err := c.Files.Download(ctxT(t), sb.Ref(), "big.bin")
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	require.NoError(t, err)
	_ = rc.Close()
	assert.GreaterOrEqual(t, time.Since(start), time.Duration(len(content))*time.Second/bw, "download at the bandwidth")
	assert.True(t, bytes.Equal(content, got), "the bytes came back intact")

	_, err = c.Toolbox.CreateSession(ctxT(t), sb.Ref(), "s1")
	require.NoError(t, err)
	resp, _, err := c.Toolbox.ExecuteSessionCommand(ctxT(t), sb.Ref(), "s1", &daytona.SessionExecuteRequest{Command: "seq 1 50000; seq 1 3 >&2", RunAsync: true})
	require.NoError(t, err)
	var out, errOut []byte
	err = c.Toolbox.FollowSessionCommandLogs(ctxT(t), sb.Ref(), "s1", resp.CmdID, nil, func(ch daytona.LogChunk) error {
		if ch.Stream == daytona.Stderr {
			errOut = append(errOut, ch.Data...)
		} else {
			out = append(out, ch.Data...)
		}
		return nil
	})
	require.NoError(t, err)
	var want strings.Builder
	for i := 1; i <= 50000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	assert.True(t, want.String() == string(out), "stdout whole and in order (%d bytes, want %d)", len(out), want.Len())
	assert.Equal(t, "1\n2\n3\n", string(errOut))
}
