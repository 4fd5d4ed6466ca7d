package daytonatest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
)

type execResp struct {
	CmdID    string  `json:"cmdId"`
	Output   *string `json:"output"`
	Stdout   *string `json:"stdout"`
	Stderr   *string `json:"stderr"`
	ExitCode *int    `json:"exitCode"`
}

func (c *tc) session(id, sid string) {
	c.t.Helper()
	st, b := c.tb(id, "POST", "/process/session", map[string]string{"sessionId": sid})
	require.Equal(c.t, 201, st, string(b))
}

func (c *tc) exec(id, sid, cmd string, async bool) execResp {
	c.t.Helper()
	st, b := c.tb(id, "POST", "/process/session/"+sid+"/exec", map[string]any{"command": cmd, "runAsync": async})
	if async {
		require.Equal(c.t, 202, st, string(b))
	} else {
		require.Equal(c.t, 200, st, string(b))
	}
	return decode[execResp](c.t, b)
}

func (c *tc) wsURL(id, path string) string {
	return "ws" + strings.TrimPrefix(c.srv.ToolboxURL(), "http") + "/" + id + path
}

func (c *tc) dial(ctx context.Context, id, path string) (*websocket.Conn, error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+c.srv.APIKey())
	h.Set("X-Daytona-SDK-Version", "0.190.0")
	conn, _, err := websocket.Dial(ctx, c.wsURL(id, path), &websocket.DialOptions{HTTPHeader: h})
	return conn, err
}

// readAll reads binary frames until the connection closes.
func readAll(ctx context.Context, conn *websocket.Conn) ([]byte, []int, error) {
	var out []byte
	var sizes []int
	for {
		_, p, err := conn.Read(ctx)
		if err != nil {
			return out, sizes, err
		}
		out = append(out, p...)
		sizes = append(sizes, len(p))
	}
}

