// The fidelity tier (docs/emulator.md#the-fidelity-tier): each toolbox
// behaviour the worker relies on is a probe of status, body, exact bytes
// and timing class. CI runs the probes against the emulator; with
// DAYTONA_DAEMON_URL (a real toolbox daemon's base URL on loopback, as
// `make fidelity` starts one in a network namespace of its own) the same
// probes run against Daytona's daemon.
package fidelity_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// toolbox is one sandbox's toolbox API, the emulator's or a real daemon's.
type toolbox struct {
	t      *testing.T
	base   string // requests go to base + route
	apiKey string
	hc     *http.Client
	real   bool
}

func newToolbox(t *testing.T) *toolbox {
	t.Helper()
	if u := os.Getenv("DAYTONA_DAEMON_URL"); u != "" {
		pu, err := url.Parse(u)
		require.NoError(t, err)
		require.Contains(t, []string{"127.0.0.1", "localhost", "::1"}, pu.Hostname(), "DAYTONA_DAEMON_URL must be on loopback")
		return &toolbox{t: t, base: strings.TrimSuffix(u, "/"), hc: &http.Client{}, real: true}
	}
	te := testenv.New(t)
	sb := te.StartSandbox(t, nil)
	return &toolbox{t: t, base: te.Server.ToolboxURL() + "/" + sb.ID, apiKey: te.Server.APIKey(), hc: &http.Client{}}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// do sends a request as the worker does (the SDK version header of
// v0.190.0) and returns the status and body.
func (tb *toolbox) do(method, route string, body any) (int, []byte) {
	tb.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(tb.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctxT(tb.t), method, tb.base+route, rd)
	require.NoError(tb.t, err)
	tb.headers(req.Header)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := tb.hc.Do(req)
	require.NoError(tb.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(tb.t, err)
	return resp.StatusCode, b
}

func (tb *toolbox) headers(h http.Header) {
	h.Set("X-Daytona-SDK-Version", "0.190.0")
	if tb.apiKey != "" {
		h.Set("Authorization", "Bearer "+tb.apiKey)
	}
}

// session creates a session with a fresh id and deletes it at the end.
func (tb *toolbox) session() string {
	tb.t.Helper()
	id := "fidelity-" + randHex()
	st, b := tb.do("POST", "/process/session", map[string]string{"sessionId": id})
	require.Equal(tb.t, http.StatusCreated, st, string(b))
	tb.t.Cleanup(func() { tb.do("DELETE", "/process/session/"+id, nil) })
	return id
}

type execAnswer struct {
	CmdID    string  `json:"cmdId"`
	Output   *string `json:"output"`
	Stdout   *string `json:"stdout"`
	Stderr   *string `json:"stderr"`
	ExitCode *int    `json:"exitCode"`
}

func (tb *toolbox) exec(sid, cmd string, async bool) (int, execAnswer, []byte) {
	tb.t.Helper()
	st, b := tb.do("POST", "/process/session/"+sid+"/exec", map[string]any{"command": cmd, "runAsync": async})
	var a execAnswer
	if st < 300 {
		require.NoError(tb.t, json.Unmarshal(b, &a), string(b))
	}
	return st, a, b
}

// command reads a session command's state.
func (tb *toolbox) command(sid, cid string) map[string]any {
	tb.t.Helper()
	st, b := tb.do("GET", "/process/session/"+sid+"/command/"+cid, nil)
	require.Equal(tb.t, http.StatusOK, st, string(b))
	var m map[string]any
	require.NoError(tb.t, json.Unmarshal(b, &m))
	return m
}

// until waits for cond, checking every 50 ms: the probes watch a server
// they do not control, so they wait on its answers.
func (tb *toolbox) until(what string, cond func() bool) {
	tb.t.Helper()
	ctx := ctxT(tb.t)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			tb.t.Fatalf("gave up waiting: %s", what)
		case <-tick.C:
		}
	}
}

// exited waits for a session command's exit code.
func (tb *toolbox) exited(sid, cid string) int {
	tb.t.Helper()
	var code float64
	tb.until("exit code of "+cid, func() bool {
		c, ok := tb.command(sid, cid)["exitCode"].(float64)
		code = c
		return ok
	})
	return int(code)
}

