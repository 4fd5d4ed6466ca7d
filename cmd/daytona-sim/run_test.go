package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/cli"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunServesUntilStdinEOF(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), []string{"-stop-on-eof", "-api-key", "k-test", "-dir", t.TempDir()}, inR, outW, io.Discard)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	require.NoError(t, err)
	var r ready
	require.NoError(t, json.Unmarshal([]byte(line), &r))
	assert.True(t, strings.HasPrefix(r.APIURL, "http://127.0.0.1:"), r.APIURL)
	assert.True(t, strings.HasSuffix(r.APIURL, "/api"))
	assert.Equal(t, "k-test", r.APIKey)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sb := createSandbox(t, ctx, r, "sim")
	assert.Equal(t, "started", sb.State)
	assert.Equal(t, r.ToolboxProxyURL, sb.ToolboxProxyURL)

	inW.Close()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Run did not stop on stdin EOF")
	}
}

type sandboxDTO struct {
	ID              string `json:"id"`
	State           string `json:"state"`
	ToolboxProxyURL string `json:"toolboxProxyUrl"`
}

// createSandbox creates a sandbox named name through the emulator r.
func createSandbox(t *testing.T, ctx context.Context, r ready, name string) sandboxDTO {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", r.APIURL+"/sandbox", strings.NewReader(`{"name":"`+name+`"}`))
	req.Header.Set("Authorization", "Bearer "+r.APIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var sb sandboxDTO
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&sb))
	return sb
}

func TestRunStopsOnContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, nil, nil, outW, io.Discard)
		outW.Close()
	}()
	_, err := bufio.NewReader(outR).ReadString('\n')
	require.NoError(t, err)
	cancel()
	assert.NoError(t, <-done)
	go io.Copy(io.Discard, outR)
}

// TestRunKeepsServingAfterStdinEOF: `daytona-sim </dev/null &` is how a
// person starts it in the background; stdin at EOF must not stop it unless
// -stop-on-eof asks for that.
func TestRunKeepsServingAfterStdinEOF(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdin := strings.NewReader("") // at EOF from the start, like /dev/null
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"-api-key", "k-eof", "-dir", t.TempDir()}, stdin, outW, io.Discard)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	require.NoError(t, err)
	var r ready
	require.NoError(t, json.Unmarshal([]byte(line), &r))

	// A request after stdin is (or could have been) read to EOF is served.
	for i := range 2 {
		reqCtx, reqCancel := context.WithTimeout(ctx, 30*time.Second)
		req, _ := http.NewRequestWithContext(reqCtx, "GET", r.APIURL+"/sandbox", nil)
		req.Header.Set("Authorization", "Bearer k-eof")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err, "request %d after stdin EOF", i)
		resp.Body.Close()
		reqCancel()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}
	select {
	case err := <-done:
		t.Fatalf("daytona-sim stopped on stdin EOF without -stop-on-eof (err=%v)", err)
	default:
	}
	cancel()
	require.NoError(t, <-done)
}

func TestRunHelp(t *testing.T) {
	for _, flag := range []string{"-h", "-help", "--help"} {
		var out bytes.Buffer
		err := Run(context.Background(), []string{flag}, nil, &out, io.Discard)
		require.NoError(t, err, flag)
		assert.Contains(t, out.String(), "emulator of the Daytona API")
		assert.Contains(t, out.String(), "Sandbox commands really run on this machine")
		assert.Contains(t, out.String(), "-stop-on-eof")
		assert.Contains(t, out.String(), "-api-key")
	}
}

func TestRunUsageErrors(t *testing.T) {
	// Cancelled: were an argument accepted, Run would stop at once instead
	// of serving until the test times out.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{{"-port", "-1"}, {"extra"}, {"-stdin-eof=false"}, {"-nope"}, {"-port"},
		{"-latency", "40"}, {"-latency", "-1ms"}, {"-latency", "soon"}, {"-latency"}, {"-isolation", "chroot"},
		{"-rtt", "40"}, {"-rtt", "-1ms"}, {"-rtt"}, {"-bandwidth", "-1"}, {"-bandwidth", "1MB"}, {"-bandwidth"}, {"-tls=maybe"}} {
		var errb bytes.Buffer
		err := Run(ctx, args, nil, io.Discard, &errb)
		require.Error(t, err, "%q", args)
		assert.Equal(t, 2, cli.ExitCode(err), "%q", args)
		assert.NotContains(t, err.Error(), "\n", "one line: %q", args)
		assert.Empty(t, errb.String(), "the error is reported once, by main")
		if name, _, _ := strings.Cut(args[0], "="); name != "extra" && name != "-nope" && name != "-stdin-eof" {
			assert.Contains(t, err.Error(), name, "names the flag: %q", args)
		}
		if args[0] == "-isolation" {
			assert.Contains(t, err.Error(), "want auto, off or userns", "says what it wants: %q", args)
		}
		if len(args) == 2 && (args[0] == "-latency" || args[0] == "-rtt") {
			assert.Contains(t, err.Error(), "duration such as 40ms", "says what it wants: %q", args)
		}
		if len(args) == 2 && args[0] == "-bandwidth" {
			assert.Contains(t, err.Error(), "bytes per second", "says what it wants: %q", args)
		}
	}
}