func TestSessionKeepsShellState(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	info, _ := c.srv.Sandbox(sb.ID)
	c.session(sb.ID, "s1")
	r := c.exec(sb.ID, "s1", "export FOO=bar; mkdir -p sub && cd sub; greet() { echo hi-$1; }", false)
	assert.Equal(t, 0, *r.ExitCode)
	r = c.exec(sb.ID, "s1", `echo "$FOO $(pwd) $HOME"; greet x; echo oops >&2; false`, false)
	assert.Equal(t, 1, *r.ExitCode)
	assert.Equal(t, "bar "+filepath.Join(info.HomeDir, "sub")+" "+info.HomeDir+"\nhi-x\n", *r.Stdout)
	assert.Equal(t, "oops\n", *r.Stderr)
	assert.Contains(t, *r.Output, "\x01\x01\x01bar ")
	assert.Contains(t, *r.Output, "\x02\x02\x02oops\n")

	// Tracing in the session shell echoes the exec wrapper; attribution
	// and completion are not fooled by it.
	r = c.exec(sb.ID, "s1", "set -xv", false)
	r = c.exec(sb.ID, "s1", "echo traced", false)
	assert.Equal(t, "traced\n", *r.Stdout)
	assert.Contains(t, *r.Stderr, "+ echo traced")
	r = c.exec(sb.ID, "s1", "set +xv; echo after", false)
	r = c.exec(sb.ID, "s1", "echo clean", false)
	assert.Equal(t, "clean\n", *r.Stdout)
	assert.Empty(t, *r.Stderr)

	// A line longer than the labeler's buffer arrives intact.
	r = c.exec(sb.ID, "s1", `head -c 200000 /dev/zero | tr '\0' 'a'; echo; echo next`, false)
	assert.Equal(t, strings.Repeat("a", 200000)+"\nnext\n", *r.Stdout)

	// Unterminated final line gets a newline, like the daemon's labeler.
	r = c.exec(sb.ID, "s1", `printf 'no-newline'`, false)
	assert.Equal(t, "no-newline\n", *r.Stdout)

	// The host environment does not leak in; the sandbox env does.
	t.Setenv("DAYTONATEST_SECRET", "leak")
	sb2 := c.create(map[string]any{"env": map[string]string{"MYVAR": "v1"}})
	c.session(sb2.ID, "s")
	r = c.exec(sb2.ID, "s", `echo "[$DAYTONATEST_SECRET][$MYVAR]"`, false)
	assert.Equal(t, "[][v1]\n", *r.Stdout)

	// Sessions: get, 409, delete, 404.
	st, b := c.tb(sb.ID, "GET", "/process/session/s1", nil)
	require.Equal(t, 200, st)
	assert.Contains(t, string(b), `"commands":[`)
	st, _ = c.tb(sb.ID, "POST", "/process/session", map[string]string{"sessionId": "s1"})
	assert.Equal(t, 409, st)
	st, _ = c.tb(sb.ID, "DELETE", "/process/session/s1", nil)
	assert.Equal(t, 204, st)
	st, b = c.tb(sb.ID, "GET", "/process/session/s1", nil)
	assert.Equal(t, 404, st)
	assert.Equal(t, "not found: session not found", decode[apiError](t, b).Message)

	// `exit` ends the session shell: its command never gets an exit code
	// and later execs meet the broken pipe, as on the daemon.
	c.session(sb.ID, "s2")
	r = c.exec(sb.ID, "s2", "exit 7", true)
	require.NoError(t, c.srv.Await(t.Context(), func() bool { return c.srv.SessionShellExited(sb.ID, "s2") }))
	st, b = c.tb(sb.ID, "GET", "/process/session/s2/command/"+r.CmdID, nil)
	assert.Equal(t, 200, st)
	assert.NotContains(t, string(b), "exitCode")
	st, b = c.tb(sb.ID, "POST", "/process/session/s2/exec", map[string]any{"command": "true"})
	assert.Equal(t, 500, st)
	assert.JSONEq(t, `{"statusCode":500,"message":"failed to execute command: bad request: failed to write command: write |1: broken pipe","timestamp":"0001-01-01T00:00:00Z","path":""}`, string(b))
	// A session that does not exist: the daemon's 500, not a 404.
	st, b = c.tb(sb.ID, "POST", "/process/session/nope/exec", map[string]any{"command": "true"})
	assert.Equal(t, 500, st)
	assert.JSONEq(t, `{"statusCode":500,"message":"failed to execute command: not found: session not found","timestamp":"0001-01-01T00:00:00Z","path":""}`, string(b))

	// Empty command: 400 with an empty body.
	c.session(sb.ID, "s3")
	st, b = c.tb(sb.ID, "POST", "/process/session/s3/exec", map[string]any{"command": " "})
	assert.Equal(t, 400, st)
	assert.Empty(t, b)
}

