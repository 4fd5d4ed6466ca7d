package main

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
	"github.com/stretchr/testify/require"
)

// call sends one request to the worker process and returns its answer.
func (w *workerProc) call(id int, method string, params any) map[string]any {
	w.t.Helper()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	require.NoError(w.t, err)
	w.send(append(b, '\n'))
	m := w.recv()
	require.Equal(w.t, json.Number(strconv.Itoa(id)), m["id"], "one request at a time: the answer is this one's")
	return m
}

// errorOf is the error object of an answer.
func errorOf(t *testing.T, m map[string]any) (code, message string, data map[string]any) {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	require.True(t, ok, "an error answer: %v", m)
	data, _ = e["data"].(map[string]any)
	return e["code"].(json.Number).String(), e["message"].(string), data
}

// TestTimeoutMessagesLeaveTheWorkerUnchanged: the acquisition-timeout and
// liveness-timeout errors reach the host, through the worker process and
// its JSON-RPC framing, with exactly the provider's message (both wrap a
// deadline; nothing may be prefixed to them).
func TestTimeoutMessagesLeaveTheWorkerUnchanged(t *testing.T) {
	env := testenv.New(t)
	srv := env.Server
	w := startWorker(t)
	cfg := func(kv ...any) map[string]any {
		c := map[string]any{"apiKey": srv.APIKey(), "apiUrl": srv.URL(), "timeoutMs": 20000}
		for i := 0; i < len(kv); i += 2 {
			c[kv[i].(string)] = kv[i+1]
		}
		return c
	}
	base := func(c map[string]any, kv ...any) map[string]any {
		p := map[string]any{"driverKey": "daytona", "companyId": "company-1", "environmentId": "env-1", "config": c}
		for i := 0; i < len(kv); i += 2 {
			p[kv[i].(string)] = kv[i+1]
		}
		return p
	}
	m := w.call(1, "initialize", map[string]any{"manifest": map[string]any{"id": "x"}, "config": map[string]any{}, "apiVersion": 1})
	require.NotNil(t, m["result"])

	// The acquisition budget runs out while Daytona holds the create.
	srv.Inject(daytonatest.Fault{Method: "POST", Route: "/sandbox", Hang: true, Times: 1})
	m = w.call(2, "environmentAcquireLease", base(cfg("timeoutMs", 300), "runId", "run-1"))
	code, msg, data := errorOf(t, m)
	require.Equal(t, "-32002", code)
	require.Equal(t, "Daytona lease acquisition timed out; allocation cleanup is pending", msg)
	require.Equal(t, "paperclip/environment-creation-cleanup/v1", data["schema"])
	require.Equal(t, "create", data["acquisitionDiagnostic"].(map[string]any)["phase"])

	// A liveness-bounded read that never answers.
	sb := env.StartSandbox(t, nil)
	srv.Inject(daytonatest.Fault{Method: "GET", Route: "/sandbox/{sandboxIdOrName}", Hang: true, Times: 1})
	m = w.call(3, "environmentReleaseLease", base(cfg("livenessTimeoutMs", 300), "providerLeaseId", sb.ID))
	code, msg, _ = errorOf(t, m)
	require.Equal(t, "-32002", code)
	require.Equal(t, `Daytona sandbox liveness call "sandbox.refreshData" did not respond within 300 ms; the sandbox connection is unresponsive.`, msg)
}
