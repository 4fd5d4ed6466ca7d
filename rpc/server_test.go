package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestInitializeAdvertisesRegistry(t *testing.T) {
	reg, _ := testRegistry()
	p := startPeer(t, reg, Options{})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"manifest":{},"config":{},"instanceInfo":{"instanceId":"i","hostVersion":"2026.916.1"},"apiVersion":1}}`)
	m := p.recv()
	res := m["result"].(map[string]any)
	require.Equal(t, true, res["ok"])
	var got []string
	for _, v := range res["supportedMethods"].([]any) {
		got = append(got, v.(string))
	}
	require.Equal(t, reg.Methods(), got)
	require.Subset(t, got, []string{"initialize", "health", "shutdown", "configChanged", "echo"})

	p.send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{}}`)
	require.Equal(t, CodeWorkerError, errCode(t, p.recv()))
}

func TestIDsEchoedVerbatim(t *testing.T) {
	p := startPeer(t, nil, Options{})
	for _, id := range []string{`1`, `0`, `"1"`, `""`, `-7`, `2.5`, `1e3`, `123456789012345678901234567890`, `"\u00e9\n"`} {
		p.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"health"}`)
		l := p.recvRaw()
		require.True(t, strings.HasPrefix(l, `{"jsonrpc":"2.0","id":`+id+`,`), "id %s echoed as %s", id, l)
		require.Contains(t, l, `"result":{"status":"ok"}`)
		// Errors take the same path.
		p.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"nope"}`)
		l = p.recvRaw()
		require.True(t, strings.HasPrefix(l, `{"jsonrpc":"2.0","id":`+id+`,"error":`), "id %s echoed as %s", id, l)
	}
}

func TestBadFramesAnsweredAndServingContinues(t *testing.T) {
	reg, _ := testRegistry()
	p := startPeer(t, reg, Options{})
	cases := []struct {
		line string
		id   any
		code int64
	}{
		{`not json`, nil, CodeParseError},
		{`{"jsonrpc":"2.0","id":1,"method":"health"`, nil, CodeParseError},
		{`{"jsonrpc":"2.0","id":1,"method":"health"} {}`, nil, CodeParseError},
		{`[1,2]`, nil, CodeParseError},
		{`"str"`, nil, CodeParseError},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"h\xffx\"}", nil, CodeParseError},
		{`{"id":5,"method":"health"}`, json.Number("5"), CodeInvalidRequest},
		{`{"jsonrpc":"1.0","id":"a","method":"health"}`, "a", CodeInvalidRequest},
		{`{"foo":1}`, nil, CodeInvalidRequest}, // not 2.0, no method: not a notification to drop
		{`{"jsonrpc":"2.0"}`, nil, CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":"` + spanIDPrefix + `1"}`, spanIDPrefix + "1", CodeInvalidRequest}, // a span id, but no answer
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"health"}`, nil, CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":null,"method":"health"}`, nil, CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":6,"method":7}`, json.Number("6"), CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":8,"method":"health","result":1}`, json.Number("8"), CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":9}`, json.Number("9"), CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":10,"method":"nope"}`, json.Number("10"), CodeMethodNotFound},
		{`{"jsonrpc":"2.0","id":11,"method":"typed","params":{"timeoutMs":"soon"}}`, json.Number("11"), CodeInvalidParams},
		{`{"jsonrpc":"2.0","id":12,"method":"typed","params":[1]}`, json.Number("12"), CodeInvalidParams},
		{`{"jsonrpc":"2.0","id":13,"method":"boom"}`, json.Number("13"), CodeWorkerError},
	}
	for _, c := range cases {
		p.send(c.line)
		m := p.recv()
		require.Equal(t, c.code, errCode(t, m), "line %q -> %v", c.line, m)
		require.Equal(t, c.id, m["id"], "line %q", c.line)
		// The worker still serves.
		p.send(`{"jsonrpc":"2.0","id":"after","method":"health"}`)
		require.Equal(t, "after", p.recv()["id"])
	}
}