// logs reads a command's log snapshot (split mode).
func (tb *toolbox) logs(sid, cid string) execAnswer {
	tb.t.Helper()
	st, b := tb.do("GET", "/process/session/"+sid+"/command/"+cid+"/logs", nil)
	require.Equal(tb.t, http.StatusOK, st, string(b))
	var a execAnswer
	require.NoError(tb.t, json.Unmarshal(b, &a), string(b))
	return a
}

// exists reports whether a file exists in the sandbox.
func (tb *toolbox) exists(path string) bool {
	st, _ := tb.do("GET", "/files/info?path="+url.QueryEscape(path), nil)
	return st == http.StatusOK
}

// upload writes a file into the sandbox.
func (tb *toolbox) upload(path string, content []byte) {
	tb.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", "f")
	require.NoError(tb.t, err)
	_, _ = fw.Write(content)
	require.NoError(tb.t, mw.Close())
	req, err := http.NewRequestWithContext(ctxT(tb.t), "POST", tb.base+"/files/upload?path="+url.QueryEscape(path), &body)
	require.NoError(tb.t, err)
	tb.headers(req.Header)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := tb.hc.Do(req)
	require.NoError(tb.t, err)
	_ = resp.Body.Close()
	require.Equal(tb.t, http.StatusOK, resp.StatusCode)
}

// oneShot runs POST /process/execute.
func (tb *toolbox) oneShot(cmd string, timeout int) (int, map[string]any, []byte) {
	tb.t.Helper()
	body := map[string]any{"command": cmd}
	if timeout > 0 {
		body["timeout"] = timeout
	}
	st, b := tb.do("POST", "/process/execute", body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return st, m, b
}

func randHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// errorBody is the v0.190.0 daemon's answer to an error its handler
// wrapped: no code, a zero timestamp, an empty path.
func assertWrapped500(t *testing.T, st int, body []byte, message string) {
	t.Helper()
	assert.Equal(t, http.StatusInternalServerError, st)
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m), string(body))
	assert.Equal(t, map[string]any{"statusCode": float64(500), "message": message, "timestamp": "0001-01-01T00:00:00Z", "path": ""}, m)
}

// TestProbeLostSession: an exec on a session the daemon does not know
// answers 500 with the wrapped message and no code; the other session
// routes answer 404 NOT_FOUND.
func TestProbeLostSession(t *testing.T) {
	tb := newToolbox(t)
	st, _, b := tb.exec("fidelity-missing-"+randHex(), "true", true)
	assertWrapped500(t, st, b, "failed to execute command: not found: session not found")
	st, b = tb.do("GET", "/process/session/fidelity-missing-"+randHex(), nil)
	assert.Equal(t, http.StatusNotFound, st)
	assert.Contains(t, string(b), `"code":"NOT_FOUND"`)
}

// TestProbeSessionOutput: a sync exec answers 200 with each stream's
// bytes, every line labelled in the raw log and an unterminated last line
// terminated; an async exec answers 202 with a command id and nulls.
func TestProbeSessionOutput(t *testing.T) {
	tb := newToolbox(t)
	sid := tb.session()
	st, a, b := tb.exec(sid, `printf 'a\nb'; printf 'e' >&2; (exit 3)`, false)
	require.Equal(t, http.StatusOK, st, string(b))
	require.NotNil(t, a.ExitCode)
	assert.Equal(t, 3, *a.ExitCode)
	assert.Equal(t, "a\nb\n", *a.Stdout, "an unterminated last line gets a newline")
	assert.Equal(t, "e\n", *a.Stderr)
	// Each line is labelled; the two streams' lines may interleave in
	// any order.
	assert.Contains(t, *a.Output, "\x01\x01\x01a\n")
	assert.Contains(t, *a.Output, "\x01\x01\x01b\n")
	assert.Contains(t, *a.Output, "\x02\x02\x02e\n")
	st, a, b = tb.exec(sid, "true", true)
	assert.Equal(t, http.StatusAccepted, st, string(b))
	assert.NotEmpty(t, a.CmdID)
	assert.Nil(t, a.ExitCode)
	assert.Equal(t, 0, tb.exited(sid, a.CmdID))
}

// TestProbeNULBytes: the session log drops NUL bytes; the one-shot
// answer keeps them.
func TestProbeNULBytes(t *testing.T) {
	tb := newToolbox(t)
	sid := tb.session()
	_, a, _ := tb.exec(sid, `printf 'x\0y\n'`, false)
	assert.Equal(t, "xy\n", *a.Stdout)
	st, m, b := tb.oneShot(`printf 'x\0y'`, 0)
	require.Equal(t, http.StatusOK, st, string(b))
	assert.Equal(t, "x\x00y", m["result"])
}