func TestAsyncCommandLogsAndFollow(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	c.session(sb.ID, "s")
	r := c.exec(sb.ID, "s", `echo one; echo two >&2; read line; echo "got:$line"; exit_code=3; (exit $exit_code)`, true)
	require.NotEmpty(t, r.CmdID)
	assert.Nil(t, r.ExitCode)
	assert.Equal(t, 1, c.srv.CountDispatches("echo one"))

	ctx := ctxT(t)
	conn, err := c.dial(ctx, sb.ID, "/process/session/s/command/"+r.CmdID+"/logs?follow=true")
	require.NoError(t, err)
	// Wait for the first line before sending input.
	var got []byte
	for !bytes.Contains(got, []byte("one\n")) {
		_, p, err := conn.Read(ctx)
		require.NoError(t, err)
		got = append(got, p...)
	}
	st, _ := c.tb(sb.ID, "GET", "/process/session/s/command/"+r.CmdID, nil)
	assert.Equal(t, 200, st)
	st, _ = c.tb(sb.ID, "POST", "/process/session/s/command/"+r.CmdID+"/input", map[string]string{"data": "hello"})
	require.Equal(t, 204, st)
	rest, _, err := readAll(ctx, conn)
	assert.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err), "%v", err)
	got = append(got, rest...)
	assert.Contains(t, string(got), "\x01\x01\x01got:hello\n")
	assert.Contains(t, string(got), "\x02\x02\x02two\n")
	assert.Contains(t, string(got), "\x01\x01\x01hello\n", "input is echoed as stdout")

	st, b := c.tb(sb.ID, "GET", "/process/session/s/command/"+r.CmdID, nil)
	require.Equal(t, 200, st)
	var cmd struct {
		ID       string `json:"id"`
		ExitCode *int   `json:"exitCode"`
	}
	require.NoError(t, json.Unmarshal(b, &cmd))
	require.NotNil(t, cmd.ExitCode)
	assert.Equal(t, 3, *cmd.ExitCode)

	// A second follow replays from byte 0 and closes normally.
	conn2, err := c.dial(ctx, sb.ID, "/process/session/s/command/"+r.CmdID+"/logs?follow=true")
	require.NoError(t, err)
	replay, sizes, err := readAll(ctx, conn2)
	assert.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err))
	assert.Equal(t, got, replay)
	for _, n := range sizes {
		assert.LessOrEqual(t, n, 1024)
	}

	// Snapshot: JSON split with the version header.
	st, b = c.tb(sb.ID, "GET", "/process/session/s/command/"+r.CmdID+"/logs", nil)
	require.Equal(t, 200, st)
	var logs struct{ Output, Stdout, Stderr string }
	require.NoError(t, json.Unmarshal(b, &logs))
	assert.Equal(t, "one\nhello\ngot:hello\n", logs.Stdout)
	assert.Equal(t, "two\n", logs.Stderr)
	assert.Equal(t, string(got), logs.Output)
	// Without a version header: plain text, markers stripped.
	resp, body, err := c.req(ctx, "GET", c.srv.ToolboxURL()+"/"+sb.ID+"/process/session/s/command/"+r.CmdID+"/logs", nil,
		map[string]string{"X-Daytona-SDK-Version": ""})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain"))
	assert.NotContains(t, string(body), "\x01")
	assert.Contains(t, string(body), "got:hello\n")
	// Input to a finished command: 410.
	st, b = c.tb(sb.ID, "POST", "/process/session/s/command/"+r.CmdID+"/input", map[string]string{"data": "late"})
	assert.Equal(t, 410, st)
	assert.Contains(t, string(b), "gone: command has already completed with exit code 3")

	// Unknown command: the dial fails with the 404.
	_, err = c.dial(ctx, sb.ID, "/process/session/s/command/nope/logs?follow=true")
	require.Error(t, err)

	// Large output: many frames, all ≤ 1 KiB, nothing lost.
	r = c.exec(sb.ID, "s", `for i in $(seq 1 3000); do echo "line $i"; done`, true)
	conn3, err := c.dial(ctx, sb.ID, "/process/session/s/command/"+r.CmdID+"/logs?follow=true")
	require.NoError(t, err)
	big, _, err := readAll(ctx, conn3)
	assert.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err))
	assert.Equal(t, 3000, bytes.Count(big, []byte("\x01\x01\x01line ")))
}

// TestRawLogSnapshotIsTheFileWithItsLength: the raw snapshot (the
// version headers between 0.27 and 0.167) is the log file as it stands,
// markers included, with its length announced: it is served from the file,
// so a snapshot of megabytes costs the emulator no buffer of that size.
func TestRawLogSnapshotIsTheFileWithItsLength(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	c.session(sb.ID, "s")
	r := c.exec(sb.ID, "s", `head -c 1048576 /dev/zero | tr '\0' a | fold -w 1023; echo e >&2`, false)
	require.NotNil(t, r.ExitCode)
	ctx := ctxT(t)
	resp, raw, err := c.req(ctx, "GET", c.srv.ToolboxURL()+"/"+sb.ID+"/process/session/s/command/"+r.CmdID+"/logs", nil,
		map[string]string{"X-Daytona-SDK-Version": "0.100.0"})
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	assert.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain"))
	assert.Equal(t, int64(len(raw)), resp.ContentLength, "the length is announced")
	// The same bytes as the split snapshot's whole log.
	st, b := c.tb(sb.ID, "GET", "/process/session/s/command/"+r.CmdID+"/logs", nil)
	require.Equal(t, 200, st)
	var logs struct{ Output, Stdout, Stderr string }
	require.NoError(t, json.Unmarshal(b, &logs))
	assert.Equal(t, logs.Output, string(raw))
	assert.Equal(t, 1048576, strings.Count(logs.Stdout, "a"))
	assert.Equal(t, "e\n", logs.Stderr)
}

