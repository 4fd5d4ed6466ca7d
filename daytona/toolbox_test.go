package daytona

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawLog builds a marker log from (stream, line) pairs.
func rawLog(parts ...any) ([]byte, string, string) {
	var raw, out, errb bytes.Buffer
	for i := 0; i < len(parts); i += 2 {
		s := parts[i].(Stream)
		line := parts[i+1].(string)
		if s == Stdout {
			raw.Write(markerStdout)
			out.WriteString(line)
		} else {
			raw.Write(markerStderr)
			errb.WriteString(line)
		}
		raw.WriteString(line)
	}
	return raw.Bytes(), out.String(), errb.String()
}

func collect(d *Demuxer, frames [][]byte) (string, string, bool) {
	var out, errb bytes.Buffer
	var offs [3]int64
	ok := true
	emit := func(c LogChunk) {
		if c.Offset != offs[c.Stream] {
			ok = false
		}
		offs[c.Stream] += int64(len(c.Data))
		if c.Stream == Stdout {
			out.Write(c.Data)
		} else {
			errb.Write(c.Data)
		}
	}
	for _, f := range frames {
		d.Write(f, emit)
	}
	d.Flush(emit)
	return out.String(), errb.String(), ok
}

func TestDemuxerEverySplit(t *testing.T) {
	t.Parallel()
	raw, wantOut, wantErr := rawLog(Stdout, "hello\n", Stderr, "oops\n", Stdout, "x\x01y\x02\x02z\n", Stderr, "\n", Stdout, "tail")
	raw = append([]byte("unlabeled"), raw...)
	// Every single split point, and every pair of split points.
	for i := 0; i <= len(raw); i++ {
		for j := i; j <= len(raw); j++ {
			out, errb, ok := collect(NewDemuxer(), [][]byte{raw[:i], raw[i:j], raw[j:]})
			require.Equal(t, wantOut, out, "split %d,%d", i, j)
			require.Equal(t, wantErr, errb, "split %d,%d", i, j)
			require.True(t, ok, "offsets contiguous at split %d,%d", i, j)
		}
	}
	// One byte per write.
	var frames [][]byte
	for i := range raw {
		frames = append(frames, raw[i:i+1])
	}
	out, errb, _ := collect(NewDemuxer(), frames)
	assert.Equal(t, wantOut, out)
	assert.Equal(t, wantErr, errb)
	d := NewDemuxer()
	collect(d, [][]byte{raw})
	so, se := d.off[Stdout], d.off[Stderr]
	assert.EqualValues(t, len(wantOut), so)
	assert.EqualValues(t, len(wantErr), se)
}