// TestProbePartialLine: a partial line is not in the log until its
// newline comes.
func TestProbePartialLine(t *testing.T) {
	tb := newToolbox(t)
	sid := tb.session()
	started, release := "/tmp/fidelity-started-"+randHex(), "/tmp/fidelity-release-"+randHex()
	_, a, _ := tb.exec(sid, fmt.Sprintf(`printf part; touch %s; while [ ! -e %s ]; do sleep 0.05; done; echo end`, started, release), true)
	tb.until("the command printed its partial line", func() bool { return tb.exists(started) })
	assert.NotContains(t, *tb.logs(sid, a.CmdID).Stdout, "part", "a partial line is invisible")
	tb.upload(release, nil)
	assert.Equal(t, 0, tb.exited(sid, a.CmdID))
	assert.Equal(t, "partend\n", *tb.logs(sid, a.CmdID).Stdout)
}

// TestProbeStdin: an async command's stdin stays open (a writer the
// daemon holds; POST …/input reaches it); a sync command's is at EOF.
func TestProbeStdin(t *testing.T) {
	tb := newToolbox(t)
	sid := tb.session()
	started := "/tmp/fidelity-started-" + randHex()
	_, a, _ := tb.exec(sid, `touch `+started+`; read x; echo "got=$x"`, true)
	tb.until("the command started", func() bool { return tb.exists(started) })
	st, b := tb.do("POST", "/process/session/"+sid+"/command/"+a.CmdID+"/input", map[string]string{"data": "hello\n"})
	require.Equal(t, http.StatusNoContent, st, string(b))
	assert.Equal(t, 0, tb.exited(sid, a.CmdID))
	assert.Contains(t, *tb.logs(sid, a.CmdID).Stdout, "got=hello\n")
	_, a, _ = tb.exec(sid, `cat; echo "rc=$?"`, false)
	assert.Equal(t, "rc=0\n", *a.Stdout)
}

// TestProbeDeadShell: a command that kills its session shell (commands
// run in the shell itself) never gets an exit code, its follow stays
// open, and every later exec answers 500 with the broken pipe.
func TestProbeDeadShell(t *testing.T) {
	tb := newToolbox(t)
	sid := tb.session()
	_, a, _ := tb.exec(sid, `echo before; kill -9 $$`, true)
	var st int
	var b []byte
	tb.until("an exec meets the dead shell", func() bool {
		st, _, b = tb.exec(sid, "true", true)
		return st != http.StatusAccepted
	})
	assertWrapped500(t, st, b, "failed to execute command: bad request: failed to write command: write |1: broken pipe")
	_, hasExit := tb.command(sid, a.CmdID)["exitCode"]
	assert.False(t, hasExit, "no exit code for the command of a dead shell")
	assert.Equal(t, "before\n", *tb.logs(sid, a.CmdID).Stdout)
	// Timing class "stays open": a follow closes about 1 s after an exit;
	// this one has none and is still open after 3 s.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	conn := tb.follow(t, sid, a.CmdID)
	defer conn.CloseNow()
	for {
		_, _, err := conn.Read(ctx)
		if err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded, "the follow of a dead shell's command does not close")
			break
		}
	}
}

// follow opens a command's log follow.
func (tb *toolbox) follow(t *testing.T, sid, cid string) *websocket.Conn {
	t.Helper()
	h := http.Header{}
	tb.headers(h)
	u := "ws" + strings.TrimPrefix(tb.base, "http") + "/process/session/" + sid + "/command/" + cid + "/logs?follow=true"
	conn, _, err := websocket.Dial(ctxT(t), u, &websocket.DialOptions{HTTPHeader: h})
	require.NoError(t, err)
	conn.SetReadLimit(-1)
	return conn
}

// TestProbeFollowCloses: a follow sends the labelled lines and closes
// normally (1000) after the command's exit.
func TestProbeFollowCloses(t *testing.T) {
	tb := newToolbox(t)
	sid := tb.session()
	_, a, _ := tb.exec(sid, `echo hi; echo err >&2`, true)
	conn := tb.follow(t, sid, a.CmdID)
	defer conn.CloseNow()
	var got []byte
	for {
		_, p, err := conn.Read(ctxT(t))
		if err != nil {
			assert.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err), "%v", err)
			break
		}
		got = append(got, p...)
	}
	assert.Contains(t, string(got), "\x01\x01\x01hi\n")
	assert.Contains(t, string(got), "\x02\x02\x02err\n")
}