func TestSessionsLostOnStop(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	c.session(sb.ID, "s")
	r := c.exec(sb.ID, "s", "sleep 60", true)
	assert.Equal(t, []string{"s"}, c.srv.Sessions(sb.ID))
	c.api("POST", "/sandbox/"+sb.ID+"/stop", nil)
	require.NoError(t, c.srv.AwaitState(ctxT(t), sb.ID, "stopped"))
	c.api("POST", "/sandbox/"+sb.ID+"/start", nil)
	assert.Empty(t, c.srv.Sessions(sb.ID))
	st, _ := c.tb(sb.ID, "GET", "/process/session/s", nil)
	assert.Equal(t, 404, st)
	st, _ = c.tb(sb.ID, "GET", "/process/session/s/command/"+r.CmdID, nil)
	assert.Equal(t, 404, st)
}

func TestOneShotExecute(t *testing.T) {
	t.Parallel()
	c := newTC(t)
	sb := c.create(nil)
	info, _ := c.srv.Sandbox(sb.ID)
	st, b := c.tb(sb.ID, "POST", "/process/execute", map[string]any{"command": "echo out; echo err >&2; pwd; echo $X; exit 4", "envs": map[string]string{"X": "y"}})
	require.Equal(t, 200, st, string(b))
	var r struct {
		ExitCode int    `json:"exitCode"`
		Result   string `json:"result"`
	}
	require.NoError(t, json.Unmarshal(b, &r))
	assert.Equal(t, 4, r.ExitCode)
	assert.Equal(t, "out\nerr\n"+info.HomeDir+"\ny\n", r.Result)
	assert.Equal(t, 1, c.srv.CountDispatches("echo out"))

	st, b = c.tb(sb.ID, "POST", "/process/execute", map[string]any{"command": "sleep 30", "timeout": 1})
	assert.Equal(t, 408, st)
	assert.Equal(t, "request timeout: command execution timeout", decode[apiError](t, b).Message)

	st, b = c.tb(sb.ID, "POST", "/process/execute", map[string]any{"command": "true", "cwd": "/nonexistent-dir"})
	require.Equal(t, 200, st)
	require.NoError(t, json.Unmarshal(b, &r))
	assert.Equal(t, -1, r.ExitCode)

	// As in the daemon, the reply waits for every holder of the output
	// pipe, a background job that left the group included.
	st, b = c.tb(sb.ID, "POST", "/process/execute", map[string]any{"command": "setsid sh -c 'sleep 1; echo late' & echo bg; exit 2"})
	require.Equal(t, 200, st)
	require.NoError(t, json.Unmarshal(b, &r))
	assert.Equal(t, 2, r.ExitCode)
	assert.Equal(t, "bg\nlate\n", r.Result)

	st, _ = c.tb(sb.ID, "POST", "/process/execute", map[string]any{"command": "true", "envs": map[string]string{"1BAD": "x"}})
	assert.Equal(t, 400, st)

	// The answer is byte for byte json.Marshal's (HTML characters, U+2028,
	// invalid UTF-8 as \ufffd), also for output larger than the emulator's
	// chunks, whose multi-byte sequences straddle pipe reads.
	var want strings.Builder
	for i := 1; i <= 20000; i++ {
		fmt.Fprintf(&want, "\xe2\x82\xac<%d>&\xff\xe2\x80\xa8\"\n", i)
	}
	st, b = c.tb(sb.ID, "POST", "/process/execute", map[string]any{"command": `for i in $(seq 1 20000); do printf '\xe2\x82\xac<%d>&\xff\xe2\x80\xa8"\n' $i; done`})
	require.Equal(t, 200, st)
	raw, err := json.Marshal(map[string]any{"exitCode": 0, "result": want.String()})
	require.NoError(t, err)
	require.Equal(t, string(raw), string(b))
}