func TestExecuteAndSessions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.handle("POST /toolbox/sb-1/process/execute", func(w http.ResponseWriter, r *http.Request) {
		req := decodeBody[ExecuteRequest](t, r)
		if req.Command == "sleep 100" {
			writeJSON(w, 408, map[string]any{"statusCode": 408, "message": "request timeout: command execution timeout", "code": "REQUEST_TIMEOUT"})
			return
		}
		writeJSON(w, 200, ExecuteResponse{ExitCode: 3, Result: req.Command + "|" + req.Cwd})
	})
	f.handle("POST /toolbox/sb-1/process/session", func(w http.ResponseWriter, r *http.Request) {
		b := decodeBody[map[string]string](t, r)
		if b["sessionId"] == "dup" {
			writeJSON(w, 409, map[string]any{"statusCode": 409, "message": "conflict: session already exists", "code": "CONFLICT"})
			return
		}
		w.WriteHeader(201)
	})
	f.handle("POST /toolbox/sb-1/process/session/s1/exec", func(w http.ResponseWriter, r *http.Request) {
		b := decodeBody[map[string]any](t, r)
		assert.Equal(t, true, b["runAsync"])
		writeJSON(w, 202, map[string]any{"cmdId": "c1", "output": nil, "stdout": nil, "stderr": nil, "exitCode": nil})
	})
	f.handle("GET /toolbox/sb-1/process/session/s1/command/c1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"id": "c1", "command": "x", "exitCode": 7})
	})
	f.handle("GET /toolbox/sb-1/process/session/s1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"sessionId": "s1", "commands": []any{map[string]any{"id": "c1", "command": "x"}}})
	})
	f.handle("DELETE /toolbox/sb-1/process/session/s1", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	f.handle("POST /toolbox/sb-1/process/session/s1/command/c1/input", func(w http.ResponseWriter, r *http.Request) {
		b := decodeBody[map[string]string](t, r)
		assert.Equal(t, "yes", b["data"])
		w.WriteHeader(204)
	})
	f.handle("GET /toolbox/sb-1/user-home-dir", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]string{"dir": "/home/daytona"})
	})

	ctx := t.Context()
	res, _, err := f.c.Toolbox.Execute(ctx, f.ref, &ExecuteRequest{Command: "echo hi", Cwd: "/w", Timeout: 5})
	require.NoError(t, err)
	assert.Equal(t, &ExecuteResponse{ExitCode: 3, Result: "echo hi|/w"}, res)
	_, _, err = f.c.Toolbox.Execute(ctx, f.ref, &ExecuteRequest{Command: "sleep 100"})
	assert.ErrorIs(t, err, ErrTimeout)
	_, _, err = f.c.Toolbox.Execute(ctx, f.ref, &ExecuteRequest{Command: "  "})
	assert.ErrorIs(t, err, ErrInvalidArgument)

	_, err = f.c.Toolbox.CreateSession(ctx, f.ref, "s1")
	require.NoError(t, err)
	_, err = f.c.Toolbox.CreateSession(ctx, f.ref, "dup")
	assert.ErrorIs(t, err, ErrConflict)
	ex, _, err := f.c.Toolbox.ExecuteSessionCommand(ctx, f.ref, "s1", &SessionExecuteRequest{Command: "( ls )", RunAsync: true})
	require.NoError(t, err)
	assert.Equal(t, "c1", ex.CmdID)
	assert.Nil(t, ex.ExitCode)
	cmd, _, err := f.c.Toolbox.GetSessionCommand(ctx, f.ref, "s1", "c1")
	require.NoError(t, err)
	require.NotNil(t, cmd.ExitCode)
	assert.Equal(t, 7, *cmd.ExitCode)
	sess, _, err := f.c.Toolbox.GetSession(ctx, f.ref, "s1")
	require.NoError(t, err)
	assert.Nil(t, sess.Commands[0].ExitCode)
	_, err = f.c.Toolbox.SendInput(ctx, f.ref, "s1", "c1", "yes")
	require.NoError(t, err)
	_, err = f.c.Toolbox.DeleteSession(ctx, f.ref, "s1")
	require.NoError(t, err)
	home, _, err := f.c.Toolbox.UserHomeDir(ctx, f.ref)
	require.NoError(t, err)
	assert.Equal(t, "/home/daytona", home)

	_, _, err = f.c.Toolbox.WorkDir(ctx, SandboxRef{ID: "x"})
	assert.ErrorIs(t, err, ErrInvalidArgument, "a ref without toolboxProxyUrl is refused")
}

func TestCommandLogsSnapshot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	raw, out, errb := rawLog(Stdout, "a\n", Stderr, "b\n")
	f.handle("GET /toolbox/sb-1/process/session/s/command/json/logs", func(w http.ResponseWriter, r *http.Request) {
		assert.Empty(t, r.URL.Query().Get("follow"))
		writeJSON(w, 200, map[string]string{"output": string(raw), "stdout": out, "stderr": errb})
	})
	f.handle("GET /toolbox/sb-1/process/session/s/command/text/logs", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write(raw)
	})
	f.handle("GET /toolbox/sb-1/process/session/s/command/big/logs", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(bytes.Repeat([]byte("z"), 4096))
	})
	for _, id := range []string{"json", "text"} {
		logs, _, err := f.c.Toolbox.GetSessionCommandLogs(t.Context(), f.ref, "s", id, 0)
		require.NoError(t, err)
		assert.Equal(t, out, logs.Stdout, id)
		assert.Equal(t, errb, logs.Stderr, id)
	}
	_, _, err := f.c.Toolbox.GetSessionCommandLogs(t.Context(), f.ref, "s", "big", 1024)
	assert.ErrorIs(t, err, ErrMalformedResponse)
}