// TestProbeOneShot: combined output and the shell's status; -1 when the
// shell itself is killed by a signal.
func TestProbeOneShot(t *testing.T) {
	tb := newToolbox(t)
	st, m, b := tb.oneShot(`echo a; echo b >&2; exit 3`, 0)
	require.Equal(t, http.StatusOK, st, string(b))
	assert.Equal(t, map[string]any{"exitCode": float64(3), "result": "a\nb\n"}, m)
	st, m, b = tb.oneShot(`echo a; kill -9 $$`, 0)
	require.Equal(t, http.StatusOK, st, string(b))
	assert.Equal(t, map[string]any{"exitCode": float64(-1), "result": "a\n"}, m)
}

// TestProbeOneShotWaitsForThePipe: the answer waits for every holder of
// the output pipe: a background job's later output is in it, and one that
// outlives the timeout makes it a 408 that loses the output.
func TestProbeOneShotWaitsForThePipe(t *testing.T) {
	tb := newToolbox(t)
	st, m, b := tb.oneShot(`(sleep 1; echo late) & echo early`, 60)
	require.Equal(t, http.StatusOK, st, string(b))
	assert.Equal(t, "early\nlate\n", m["result"])
	st, m, b = tb.oneShot(`sleep 3 & echo done`, 1)
	assert.Equal(t, http.StatusRequestTimeout, st, string(b))
	assert.Equal(t, "REQUEST_TIMEOUT", m["code"])
	assert.NotContains(t, string(b), "done")
}

// TestProbeDeleteGrace: deleting a session whose command ignores SIGTERM
// takes the daemon's 5 s grace before SIGKILL (timing class: at least
// 4.5 s; a loaded machine only makes it longer).
func TestProbeDeleteGrace(t *testing.T) {
	tb := newToolbox(t)
	sid := "fidelity-" + randHex()
	st, b := tb.do("POST", "/process/session", map[string]string{"sessionId": sid})
	require.Equal(t, http.StatusCreated, st, string(b))
	started := "/tmp/fidelity-started-" + randHex()
	tb.exec(sid, fmt.Sprintf(`trap '' TERM; touch %s; sleep 30`, started), true)
	tb.until("the command started", func() bool { return tb.exists(started) })
	begin := time.Now()
	st, b = tb.do("DELETE", "/process/session/"+sid, nil)
	assert.Equal(t, http.StatusNoContent, st, string(b))
	assert.GreaterOrEqual(t, time.Since(begin), 4500*time.Millisecond)
}

// TestProbeFiles: upload then download gives the exact bytes back.
func TestProbeFiles(t *testing.T) {
	tb := newToolbox(t)
	p := "/tmp/fidelity-file-" + randHex()
	content := []byte("bin\x00ary\xff\n")
	tb.upload(p, content)
	st, b := tb.do("GET", "/files/download?path="+url.QueryEscape(p), nil)
	require.Equal(t, http.StatusOK, st)
	assert.Equal(t, content, b)
	st, _ = tb.do("DELETE", "/files?path="+url.QueryEscape(p), nil)
	assert.Equal(t, http.StatusNoContent, st)
}

// timedExec runs a synchronous session exec and returns its answer and
// how long it took, measured by the client from the request.
func (tb *toolbox) timedExec(sid, cmd string) (execAnswer, time.Duration) {
	tb.t.Helper()
	start := time.Now()
	st, a, b := tb.exec(sid, cmd, false)
	took := time.Since(start)
	require.Equal(tb.t, http.StatusOK, st, string(b))
	require.NotNil(tb.t, a.ExitCode, string(b))
	return a, took
}

// TestProbeSyncExecPollTick: a synchronous exec is answered at the first
// of the daemon's 50 ms polls of the exit code file after the command
// ended, counted from the write: never at the poll right after the write,
// so even `true` takes at least 50 ms, and a command of 120 ms misses the
// 100 ms poll and is answered at the 150 ms one (lower bounds: a loaded
// machine can only make it later).
func TestProbeSyncExecPollTick(t *testing.T) {
	tb := newToolbox(t)
	sid := tb.session()
	tb.timedExec(sid, "true") // warm: the first command of a session may pay its start
	for i := range 3 {
		a, took := tb.timedExec(sid, "true")
		assert.Equal(t, 0, *a.ExitCode)
		assert.GreaterOrEqual(t, took, 50*time.Millisecond, "`true` %d: not at the first check", i)
	}
	a, took := tb.timedExec(sid, "sleep 0.12; echo slept")
	assert.Equal(t, "slept\n", *a.Stdout)
	assert.GreaterOrEqual(t, took, 150*time.Millisecond, "120 ms of command: the 150 ms poll")
}