func TestPTY(t *testing.T) {
	t.Parallel()
	c := newTC(t)
	sb := c.create(nil)
	st, b := c.tb(sb.ID, "POST", "/process/pty", map[string]any{"id": "p1", "cols": 120, "rows": 30, "lazyStart": true})
	require.Equal(t, 201, st, string(b))
	assert.JSONEq(t, `{"sessionId":"p1"}`, string(b))
	st, _ = c.tb(sb.ID, "POST", "/process/pty", map[string]any{"id": "p1"})
	assert.Equal(t, 409, st)

	ctx := ctxT(t)
	conn, err := c.dial(ctx, sb.ID, "/process/pty/p1/connect")
	require.NoError(t, err)
	typ, p, err := conn.Read(ctx)
	require.NoError(t, err)
	assert.Equal(t, websocket.MessageText, typ)
	assert.JSONEq(t, `{"type":"control","status":"connected"}`, string(p))

	require.NoError(t, conn.Write(ctx, websocket.MessageBinary, []byte("echo pty-$((40+2))\r")))
	var out []byte
	for !bytes.Contains(out, []byte("pty-42")) {
		_, p, err := conn.Read(ctx)
		require.NoError(t, err, "output so far: %q", out)
		out = append(out, p...)
	}
	st, b = c.tb(sb.ID, "POST", "/process/pty/p1/resize", map[string]int{"cols": 100, "rows": 40})
	require.Equal(t, 200, st, string(b))
	assert.Contains(t, string(b), `"cols":100`)
	require.NoError(t, conn.Write(ctx, websocket.MessageBinary, []byte("exit 3\r")))
	_, _, err = readAll(ctx, conn)
	var ce websocket.CloseError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, websocket.StatusInternalError, ce.Code)
	assert.JSONEq(t, `{"exitCode":3,"exitReason":"non-zero exit"}`, ce.Reason)

	// Kill via DELETE: 137 SIGKILL in the close reason.
	st, _ = c.tb(sb.ID, "POST", "/process/pty", map[string]any{"id": "p2"})
	require.Equal(t, 201, st)
	conn2, err := c.dial(ctx, sb.ID, "/process/pty/p2/connect")
	require.NoError(t, err)
	_, _, err = conn2.Read(ctx) // control
	require.NoError(t, err)
	st, b = c.tb(sb.ID, "DELETE", "/process/pty/p2", nil)
	require.Equal(t, 200, st)
	assert.JSONEq(t, `{"message":"PTY session deleted"}`, string(b))
	_, _, err = readAll(ctx, conn2)
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.JSONEq(t, `{"exitCode":137,"exitReason":"SIGKILL"}`, ce.Reason)

	// Connecting to an unknown PTY: an error control message.
	conn3, err := c.dial(ctx, sb.ID, "/process/pty/nope/connect")
	require.NoError(t, err)
	_, p, err = conn3.Read(ctx)
	require.NoError(t, err)
	assert.Contains(t, string(p), `"status":"error"`)
	_ = conn3.CloseNow()
}

// multipartUpload builds a bulk-upload body.
func multipartUpload(t *testing.T, files map[string][]byte, order []string) (string, []byte) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i, p := range order {
		require.NoError(t, mw.WriteField(fmt.Sprintf("files[%d].path", i), p))
		w, err := mw.CreateFormFile(fmt.Sprintf("files[%d].file", i), p)
		require.NoError(t, err)
		_, _ = w.Write(files[p])
	}
	require.NoError(t, mw.Close())
	return mw.FormDataContentType(), buf.Bytes()
}

func (c *tc) upload(id string, files map[string][]byte, order []string) (int, []byte) {
	c.t.Helper()
	ct, body := multipartUpload(c.t, files, order)
	resp, b, err := c.req(ctxT(c.t), "POST", c.srv.ToolboxURL()+"/"+id+"/files/bulk-upload", body, map[string]string{"Content-Type": ct})
	require.NoError(c.t, err)
	return resp.StatusCode, b
}