// wsServe upgrades and runs fn with the server side of the socket.
func wsServe(t *testing.T, fn func(ctx context.Context, c *websocket.Conn)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "Bearer "+testKey, r.Header.Get("Authorization"))
		assert.Equal(t, SDKVersion, r.Header.Get(HeaderSDKVersion))
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		defer c.CloseNow()
		fn(r.Context(), c)
	}
}

func followAll(t *testing.T, f *fixture, cmd string, opts *FollowOptions) (string, string, error) {
	var out, errb bytes.Buffer
	var offs [3]int64
	err := f.c.Toolbox.FollowSessionCommandLogs(t.Context(), f.ref, "s", cmd, opts, func(c LogChunk) error {
		assert.Equal(t, offs[c.Stream], c.Offset)
		offs[c.Stream] += int64(len(c.Data))
		if c.Stream == Stdout {
			out.Write(c.Data)
		} else {
			errb.Write(c.Data)
		}
		return nil
	})
	return out.String(), errb.String(), err
}

func TestFollowLogsOverWebSocket(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	raw, wantOut, wantErr := rawLog(Stdout, "line one\n", Stderr, "err one\n", Stdout, "tail\x01")
	// Frames cut inside every marker: 1 byte, 2 bytes, then the rest.
	f.handle("GET /toolbox/sb-1/process/session/s/command/split/logs", wsServe(t, func(ctx context.Context, c *websocket.Conn) {
		for i := 0; i < len(raw); {
			n := 1 + (i % 3)
			end := min(i+n, len(raw))
			if c.Write(ctx, websocket.MessageBinary, raw[i:end]) != nil {
				return // the client stopped reading (the callback-error case)
			}
			i = end
		}
		_ = c.Close(websocket.StatusNormalClosure, "")
	}))
	f.handle("GET /toolbox/sb-1/process/session/s/command/broken/logs", wsServe(t, func(ctx context.Context, c *websocket.Conn) {
		_ = c.Write(ctx, websocket.MessageBinary, raw[:5])
		_ = c.Close(websocket.StatusInternalError, "read error")
	}))
	f.handle("GET /toolbox/sb-1/process/session/s/command/huge/logs", wsServe(t, func(ctx context.Context, c *websocket.Conn) {
		// One 4 MiB frame: the client reads it in bounded pieces.
		big := append(append([]byte{}, markerStdout...), bytes.Repeat([]byte("q"), 4<<20)...)
		_ = c.Write(ctx, websocket.MessageBinary, big)
		_ = c.Close(websocket.StatusNormalClosure, "")
	}))
	silent := make(chan struct{})
	t.Cleanup(func() { close(silent) })
	f.handle("GET /toolbox/sb-1/process/session/s/command/silent/logs", wsServe(t, func(ctx context.Context, c *websocket.Conn) {
		select {
		case <-silent:
		case <-ctx.Done():
		}
	}))
	f.handle("GET /toolbox/sb-1/process/session/s/command/missing/logs", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 404, map[string]any{"statusCode": 404, "message": "not found: command not found", "code": "NOT_FOUND"})
	})

	out, errb, err := followAll(t, f, "split", nil)
	require.NoError(t, err)
	assert.Equal(t, wantOut, out)
	assert.Equal(t, wantErr, errb)

	_, _, err = followAll(t, f, "broken", nil)
	var se *StreamError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 1011, se.Code)

	out, _, err = followAll(t, f, "huge", nil)
	require.NoError(t, err)
	assert.Len(t, out, 4<<20)

	_, _, err = followAll(t, f, "silent", &FollowOptions{IdleTimeout: 50 * time.Millisecond})
	assert.ErrorIs(t, err, ErrTimeout)

	_, _, err = followAll(t, f, "missing", nil)
	assert.ErrorIs(t, err, ErrNotFound)
	var er *ErrorResponse
	require.ErrorAs(t, err, &er)
	assert.Equal(t, "not found: command not found", er.Message)

	stop := errors.New("enough")
	err = f.c.Toolbox.FollowSessionCommandLogs(t.Context(), f.ref, "s", "split", nil, func(LogChunk) error { return stop })
	assert.ErrorIs(t, err, stop)
}