// TestProbeExitWaitsForPipeHolders: a command's exit code (the sync
// answer, and the async command's recorded exitCode) comes only once every
// process holding its stdout or stderr has closed it: a background job the
// command left that still writes there holds the answer back and its later
// output is in it; one that let go of the pipe does not. Order only, no
// clock: the job marks its own end with a file.
func TestProbeExitWaitsForPipeHolders(t *testing.T) {
	tb := newToolbox(t)
	sid := tb.session()
	held, free := "/tmp/fidelity-held-"+randHex(), "/tmp/fidelity-free-"+randHex()
	a, _ := tb.timedExec(sid, fmt.Sprintf(`(sleep 0.5; echo late; echo late-err >&2; touch %s) & echo early`, held))
	assert.Equal(t, "early\nlate\n", *a.Stdout, "the holder's later output is in the answer")
	assert.Equal(t, "late-err\n", *a.Stderr)
	assert.True(t, tb.exists(held), "answered after the holder let go")

	a, _ = tb.timedExec(sid, fmt.Sprintf(`(sleep 2; touch %s) >/dev/null 2>&1 & echo done`, free))
	assert.Equal(t, "done\n", *a.Stdout)
	assert.False(t, tb.exists(free), "a job that closed the pipe does not hold the answer")

	held = "/tmp/fidelity-held-" + randHex()
	_, a, _ = tb.exec(sid, fmt.Sprintf(`(sleep 0.5; echo late; touch %s) & echo early`, held), true)
	assert.Equal(t, 0, tb.exited(sid, a.CmdID))
	assert.True(t, tb.exists(held), "the async exit code too waits for the holder")
	assert.Equal(t, "early\nlate\n", *tb.logs(sid, a.CmdID).Stdout)
}

// TestProbeSessionListsCommands: GET /process/session/{id} lists each
// command with its id and its text as sent, so a client can find a
// synchronous command's id by a token in its text.
func TestProbeSessionListsCommands(t *testing.T) {
	tb := newToolbox(t)
	sid := tb.session()
	token := "fidelity-token-" + randHex()
	a, _ := tb.timedExec(sid, "echo "+token)
	st, b := tb.do("GET", "/process/session/"+sid, nil)
	require.Equal(t, http.StatusOK, st, string(b))
	var got struct {
		SessionID string           `json:"sessionId"`
		Commands  []map[string]any `json:"commands"`
	}
	require.NoError(t, json.Unmarshal(b, &got), string(b))
	assert.Equal(t, sid, got.SessionID)
	var found []map[string]any
	for _, c := range got.Commands {
		if s, _ := c["command"].(string); strings.Contains(s, token) {
			found = append(found, c)
		}
	}
	require.Len(t, found, 1, string(b))
	assert.Equal(t, a.CmdID, found[0]["id"])
	assert.Equal(t, "echo "+token, found[0]["command"])
	assert.EqualValues(t, 0, found[0]["exitCode"])
}

// TestProbeBareWaitHangs: a bare `wait` in a session command waits for the
// session shell's own background jobs too (the daemon's stream relays, or
// the emulator's), which end only with the command: it never returns, and
// the synchronous exec is never answered (checked for 2 s; it hangs on any
// machine). `wait $!` for the command's own job returns.
func TestProbeBareWaitHangs(t *testing.T) {
	tb := newToolbox(t)
	sid := tb.session()
	a, _ := tb.timedExec(sid, `sleep 0.2 & wait $!; echo "waited rc=$?"`)
	assert.Equal(t, "waited rc=0\n", *a.Stdout)

	hung := tb.session()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", tb.base+"/process/session/"+hung+"/exec",
		strings.NewReader(`{"command":"sleep 0.2 & wait; echo waited","runAsync":false}`))
	require.NoError(t, err)
	tb.headers(req.Header)
	req.Header.Set("Content-Type", "application/json")
	resp, err := tb.hc.Do(req)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		t.Fatalf("a bare wait was answered: %d %s", resp.StatusCode, b)
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