// TestLatencyFlag: -latency D reaches the emulator, which then handles a
// request no sooner than D after it arrived (its own stamps: no wall
// clock bound).
func TestLatencyFlag(t *testing.T) {
	st, help, err := parseArgs([]string{"-latency", "40ms", "-dir", t.TempDir()}, io.Discard)
	require.NoError(t, err)
	require.False(t, help)
	assert.Equal(t, 40*time.Millisecond, st.latency)
	none, _, err := parseArgs(nil, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, none.latency, "no latency unless asked for")

	srv := daytonatest.New(st.options(io.Discard)...)
	defer srv.Close()
	apiURL, err := srv.Start("")
	require.NoError(t, err)
	resp, err := get(t, apiURL+"/sandbox", srv.APIKey())
	require.NoError(t, err)
	resp.Body.Close()
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.GreaterOrEqual(t, reqs[0].Handled.Sub(reqs[0].Time), 40*time.Millisecond)
}

// TestIsolationFlag: -isolation off reaches the emulator, whose sandboxes
// then use the host layout; without it the default (or the environment
// variable) decides.
func TestIsolationFlag(t *testing.T) {
	st, _, err := parseArgs([]string{"-isolation", "off", "-dir", t.TempDir()}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, daytonatest.IsolationOff, st.isolation)
	srv := daytonatest.New(st.options(io.Discard)...)
	defer srv.Close()
	ok, why := srv.Isolated()
	assert.False(t, ok)
	assert.Contains(t, why, "isolation turned off")
	none, _, err := parseArgs(nil, io.Discard)
	require.NoError(t, err)
	assert.Empty(t, none.isolation, "the emulator's default unless asked for")
}

func get(t *testing.T, url, key string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return http.DefaultClient.Do(req)
}

// TestRunServesRequestLog: the emulator-only request log that benchmarks
// in other processes read, with the API key and ?since.
func TestRunServesRequestLog(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"-api-key", "k-log", "-dir", t.TempDir(), "-latency", "1ms"}, nil, outW, io.Discard)
		outW.Close()
	}()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	require.NoError(t, err)
	go io.Copy(io.Discard, outR)
	var r ready
	require.NoError(t, json.Unmarshal([]byte(line), &r))

	sb := createSandbox(t, ctx, r, "logged")

	read := func(query, key string) (int, string) {
		resp, err := get(t, r.APIURL+"/__sim/requests"+query, key)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	st, body := read("", "k-log")
	require.Equal(t, http.StatusOK, st, body)
	assert.JSONEq(t, `[{"method":"POST","route":"/sandbox","status":200,"newConn":true,"webSocket":false,"sandbox":"`+sb.ID+`"}]`, body)
	st, body = read("?since=1", "k-log")
	require.Equal(t, http.StatusOK, st, body)
	assert.JSONEq(t, `[]`, body)
	st, body = read("", "")
	assert.Equal(t, http.StatusUnauthorized, st, body)
	assert.NotContains(t, body, "k-log")
}

// TestNetworkFlags: -rtt and -bandwidth reach the emulator as its network
// model: the first request of a new connection pays the handshake and the
// request's round trip (lower bounds, measured by the client).
func TestNetworkFlags(t *testing.T) {
	const rtt = 50 * time.Millisecond
	st, _, err := parseArgs([]string{"-rtt", "50ms", "-bandwidth", "1048576", "-dir", t.TempDir()}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, daytonatest.Network{RTT: rtt, Bandwidth: 1 << 20}, st.network)
	none, _, err := parseArgs(nil, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, none.network, "no network unless asked for")
	assert.False(t, none.tls, "plain HTTP unless asked for")

	srv := daytonatest.New(st.options(io.Discard)...)
	defer srv.Close()
	apiURL, err := srv.Start("")
	require.NoError(t, err)
	start := time.Now()
	resp, err := get(t, apiURL+"/sandbox", srv.APIKey())
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.GreaterOrEqual(t, time.Since(start), 2*rtt, "handshake and round trip")
	assert.EqualValues(t, 1, srv.Connections())
}

// TestRunTLS: -tls serves https with a certificate written to the file the
// ready line names, which a client that trusts it verifies; the request
// log reports the connections; the file is gone once daytona-sim stops.
func TestRunTLS(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	outR, outW := io.Pipe()
	var errb bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"-tls", "-rtt", "1ms", "-api-key", "k-tls", "-dir", t.TempDir()}, nil, outW, &errb)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	require.NoError(t, err)
	go io.Copy(io.Discard, outR)
	var r ready
	require.NoError(t, json.Unmarshal([]byte(line), &r))
	assert.True(t, strings.HasPrefix(r.APIURL, "https://127.0.0.1:"), r.APIURL)
	assert.True(t, strings.HasPrefix(r.ToolboxProxyURL, "https://127.0.0.1:"), r.ToolboxProxyURL)
	require.NotEmpty(t, r.CACertFile)
	pem, err := os.ReadFile(r.CACertFile)
	require.NoError(t, err)

	_, err = get(t, r.APIURL+"/sandbox", "k-tls")
	require.Error(t, err, "an unknown certificate is refused")
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(pem))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	req, err := http.NewRequestWithContext(ctx, "GET", r.APIURL+"/__sim/requests", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer k-tls")
	resp, err := hc.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	n, err := strconv.Atoi(resp.Header.Get(daytonatest.SimConnectionsHeader))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, 2, "the refused connection and this one")

	cancel()
	require.NoError(t, <-done)
	assert.Contains(t, errb.String(), "SSL_CERT_FILE="+r.CACertFile)
	_, err = os.Stat(r.CACertFile)
	assert.ErrorIs(t, err, os.ErrNotExist, "removed on exit")
}