func TestUploadStreamsMultipart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	type got struct{ names, contents []string }
	var g got
	f.handle("POST /toolbox/sb-1/files/bulk-upload", func(w http.ResponseWriter, r *http.Request) {
		assert.EqualValues(t, -1, r.ContentLength, "chunked, unknown length")
		_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		require.NoError(t, err)
		mr := multipart.NewReader(r.Body, params["boundary"])
		var files []UploadedFile
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				writeJSON(w, 400, map[string]any{"errors": []string{"invalid multipart form"}})
				return
			}
			b, _ := io.ReadAll(p)
			g.names = append(g.names, p.FormName())
			g.contents = append(g.contents, string(b))
			if strings.HasSuffix(p.FormName(), ".file") {
				files = append(files, UploadedFile{Path: partFileName(p), Bytes: int64(len(b))})
			}
		}
		writeJSON(w, 200, map[string]any{"files": files})
	})
	res, _, err := f.c.Files.Upload(t.Context(), f.ref, []UploadFile{
		{Path: "/a/x.txt", Content: strings.NewReader("xx")},
		{Path: "/b/y.bin", Content: strings.NewReader("yyy")},
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"files[0].path", "files[0].file", "files[1].path", "files[1].file"}, g.names)
	assert.Equal(t, []string{"/a/x.txt", "xx", "/b/y.bin", "yyy"}, g.contents)
	assert.Equal(t, []UploadedFile{{"/a/x.txt", 2}, {"/b/y.bin", 3}}, res.Files)

	// A failing source fails the upload with the source's error.
	boom := errors.New("disk read failed")
	_, _, err = f.c.Files.Upload(t.Context(), f.ref, []UploadFile{{Path: "/z", Content: io.MultiReader(strings.NewReader("abc"), &errReader{boom})}})
	assert.ErrorIs(t, err, boom)

	_, _, err = f.c.Files.Upload(t.Context(), f.ref, nil)
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }

func TestUploadRejectedEarly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.handle("POST /toolbox/sb-1/files/bulk-upload", func(w http.ResponseWriter, r *http.Request) {
		// Answer without reading the body (the daemon drains, a proxy may not).
		writeJSON(w, 400, map[string]any{"errors": []string{"invalid multipart form"}})
	})
	// An endless source: the call must still end once the server answered.
	_, _, err := f.c.Files.Upload(t.Context(), f.ref, []UploadFile{{Path: "/z", Content: &endless{}}})
	require.Error(t, err)
	var er *ErrorResponse
	if errors.As(err, &er) {
		assert.Equal(t, []string{"invalid multipart form"}, er.Errors)
	}
}

type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'e'
	}
	return len(p), nil
}