func TestFiles(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	info, _ := c.srv.Sandbox(sb.ID)
	home := info.HomeDir
	files := map[string][]byte{home + "/a/b.txt": []byte("hello"), "rel.txt": []byte("relative")}
	st, b := c.upload(sb.ID, files, []string{home + "/a/b.txt", "rel.txt"})
	require.Equal(t, 200, st, string(b))
	assert.JSONEq(t, `{"files":[{"path":"`+home+`/a/b.txt","bytes":5},{"path":"rel.txt","bytes":8}]}`, string(b))
	got, err := os.ReadFile(info.HostPath("rel.txt"))
	require.NoError(t, err)
	assert.Equal(t, "relative", string(got))

	st, b = c.tb(sb.ID, "GET", "/files/download?path="+url.QueryEscape(home+"/a/b.txt"), nil)
	require.Equal(t, 200, st)
	assert.Equal(t, "hello", string(b))

	st, b = c.tb(sb.ID, "GET", "/files/info?path="+url.QueryEscape(home+"/a"), nil)
	require.Equal(t, 200, st)
	assert.Contains(t, string(b), `"isDir":true`)
	st, b = c.tb(sb.ID, "GET", "/files/info?path="+url.QueryEscape(home+"/missing"), nil)
	assert.Equal(t, 404, st)
	assert.Empty(t, b)

	st, _ = c.tb(sb.ID, "POST", "/files/folder?path="+url.QueryEscape(home+"/x/y")+"&mode=700", nil)
	assert.Equal(t, 201, st)
	fi, err := os.Stat(info.HostPath(home + "/x/y"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	st, _ = c.tb(sb.ID, "POST", "/files/permissions?path="+url.QueryEscape(home+"/a/b.txt")+"&mode=600", nil)
	assert.Equal(t, 200, st)
	fi, _ = os.Stat(info.HostPath(home + "/a/b.txt"))
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	// Bulk download: parts in request order, errors as error parts.
	resp, body, err := c.req(ctxT(t), "POST", c.srv.ToolboxURL()+"/"+sb.ID+"/files/bulk-download",
		map[string]any{"paths": []string{home + "/a/b.txt", home + "/nope"}}, nil)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	_, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	require.NoError(t, err)
	assert.Equal(t, "DAYTONA-FILE-BOUNDARY", params["boundary"])
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	p1, err := mr.NextPart()
	require.NoError(t, err)
	assert.Equal(t, "file", p1.FormName())
	_, cd, err := mime.ParseMediaType(p1.Header.Get("Content-Disposition"))
	require.NoError(t, err)
	assert.Equal(t, home+"/a/b.txt", cd["filename"])
	d1, _ := io.ReadAll(p1)
	assert.Equal(t, "hello", string(d1))
	p2, err := mr.NextPart()
	require.NoError(t, err)
	assert.Equal(t, "error", p2.FormName())
	d2, _ := io.ReadAll(p2)
	assert.Contains(t, string(d2), `"code":"FILE_NOT_FOUND"`)
	_, err = mr.NextPart()
	assert.Equal(t, io.EOF, err)

	// Delete: directory needs recursive.
	st, _ = c.tb(sb.ID, "DELETE", "/files?path="+url.QueryEscape(home+"/a"), nil)
	assert.Equal(t, 400, st)
	st, _ = c.tb(sb.ID, "DELETE", "/files?path="+url.QueryEscape(home+"/a")+"&recursive=true", nil)
	assert.Equal(t, 204, st)
	_, err = os.Stat(info.HostPath(home + "/a"))
	assert.True(t, os.IsNotExist(err))
}

func TestFilesConfined(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	info, _ := c.srv.Sandbox(sb.ID)
	// Outside both the sandbox tree and /home and /tmp, so it is outside
	// the sandbox in a namespace too (there /tmp is the sandbox's own).
	outside, err := os.MkdirTemp("/var/tmp", "daytonatest-outside-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(outside) })
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o644))
	c.session(sb.ID, "s")
	r := c.exec(sb.ID, "s", fmt.Sprintf("ln -s %s esc && ln -s %s/secret esc-file && ln -s ../../.. up", outside, outside), false)
	require.Equal(t, 0, *r.ExitCode)

	for _, p := range []string{
		"../../../../../../etc/passwd",
		"/etc/passwd",
		info.HomeDir + "/../../../x",
		"esc/secret",
		"esc-file",
		info.HomeDir + "/esc/secret",
		"up/" + filepath.Base(outside),
	} {
		st, b := c.tb(sb.ID, "GET", "/files/download?path="+url.QueryEscape(p), nil)
		assert.Equal(t, 403, st, "download %s", p)
		assert.NotContains(t, string(b), "s3cret")
		st, _ = c.tb(sb.ID, "GET", "/files/info?path="+url.QueryEscape(p), nil)
		assert.Equal(t, 403, st, "info %s", p)
	}
	st, b := c.upload(sb.ID, map[string][]byte{"esc/planted": []byte("x")}, []string{"esc/planted"})
	assert.Equal(t, 400, st)
	assert.Contains(t, string(b), "escapes")
	_, err = os.Stat(filepath.Join(outside, "planted"))
	assert.True(t, os.IsNotExist(err))
	st, _ = c.tb(sb.ID, "POST", "/files/folder?path="+url.QueryEscape("esc/newdir")+"&mode=755", nil)
	assert.Equal(t, 403, st)
	st, _ = c.tb(sb.ID, "POST", "/files/permissions?path=esc-file&mode=777", nil)
	assert.Equal(t, 403, st)
	// Deleting the symlink itself is fine and leaves the target alone.
	st, _ = c.tb(sb.ID, "DELETE", "/files?path=esc-file", nil)
	assert.Equal(t, 204, st)
	_, err = os.Stat(filepath.Join(outside, "secret"))
	assert.NoError(t, err)
}

func TestDiskFull(t *testing.T) {
	t.Parallel()
	c := newTC(t)
	sb := c.create(nil)
	require.NoError(t, c.srv.SetDiskAllocation(sb.ID, 64*1024))
	big := bytes.Repeat([]byte("z"), 100*1024)
	st, b := c.upload(sb.ID, map[string][]byte{"big.bin": big, "small.txt": []byte("ok")}, []string{"small.txt", "big.bin"})
	assert.Equal(t, 400, st)
	var res struct {
		Errors []string `json:"errors"`
		Files  []struct {
			Path  string `json:"path"`
			Bytes int64  `json:"bytes"`
		} `json:"files"`
	}
	require.NoError(t, json.Unmarshal(b, &res))
	require.Len(t, res.Errors, 1)
	assert.Contains(t, res.Errors[0], "big.bin: write: write ")
	assert.Contains(t, res.Errors[0], "no space left on device")
	require.Len(t, res.Files, 1)
	assert.Equal(t, "small.txt", res.Files[0].Path)
	used, err := c.srv.DiskUsage(sb.ID)
	require.NoError(t, err)
	assert.Less(t, used, int64(64*1024), "the partial upload is removed")

	// Commands: writes past the remaining allocation fail.
	c.session(sb.ID, "s")
	r := c.exec(sb.ID, "s", "head -c 200000 /dev/zero > fill.bin", false)
	assert.NotEqual(t, 0, *r.ExitCode)
	assert.Contains(t, *r.Stderr, "File too large")
	st, b = c.tb(sb.ID, "POST", "/process/execute", map[string]any{"command": "head -c 200000 /dev/zero > fill2.bin"})
	require.Equal(t, 200, st)
	assert.Contains(t, string(b), "File too large")
	// The partial files stay (the disk is full) until removed.
	r = c.exec(sb.ID, "s", "echo x > tiny.txt", false)
	assert.NotEqual(t, 0, *r.ExitCode)
	r = c.exec(sb.ID, "s", "rm -f fill.bin fill2.bin", false)
	require.Equal(t, 0, *r.ExitCode)
	// Small writes work again.
	r = c.exec(sb.ID, "s", "echo tiny > tiny.txt && cat tiny.txt", false)
	assert.Equal(t, 0, *r.ExitCode)
	assert.Equal(t, "tiny\n", *r.Stdout)
}

// Processes that escape the shell's process group must not keep a session
// or PTY (and so Close) alive.
func TestStragglersDoNotBlockTeardown(t *testing.T) {
	t.Parallel()
	c := newTC(t)
	sb := c.create(nil)
	c.session(sb.ID, "s")
	r := c.exec(sb.ID, "s", "setsid sleep 4 &", false)
	require.Equal(t, 0, *r.ExitCode)
	st, b := c.tb(sb.ID, "POST", "/process/pty", map[string]any{"id": "p"})
	require.Equal(t, 201, st, string(b))
	ctx := ctxT(t)
	conn, err := c.dial(ctx, sb.ID, "/process/pty/p/connect")
	require.NoError(t, err)
	_, _, err = conn.Read(ctx) // control
	require.NoError(t, err)
	require.NoError(t, conn.Write(ctx, websocket.MessageBinary, []byte("sleep 4 &\r echo started-bg\r")))
	var out []byte
	for !bytes.Contains(out, []byte("started-bg\r\n")) {
		_, p, err := conn.Read(ctx)
		require.NoError(t, err)
		out = append(out, p...)
	}
	st, _ = c.api("DELETE", "/sandbox/"+sb.ID, nil)
	require.Equal(t, 200, st)
	require.NoError(t, c.srv.AwaitGone(ctx, sb.ID))
	_ = conn.CloseNow()
}

// TestStructuredSessionErrors: with WithStructuredErrors an exec on a lost
// session, or on one whose shell died, is a newer daemon's 410
// SESSION_ENDED instead of v0.190.0's 500.
func TestStructuredSessionErrors(t *testing.T) {
	t.Parallel()
	c := newTC(t, daytonatest.WithStructuredErrors())
	sb := c.create(nil)
	st, b := c.tb(sb.ID, "POST", "/process/session/nope/exec", map[string]any{"command": "true"})
	assert.Equal(t, 410, st)
	body := decode[map[string]any](t, b)
	assert.Equal(t, "SESSION_ENDED", body["code"])
	assert.Equal(t, float64(410), body["statusCode"])
	assert.Equal(t, "/proxy/toolbox/"+sb.ID+"/process/session/nope/exec", body["path"])
	c.session(sb.ID, "s")
	require.True(t, c.srv.KillSessionShell(sb.ID, "s", syscall.SIGKILL))
	require.NoError(t, c.srv.Await(ctxT(t), func() bool { return c.srv.SessionShellExited(sb.ID, "s") }))
	st, b = c.tb(sb.ID, "POST", "/process/session/s/exec", map[string]any{"command": "true"})
	assert.Equal(t, 410, st)
	assert.Equal(t, "SESSION_ENDED", decode[map[string]any](t, b)["code"])
}

// TestLabelerCost: WithLabelerCost paces each stream's labeler to the
// cost it is given, so 200 lines at 5 ms a line take at least a second
// to reach the log (a lower bound: a loaded machine only adds to it).
// Without the option the emulator charges nothing.
func TestLabelerCost(t *testing.T) {
	t.Parallel()
	c := newTC(t, daytonatest.WithLabelerCost(daytonatest.LabelerCost{PerLine: 5 * time.Millisecond}))
	sb := c.create(nil)
	c.session(sb.ID, "s")
	begin := time.Now()
	r := c.exec(sb.ID, "s", "seq 1 200", false)
	assert.GreaterOrEqual(t, time.Since(begin), time.Second)
	require.NotNil(t, r.Stdout)
	assert.Equal(t, 200, strings.Count(*r.Stdout, "\n"))
	assert.Equal(t, time.Duration(3100), daytonatest.DaemonLabelerCost.PerLine)
	assert.Equal(t, time.Duration(150), daytonatest.DaemonLabelerCost.PerByte)
}

// TestToolboxUpstream: with WithToolboxUpstream the toolbox calls of
// every sandbox go to the daemon at the URL, relative to the sandbox and
// without the API key; the control plane stays the emulator's. An
// upstream that is not a loopback http URL is refused with 502.
func TestToolboxUpstream(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI()+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"cmdId":"from-upstream"}`))
	}))
	t.Cleanup(up.Close)
	c := newTC(t, daytonatest.WithToolboxUpstream(up.URL))
	sb := c.create(nil)
	st, b := c.tb(sb.ID, "POST", "/process/session/s/exec?x=1", map[string]any{"command": "true", "runAsync": true})
	assert.Equal(t, 202, st)
	assert.JSONEq(t, `{"cmdId":"from-upstream"}`, string(b))
	mu.Lock()
	assert.Equal(t, []string{"POST /process/session/s/exec?x=1 auth="}, got)
	mu.Unlock()
	assert.Equal(t, 1, c.srv.CountRequests("POST", "/process/session/{sessionId}/exec"), "logged as ever")

	bad := newTC(t, daytonatest.WithToolboxUpstream("http://daemon.invalid:2280"))
	sb = bad.create(nil)
	st, _ = bad.tb(sb.ID, "POST", "/process/session/s/exec", map[string]any{"command": "true"})
	assert.Equal(t, 502, st)
}