func TestUnregisteredMethodsAnswerAsTheSDK(t *testing.T) {
	reg, _ := testRegistry()
	reg.Register("environmentExecute", func(context.Context, json.RawMessage) (any, error) { return "ran", nil })
	p := startPeer(t, reg, Options{})
	for i, c := range []struct {
		method, message string
		code            int64
	}{
		// A hook the SDK knows, absent here: -32004 with the SDK's text.
		{"environmentTask", "environmentTask is not implemented by this plugin", CodeMethodNotImplemented},
		{"environmentRunnerIngressEndpoint", "environmentRunnerIngressEndpoint is not implemented by this plugin", CodeMethodNotImplemented},
		{"duplexChannelOpen", "duplexChannelOpen is not implemented by this plugin", CodeMethodNotImplemented},
		{"loginPtyOpen", "loginPtyOpen is not implemented by this plugin", CodeMethodNotImplemented},
		// A method the SDK does not know: -32601.
		{"environmentNoSuchHook", "Unknown method: environmentNoSuchHook", CodeMethodNotFound},
		{"environmentCancelExecution", "Unknown method: environmentCancelExecution", CodeMethodNotFound},
		{"nope", "Unknown method: nope", CodeMethodNotFound},
	} {
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{}}`, i, c.method))
		m := p.recv()
		require.Equal(t, c.code, errCode(t, m), c.method)
		require.Equal(t, c.message, m["error"].(map[string]any)["message"], c.method)
	}
	p.send(`{"jsonrpc":"2.0","id":"x","method":"environmentExecute","params":{}}`)
	require.Equal(t, "ran", p.recv()["result"], "a registered hook is served")
}

func TestInvalidParamsNamesTheField(t *testing.T) {
	reg, _ := testRegistry()
	p := startPeer(t, reg, Options{})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"typed","params":{"lease":{"providerLeaseId":42},"extra":true}}`)
	m := p.recv()
	require.Equal(t, CodeInvalidParams, errCode(t, m))
	require.Contains(t, m["error"].(map[string]any)["message"], `"lease.providerLeaseId" must be a string, got number`)
	// Unknown fields are ignored; null params give zero values.
	p.send(`{"jsonrpc":"2.0","id":2,"method":"typed","params":{"timeoutMs":5,"unknown":{"deep":[1]}}}`)
	require.Equal(t, json.Number("5"), p.recv()["result"].(map[string]any)["timeoutMs"])
	p.send(`{"jsonrpc":"2.0","id":3,"method":"typed","params":null}`)
	require.Contains(t, p.recv(), "result")
}

func TestCRLFBlankLinesAndNotifications(t *testing.T) {
	reg, _ := testRegistry()
	p := startPeer(t, reg, Options{})
	p.send("")
	p.send("   \t")
	p.send(`{"jsonrpc":"2.0","method":"onEvent","params":{}}`)       // unknown notification: ignored
	p.send(`{"jsonrpc":"2.0","method":"configChanged","params":{}}`) // known, as notification: no reply
	p.send(`{"jsonrpc":"2.0","method":"health"}` + "\r")
	p.send(`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":"b"}}` + "\r")
	m := p.recv()
	require.Equal(t, json.Number("1"), m["id"])
	require.Equal(t, map[string]any{"a": "b"}, m["result"])
}

func TestVoidResultAndErrorData(t *testing.T) {
	reg, _ := testRegistry()
	p := startPeer(t, reg, Options{})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"configChanged","params":{"config":{}}}`)
	require.Equal(t, `{"jsonrpc":"2.0","id":1,"result":null}`, p.recvRaw())
	p.send(`{"jsonrpc":"2.0","id":2,"method":"fail"}`)
	m := p.recv()
	e := m["error"].(map[string]any)
	require.Equal(t, "creation failed", e["message"])
	require.Equal(t, map[string]any{"schema": "x/v1"}, e["data"])
	p.send(`{"jsonrpc":"2.0","id":3,"method":"plainfail"}`)
	m = p.recv()
	require.Equal(t, CodeWorkerError, errCode(t, m))
	require.Equal(t, "wrapped: daytona said no", m["error"].(map[string]any)["message"])
}

func TestConcurrentRequestsAnsweredOutOfOrder(t *testing.T) {
	reg, release := testRegistry()
	p := startPeer(t, reg, Options{})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"block"}`)
	p.send(`{"jsonrpc":"2.0","id":2,"method":"echo","params":2}`)
	require.Equal(t, json.Number("2"), p.recv()["id"])
	close(release)
	m := p.recv()
	require.Equal(t, json.Number("1"), m["id"])
	require.Equal(t, "released", m["result"])
}

func TestShutdownRepliesThenServeReturns(t *testing.T) {
	reg, _ := testRegistry()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	defer inW.Close()
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), inR, outW, Options{Registry: reg}); outW.Close() }()
	lines := bufio.NewScanner(outR)
	_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"block"}`+"\n")
	_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":2,"method":"shutdown","params":{}}`+"\n")
	require.True(t, lines.Scan())
	require.Equal(t, `{"jsonrpc":"2.0","id":2,"result":null}`, lines.Text())
	// The blocked handler is cancelled and still answered before exit.
	require.True(t, lines.Scan(), "scan: %v", lines.Err())
	require.Contains(t, lines.Text(), `"id":1,"error"`)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second): // a hang guard only
		t.Fatal("Serve did not return after shutdown")
	}
}

func TestEOFAnswersPendingThenReturns(t *testing.T) {
	reg, _ := testRegistry()
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"echo","params":"x"}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"health"}`)
	var out strings.Builder
	require.NoError(t, Serve(context.Background(), in, &out, Options{Registry: reg}))
	require.Contains(t, out.String(), `{"jsonrpc":"2.0","id":1,"result":"x"}`)
	require.Contains(t, out.String(), `{"jsonrpc":"2.0","id":2,"result":{"status":"ok"}}`, "final line without newline is served")
}

func TestDoneChannelEndsServing(t *testing.T) {
	inR, inW := io.Pipe()
	defer inW.Close()
	gone := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), inR, io.Discard, Options{Done: gone}) }()
	close(gone)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second): // a hang guard only
		t.Fatal("Serve ignored Done")
	}
}