func TestDownloads(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.handle("GET /toolbox/sb-1/files/download", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("path") {
		case "/ok":
			_, _ = io.WriteString(w, "content")
		case "/short":
			w.Header().Set("Content-Length", "100")
			_, _ = io.WriteString(w, "only a bit")
		default:
			w.WriteHeader(404)
		}
	})
	writePart := func(mw *multipart.Writer, name, path, ctype string, body []byte, declared int) {
		h := make(map[string][]string)
		h["Content-Disposition"] = []string{fmt.Sprintf(`form-data; name=%q; filename=%q`, name, path)}
		h["Content-Type"] = []string{ctype}
		h["Content-Length"] = []string{fmt.Sprint(declared)}
		pw, _ := mw.CreatePart(h)
		_, _ = pw.Write(body)
	}
	f.handle("POST /toolbox/sb-1/files/bulk-download", func(w http.ResponseWriter, r *http.Request) {
		b := decodeBody[map[string][]string](t, r)
		mw := multipart.NewWriter(w)
		_ = mw.SetBoundary("DAYTONA-FILE-BOUNDARY")
		w.Header().Set("Content-Type", "multipart/form-data; boundary=DAYTONA-FILE-BOUNDARY")
		switch b["paths"][0] {
		case "/a":
			writePart(mw, "file", "/a", "text/plain", []byte("AAA"), 3)
			writePart(mw, "error", "/missing", "application/json", []byte(`{"statusCode":404,"message":"file not found: /missing","code":"FILE_NOT_FOUND","path":"/missing"}`), 95)
			writePart(mw, "file", "/c", "application/octet-stream", []byte("CC"), 2)
			_ = mw.Close()
		case "/truncated":
			writePart(mw, "file", "/truncated", "text/plain", []byte("par"), 10)
			// no closing boundary: the server failed mid-file
		case "/few":
			writePart(mw, "file", "/few", "text/plain", []byte("x"), 1)
			_ = mw.Close()
		}
	})

	body, _, err := f.c.Files.Download(t.Context(), f.ref, "/ok")
	require.NoError(t, err)
	b, err := io.ReadAll(body)
	require.NoError(t, err)
	require.NoError(t, body.Close())
	assert.Equal(t, "content", string(b))

	_, _, err = f.c.Files.Download(t.Context(), f.ref, "/nope")
	assert.ErrorIs(t, err, ErrNotFound)

	body, _, err = f.c.Files.Download(t.Context(), f.ref, "/short")
	require.NoError(t, err)
	_, err = io.ReadAll(body)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	body.Close()

	bd, _, err := f.c.Files.DownloadFiles(t.Context(), f.ref, []string{"/a", "/missing", "/c"})
	require.NoError(t, err)
	var seen []string
	for {
		p, err := bd.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if p.Err != nil {
			assert.ErrorIs(t, p.Err, ErrNotFound)
			seen = append(seen, p.Path+":err")
			continue
		}
		c, err := io.ReadAll(p)
		require.NoError(t, err)
		seen = append(seen, p.Path+":"+string(c))
	}
	require.NoError(t, bd.Close())
	assert.Equal(t, []string{"/a:AAA", "/missing:err", "/c:CC"}, seen)

	bd, _, err = f.c.Files.DownloadFiles(t.Context(), f.ref, []string{"/truncated"})
	require.NoError(t, err)
	p, err := bd.Next()
	require.NoError(t, err)
	_, err = io.ReadAll(p)
	assert.Error(t, err, "a part cut short is an error")
	bd.Close()

	bd, _, err = f.c.Files.DownloadFiles(t.Context(), f.ref, []string{"/few", "/other"})
	require.NoError(t, err)
	_, err = bd.Next()
	require.NoError(t, err)
	_, err = bd.Next()
	assert.ErrorIs(t, err, ErrMalformedResponse, "fewer parts than requested")
	bd.Close()
}

func TestFileManagement(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var queries []string
	rec := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			queries = append(queries, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
			w.WriteHeader(code)
		}
	}
	f.handle("POST /toolbox/sb-1/files/folder", rec(201))
	f.handle("DELETE /toolbox/sb-1/files", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("recursive") != "true" {
			w.WriteHeader(400) // empty body, as the daemon does
			return
		}
		rec(204)(w, r)
	})
	f.handle("POST /toolbox/sb-1/files/permissions", rec(200))
	f.handle("GET /toolbox/sb-1/files/info", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("path") != "/x" {
			w.WriteHeader(404)
			return
		}
		writeJSON(w, 200, map[string]any{"name": "x", "size": 12, "mode": "-rw-r--r--", "isDir": false, "permissions": "0644", "owner": "1000", "group": "1000", "modifiedAt": "2026-06-23T10:00:00Z"})
	})
	f.handle("GET /toolbox/sb-1/files", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, []any{map[string]any{"name": "x", "size": 1, "isDir": false}})
	})
	ctx := t.Context()
	_, err := f.c.Files.CreateFolder(ctx, f.ref, "/w/a b", "")
	require.NoError(t, err)
	_, err = f.c.Files.CreateFolder(ctx, f.ref, "/w", "9x")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = f.c.Files.Delete(ctx, f.ref, "/w", false)
	assert.ErrorIs(t, err, ErrBadRequest)
	_, err = f.c.Files.Delete(ctx, f.ref, "/w", true)
	require.NoError(t, err)
	_, err = f.c.Files.SetPermissions(ctx, f.ref, "/w", Permissions{Mode: "755", Owner: "daytona"})
	require.NoError(t, err)
	fi, _, err := f.c.Files.Info(ctx, f.ref, "/x")
	require.NoError(t, err)
	assert.Equal(t, int64(12), fi.Size)
	assert.Equal(t, "0644", fi.Permissions)
	_, _, err = f.c.Files.Info(ctx, f.ref, "/y")
	assert.ErrorIs(t, err, ErrNotFound)
	list, _, err := f.c.Files.List(ctx, f.ref, "")
	require.NoError(t, err)
	assert.Len(t, list, 1)
	assert.Equal(t, []string{
		"POST /toolbox/sb-1/files/folder?mode=755&path=%2Fw%2Fa+b",
		"DELETE /toolbox/sb-1/files?path=%2Fw&recursive=true",
		"POST /toolbox/sb-1/files/permissions?mode=755&owner=daytona&path=%2Fw",
	}, queries)
}

func TestPTY(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.handle("POST /toolbox/sb-1/process/pty", func(w http.ResponseWriter, r *http.Request) {
		req := decodeBody[PTYCreateRequest](t, r)
		assert.True(t, req.LazyStart)
		writeJSON(w, 201, map[string]string{"sessionId": req.ID})
	})
	f.handle("POST /toolbox/sb-1/process/pty/p1/resize", func(w http.ResponseWriter, r *http.Request) {
		b := decodeBody[map[string]int](t, r)
		writeJSON(w, 200, map[string]any{"id": "p1", "cols": b["cols"], "rows": b["rows"], "active": true})
	})
	f.handle("POST /toolbox/sb-1/process/pty/gone/resize", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 410, map[string]string{"error": "PTY session 'gone' has terminated and cannot be resized"})
	})
	f.handle("GET /toolbox/sb-1/process/pty/p1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"id": "p1", "cols": 120, "rows": 30, "active": true, "lazyStart": true, "cwd": "/home/daytona"})
	})
	f.handle("DELETE /toolbox/sb-1/process/pty/p1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]string{"message": "PTY session deleted"})
	})
	big := bytes.Repeat([]byte("i"), 100<<10)
	f.handle("GET /toolbox/sb-1/process/pty/p1/connect", wsServe(t, func(ctx context.Context, c *websocket.Conn) {
		c.SetReadLimit(64 << 10)
		// Write errors end the handler; the client side asserts the outcome.
		if c.Write(ctx, websocket.MessageText, []byte(`{"type":"control","status":"connected"}`)) != nil ||
			c.Write(ctx, websocket.MessageBinary, []byte("$ ")) != nil {
			return
		}
		// Echo input until all of it arrived, in messages ≤ 64 KiB.
		var got int
		for got < len(big) {
			_, msg, err := c.Read(ctx)
			if err != nil {
				t.Errorf("server read: %v", err)
				return
			}
			got += len(msg)
		}
		if c.Write(ctx, websocket.MessageBinary, []byte(fmt.Sprintf("got %d", got))) != nil {
			return
		}
		_ = c.Close(websocket.StatusInternalError, `{"exitCode":137,"exitReason":"SIGKILL"}`)
	}))
	f.handle("GET /toolbox/sb-1/process/pty/missing/connect", wsServe(t, func(ctx context.Context, c *websocket.Conn) {
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"control","status":"error","error":"Failed to connect to PTY session: PTY session missing not found"}`))
	}))

	ctx := t.Context()
	id, _, err := f.c.PTY.Create(ctx, f.ref, &PTYCreateRequest{ID: "p1", Cols: 120, Rows: 30, LazyStart: true})
	require.NoError(t, err)
	assert.Equal(t, "p1", id)
	got, _, err := f.c.PTY.Get(ctx, f.ref, "p1")
	require.NoError(t, err)
	assert.Equal(t, PTYSessionInfo{ID: "p1", Cols: 120, Rows: 30, Active: true, LazyStart: true, Cwd: "/home/daytona"}, *got)
	info, _, err := f.c.PTY.Resize(ctx, f.ref, "p1", 100, 40)
	require.NoError(t, err)
	assert.Equal(t, 100, info.Cols)
	_, _, err = f.c.PTY.Resize(ctx, f.ref, "gone", 100, 40)
	assert.ErrorIs(t, err, ErrGone)
	var er *ErrorResponse
	require.ErrorAs(t, err, &er)
	assert.Contains(t, er.Reason, "has terminated")

	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := f.c.PTY.Connect(cctx, f.ref, "p1")
	require.NoError(t, err)
	_, ok := p.Exit()
	assert.False(t, ok)
	n, err := p.Write(big)
	require.NoError(t, err)
	assert.Equal(t, len(big), n)
	out, err := io.ReadAll(p)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("$ got %d", len(big)), string(out))
	ex, ok := p.Exit()
	require.True(t, ok)
	assert.Equal(t, PTYExit{Code: 137, Reason: "SIGKILL"}, ex)
	require.NoError(t, p.Close())

	_, err = f.c.PTY.Connect(cctx, f.ref, "missing")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = f.c.PTY.Kill(ctx, f.ref, "p1")
	require.NoError(t, err)
}

func TestRandomFramingFollow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var parts []any
	for range 200 {
		s := Stdout
		if rng.IntN(2) == 0 {
			s = Stderr
		}
		parts = append(parts, s, strings.Repeat(string(rune('a'+rng.IntN(26))), rng.IntN(50))+"\n")
	}
	raw, wantOut, wantErr := rawLog(parts...)
	f.handle("GET /toolbox/sb-1/process/session/s/command/rand/logs", wsServe(t, func(ctx context.Context, c *websocket.Conn) {
		r := rand.New(rand.NewPCG(3, 4))
		for i := 0; i < len(raw); {
			end := min(i+1+r.IntN(1024), len(raw))
			_ = c.Write(ctx, websocket.MessageBinary, raw[i:end])
			i = end
		}
		_ = c.Close(websocket.StatusNormalClosure, "")
	}))
	out, errb, err := followAll(t, f, "rand", nil)
	require.NoError(t, err)
	assert.Equal(t, wantOut, out)
	assert.Equal(t, wantErr, errb)
}

func TestNoSecretsInStreamErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.handle("GET /toolbox/sb-1/process/session/s/command/leak/logs", wsServe(t, func(ctx context.Context, c *websocket.Conn) {
		_ = c.Close(websocket.StatusInternalError, "bad key "+testKey)
	}))
	f.handle("GET /toolbox/sb-1/process/pty/leak/connect", wsServe(t, func(ctx context.Context, c *websocket.Conn) {
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"control","status":"error","error":"token `+testKey+` rejected"}`))
	}))
	f.handle("GET /toolbox/sb-1/process/session/s/command/refused/logs", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 401, map[string]any{"statusCode": 401, "message": "bad bearer " + r.Header.Get("Authorization"), "code": "UNAUTHORIZED"})
	})
	_, _, err := followAll(t, f, "leak", nil)
	var se *StreamError
	require.ErrorAs(t, err, &se)
	assert.NotContains(t, err.Error(), testKey)
	assert.NotContains(t, se.Reason, testKey)

	_, err = f.c.PTY.Connect(t.Context(), f.ref, "leak")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), testKey)

	_, _, err = followAll(t, f, "refused", nil)
	assert.ErrorIs(t, err, ErrUnauthorized)
	assert.NotContains(t, err.Error(), testKey)
}

func TestStreamSessionCommandLogs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	raw, wantOut, wantErr := rawLog(Stdout, "a\n", Stderr, "b\n", Stdout, strings.Repeat("c", 100000)+"\n")
	f.handle("GET /toolbox/sb-1/process/session/s/command/raw/logs", func(w http.ResponseWriter, r *http.Request) {
		assert.Empty(t, r.Header.Get(HeaderSDKVersion), "raw logs are asked for without the version header")
		assert.Equal(t, "true", r.Header.Get(HeaderSplitOutput))
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		// Write in odd pieces so markers straddle reads.
		for i := 0; i < len(raw); i += 7 {
			_, _ = w.Write(raw[i:min(i+7, len(raw))])
		}
	})
	f.handle("GET /toolbox/sb-1/process/session/s/command/json/logs", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]string{"output": string(raw), "stdout": wantOut, "stderr": wantErr})
	})
	for _, id := range []string{"raw", "json"} {
		var out, errb bytes.Buffer
		err := f.c.Toolbox.StreamSessionCommandLogs(t.Context(), f.ref, "s", id, func(c LogChunk) error {
			if c.Stream == Stdout {
				assert.EqualValues(t, out.Len(), c.Offset)
				out.Write(c.Data)
			} else {
				assert.EqualValues(t, errb.Len(), c.Offset)
				errb.Write(c.Data)
			}
			return nil
		})
		require.NoError(t, err, id)
		assert.Equal(t, wantOut, out.String(), id)
		assert.Equal(t, wantErr, errb.String(), id)
	}
}
