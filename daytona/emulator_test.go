package daytona_test

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/daytona/internal/xfer"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

func testName() string { return "daytona-client-test-" + uuid.NewString()[:8] }

func TestEmulatorLifecycle(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	srv, c := env.Server, env.Client
	ctx := t.Context()
	name := testName()
	sb, _, err := c.Sandboxes.Create(ctx, &daytona.CreateSandboxRequest{
		Name: name, Snapshot: "base", Labels: map[string]string{"owner": "me", "purpose": "test"},
		Env: map[string]string{"FOO": "bar"}, AutoStopInterval: new(15), AutoArchiveInterval: new(60),
		AutoDeleteInterval: new(-1),
	})
	require.NoError(t, err)
	assert.Equal(t, name, sb.Name)
	assert.NotEmpty(t, sb.ToolboxProxyURL)
	sb, err = c.Sandboxes.WaitUntilStarted(ctx, sb.ID)
	require.NoError(t, err)
	require.NotNil(t, sb.AutoStopInterval)
	assert.Equal(t, 15, *sb.AutoStopInterval)
	assert.Equal(t, "bar", sb.Env["FOO"])

	byName, _, err := c.Sandboxes.Get(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, sb.ID, byName.ID)

	_, _, err = c.Sandboxes.Create(ctx, &daytona.CreateSandboxRequest{Name: name, Snapshot: "base"})
	assert.ErrorIs(t, err, daytona.ErrConflict, "names are unique")

	other := env.StartSandbox(t, nil)
	list, err := c.Sandboxes.ListAll(ctx, &daytona.ListOptions{Labels: map[string]string{"owner": "me"}, Limit: 1})
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, sb.ID, list[0].ID)

	_, _, err = c.Sandboxes.SetAutoStopInterval(ctx, sb.ID, 30)
	require.NoError(t, err)
	_, _, err = c.Sandboxes.SetAutoArchiveInterval(ctx, sb.ID, 120)
	require.NoError(t, err)
	_, _, err = c.Sandboxes.SetAutoDeleteInterval(ctx, sb.ID, 60)
	require.NoError(t, err)
	labels, _, err := c.Sandboxes.ReplaceLabels(ctx, sb.ID, map[string]string{"owner": "you"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"owner": "you"}, labels)
	_, err = c.Sandboxes.UpdateLastActivity(ctx, sb.ID)
	require.NoError(t, err)
	got, _, err := c.Sandboxes.Get(ctx, sb.ID)
	require.NoError(t, err)
	assert.Equal(t, 30, *got.AutoStopInterval)
	assert.Equal(t, 120, *got.AutoArchiveInterval)
	assert.Equal(t, 60, *got.AutoDeleteInterval)
	assert.Equal(t, map[string]string{"owner": "you"}, got.Labels)
	proxy, _, err := c.Sandboxes.ToolboxProxyURL(ctx, sb.ID)
	require.NoError(t, err)
	assert.Equal(t, sb.ToolboxProxyURL, proxy)
	pv, _, err := c.Sandboxes.PreviewURL(ctx, sb.ID, 3000)
	require.NoError(t, err)
	assert.NotEmpty(t, pv.URL)

	_, _, err = c.Sandboxes.Stop(ctx, sb.ID, false)
	require.NoError(t, err)
	stopped, err := c.Sandboxes.WaitUntilStopped(ctx, sb.ID)
	require.NoError(t, err)
	assert.Equal(t, daytona.StateStopped, stopped.State)
	_, _, err = c.Sandboxes.Archive(ctx, sb.ID)
	require.NoError(t, err)
	_, err = c.Sandboxes.WaitForState(ctx, sb.ID, daytona.StateArchived)
	require.NoError(t, err)
	_, _, err = c.Sandboxes.Start(ctx, sb.ID)
	require.NoError(t, err)
	_, err = c.Sandboxes.WaitUntilStarted(ctx, sb.ID)
	require.NoError(t, err)

	require.NoError(t, c.Sandboxes.DeleteAndWait(ctx, sb.ID))
	_, _, err = c.Sandboxes.Get(ctx, sb.ID)
	assert.ErrorIs(t, err, daytona.ErrNotFound)
	require.NoError(t, c.Sandboxes.DeleteAndWait(ctx, sb.ID), "deleting twice is fine")
	require.NoError(t, c.Sandboxes.DeleteAndWait(ctx, other.Name))
	assert.Empty(t, srv.Sandboxes(), "everything deleted")
}

// TestEmulatorSandbox runs the client against the emulator, each row with
// its own emulator and one started sandbox.
func TestEmulatorSandbox(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, env *testenv.Env, sb *testenv.Sandbox)
	}{
		{"error state and missing container", emulatorErrorStateAndMissingContainer},
		{"toolbox process", emulatorToolboxProcess},
		{"log follow faults", emulatorLogFollowFaults},
		{"files", emulatorFiles},
		{"pty", emulatorPTY},
		{"retries and uncertain create", emulatorRetriesAndUncertainCreate},
		{"disk full", emulatorDiskFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := testenv.New(t)
			tc.run(t, env, env.StartSandbox(t, nil))
		})
	}
}

func emulatorErrorStateAndMissingContainer(t *testing.T, env *testenv.Env, sb *testenv.Sandbox) {
	srv, c, ctx := env.Server, env.Client, t.Context()

	require.NoError(t, srv.LoseContainer(sb.ID))
	_, _, err := c.Toolbox.Execute(ctx, sb.Ref(), &daytona.ExecuteRequest{Command: "true"})
	assert.ErrorIs(t, err, daytona.ErrContainerMissing)
	assert.ErrorIs(t, err, daytona.ErrNotFound)

	require.NoError(t, srv.StopSandbox(sb.ID))
	_, err = c.Sandboxes.WaitUntilStopped(ctx, sb.ID)
	require.NoError(t, err)
	_, _, _ = c.Sandboxes.Start(ctx, sb.ID) // may answer with the error state or 400
	_, err = c.Sandboxes.WaitUntilStarted(ctx, sb.ID)
	var se *daytona.SandboxStateError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, daytona.StateError, se.State)
	assert.False(t, se.Recoverable)
	assert.ErrorIs(t, err, daytona.ErrContainerMissing, "reason %q", se.ErrorReason)
	got, _, err := c.Sandboxes.Get(ctx, sb.ID)
	require.NoError(t, err)
	assert.True(t, got.ContainerMissing())

	other := env.StartSandbox(t, nil)
	require.NoError(t, srv.SetError(other.ID, "no space left on device", true))
	got, _, err = c.Sandboxes.Get(ctx, other.ID)
	require.NoError(t, err)
	assert.Equal(t, daytona.StateError, got.State)
	assert.True(t, got.Recoverable)
	assert.False(t, got.ContainerMissing())
	_, _, err = c.Sandboxes.Recover(ctx, other.ID, false)
	require.NoError(t, err)
	_, err = c.Sandboxes.WaitUntilStarted(ctx, other.ID)
	require.NoError(t, err)
}

func emulatorToolboxProcess(t *testing.T, env *testenv.Env, sb *testenv.Sandbox) {
	c, ctx, ref := env.Client, t.Context(), sb.Ref()

	wd, _, err := c.Toolbox.WorkDir(ctx, ref)
	require.NoError(t, err)
	home, _, err := c.Toolbox.UserHomeDir(ctx, ref)
	require.NoError(t, err)
	assert.NotEmpty(t, wd)
	assert.NotEmpty(t, home)

	res, _, err := c.Toolbox.Execute(ctx, ref, &daytona.ExecuteRequest{Command: "echo hi; echo oops >&2; exit 4"})
	require.NoError(t, err)
	assert.Equal(t, 4, res.ExitCode)
	assert.Contains(t, res.Result, "hi")
	assert.Contains(t, res.Result, "oops")

	_, _, err = c.Toolbox.Execute(ctx, ref, &daytona.ExecuteRequest{Command: "sleep 5", Timeout: 1})
	assert.ErrorIs(t, err, daytona.ErrTimeout)

	require.NoErrorf(t, func() error { _, err := c.Toolbox.CreateSession(ctx, ref, "s1"); return err }(), "create session")
	_, err = c.Toolbox.CreateSession(ctx, ref, "s1")
	assert.ErrorIs(t, err, daytona.ErrConflict)

	// Session state carries over.
	ex, _, err := c.Toolbox.ExecuteSessionCommand(ctx, ref, "s1", &daytona.SessionExecuteRequest{Command: "export ZED=42", RunAsync: true})
	require.NoError(t, err)
	waitExit(t, env, ref, "s1", ex.CmdID)

	ex, _, err = c.Toolbox.ExecuteSessionCommand(ctx, ref, "s1", &daytona.SessionExecuteRequest{
		Command: "( echo out $ZED; echo err >&2; printf 'partial'; exit 3 )", RunAsync: true})
	require.NoError(t, err)
	var out, errb bytes.Buffer
	err = c.Toolbox.FollowSessionCommandLogs(ctx, ref, "s1", ex.CmdID, nil, splitLogs(t, &out, &errb))
	require.NoError(t, err)
	code := waitExit(t, env, ref, "s1", ex.CmdID)
	assert.Equal(t, 3, code)
	logs, _, err := c.Toolbox.GetSessionCommandLogs(ctx, ref, "s1", ex.CmdID, 0)
	require.NoError(t, err)
	assert.Equal(t, "out 42\npartial\n", logs.Stdout)
	assert.Equal(t, "err\n", logs.Stderr)
	assert.True(t, strings.HasPrefix(logs.Stdout, out.String()), "followed stdout %q is a prefix of the snapshot", out.String())
	assert.True(t, strings.HasPrefix(logs.Stderr, errb.String()))
	var sOut, sErr bytes.Buffer
	err = c.Toolbox.StreamSessionCommandLogs(ctx, ref, "s1", ex.CmdID, func(ch daytona.LogChunk) error {
		if ch.Stream == daytona.Stdout {
			sOut.Write(ch.Data)
		} else {
			sErr.Write(ch.Data)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, logs.Stdout, sOut.String(), "the streamed raw log matches the JSON snapshot")
	assert.Equal(t, logs.Stderr, sErr.String())

	// Input to an async command.
	ex, _, err = c.Toolbox.ExecuteSessionCommand(ctx, ref, "s1", &daytona.SessionExecuteRequest{Command: "read x; echo got $x", RunAsync: true, SuppressInputEcho: true})
	require.NoError(t, err)
	_, err = c.Toolbox.SendInput(ctx, ref, "s1", ex.CmdID, "abc")
	require.NoError(t, err)
	waitExit(t, env, ref, "s1", ex.CmdID)
	logs, _, err = c.Toolbox.GetSessionCommandLogs(ctx, ref, "s1", ex.CmdID, 0)
	require.NoError(t, err)
	assert.Equal(t, "got abc\n", logs.Stdout)
	_, err = c.Toolbox.SendInput(ctx, ref, "s1", ex.CmdID, "late")
	assert.ErrorIs(t, err, daytona.ErrGone)

	sess, _, err := c.Toolbox.GetSession(ctx, ref, "s1")
	require.NoError(t, err)
	assert.Len(t, sess.Commands, 3)
	_, err = c.Toolbox.DeleteSession(ctx, ref, "s1")
	require.NoError(t, err)
	_, _, err = c.Toolbox.GetSession(ctx, ref, "s1")
	assert.ErrorIs(t, err, daytona.ErrNotFound)
	assert.NotErrorIs(t, err, daytona.ErrContainerMissing)
}

// splitLogs collects followed chunks by stream into out and errb, checking
// that each chunk starts where its stream's previous one ended.
func splitLogs(t *testing.T, out, errb *bytes.Buffer) func(daytona.LogChunk) error {
	return func(ch daytona.LogChunk) error {
		b := out
		if ch.Stream != daytona.Stdout {
			b = errb
		}
		assert.EqualValues(t, b.Len(), ch.Offset)
		b.Write(ch.Data)
		return nil
	}
}

// waitExit waits on the emulator's own record until the command has an
// exit code, then returns the exit code the client reads.
func waitExit(t *testing.T, env *testenv.Env, ref daytona.SandboxRef, sid, cid string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := env.Server.AwaitCommand(ctx, ref.ID, sid, cid)
	require.NoError(t, err)
	cmd, _, err := env.Client.Toolbox.GetSessionCommand(ctx, ref, sid, cid)
	require.NoError(t, err)
	require.NotNil(t, cmd.ExitCode)
	return *cmd.ExitCode
}

func emulatorLogFollowFaults(t *testing.T, env *testenv.Env, sb *testenv.Sandbox) {
	srv, c, ctx, ref := env.Server, env.Client, t.Context(), sb.Ref()
	_, err := c.Toolbox.CreateSession(ctx, ref, "s")
	require.NoError(t, err)
	ex, _, err := c.Toolbox.ExecuteSessionCommand(ctx, ref, "s", &daytona.SessionExecuteRequest{
		Command: "( for i in 1 2 3 4 5; do echo line$i; echo eline$i >&2; done )", RunAsync: true})
	require.NoError(t, err)
	waitExit(t, env, ref, "s", ex.CmdID)
	follow := func(opts *daytona.FollowOptions) (string, string, error) {
		var out, errb bytes.Buffer
		err := c.Toolbox.FollowSessionCommandLogs(ctx, ref, "s", ex.CmdID, opts, func(ch daytona.LogChunk) error {
			if ch.Stream == daytona.Stdout {
				out.Write(ch.Data)
			} else {
				errb.Write(ch.Data)
			}
			return nil
		})
		return out.String(), errb.String(), err
	}
	wantOut := "line1\nline2\nline3\nline4\nline5\n"
	wantErr := "eline1\neline2\neline3\neline4\neline5\n"

	out, errb, err := follow(nil)
	require.NoError(t, err)
	assert.Equal(t, wantOut, out, "replay from byte 0")
	assert.Equal(t, wantErr, errb)

	route := "/process/session/{sessionId}/command/{commandId}/logs"
	h := srv.Inject(daytonatest.Fault{Route: route, WSSilent: true, Times: 1})
	_, _, err = follow(&daytona.FollowOptions{IdleTimeout: 100 * time.Millisecond})
	assert.ErrorIs(t, err, daytona.ErrTimeout, "a silent socket is detected")
	h.Remove()

	h = srv.Inject(daytonatest.Fault{Route: route, WSClose: true, WSCloseAfterBytes: 10, Times: 1})
	_, _, err = follow(nil)
	var se *daytona.StreamError
	assert.ErrorAs(t, err, &se, "an abrupt close is an error, not the end")
	h.Remove()

	h = srv.Inject(daytonatest.Fault{Route: route, WSDropFinal: true, Times: 1})
	out, errb, err = follow(nil)
	require.NoError(t, err)
	h.Remove()
	logs, _, err := c.Toolbox.GetSessionCommandLogs(ctx, ref, "s", ex.CmdID, 0)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(wantOut, out) && strings.HasPrefix(wantErr, errb), "a dropped final frame loses a suffix only")
	assert.Equal(t, wantOut, logs.Stdout, "the snapshot reconciles")
	assert.Equal(t, wantErr, logs.Stderr)

	h = srv.Inject(daytonatest.Fault{Route: route, Status: 404, Times: 1})
	_, _, err = follow(nil)
	assert.ErrorIs(t, err, daytona.ErrNotFound, "a refused upgrade is a typed HTTP error")
	h.Remove()
}

func emulatorFiles(t *testing.T, env *testenv.Env, sb *testenv.Sandbox) {
	c, ctx, ref := env.Client, t.Context(), sb.Ref()
	home, _, err := c.Toolbox.UserHomeDir(ctx, ref)
	require.NoError(t, err)
	dir := home + "/data dir"

	_, err = c.Files.CreateFolder(ctx, ref, dir, "755")
	require.NoError(t, err)
	res, _, err := c.Files.Upload(ctx, ref, []daytona.UploadFile{
		{Path: dir + "/a.txt", Content: strings.NewReader("alpha")},
		{Path: dir + "/sub/b.bin", Content: bytes.NewReader(bytes.Repeat([]byte{0, 1, 2, 255}, 50000))},
	})
	require.NoError(t, err)
	assert.Len(t, res.Files, 2)

	fi, _, err := c.Files.Info(ctx, ref, dir+"/sub/b.bin")
	require.NoError(t, err)
	assert.EqualValues(t, 200000, fi.Size)
	assert.False(t, fi.IsDir)
	_, _, err = c.Files.Info(ctx, ref, dir+"/nope")
	assert.ErrorIs(t, err, daytona.ErrNotFound)

	body, _, err := c.Files.Download(ctx, ref, dir+"/a.txt")
	require.NoError(t, err)
	b, err := io.ReadAll(body)
	require.NoError(t, err)
	body.Close()
	assert.Equal(t, "alpha", string(b))

	bd, _, err := c.Files.DownloadFiles(ctx, ref, []string{dir + "/a.txt", dir + "/missing", dir + "/sub/b.bin"})
	require.NoError(t, err)
	var got []string
	for {
		f, err := bd.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if f.Err != nil {
			assert.ErrorIs(t, f.Err, daytona.ErrNotFound)
			got = append(got, f.Path+" error")
			continue
		}
		n, err := io.Copy(io.Discard, f)
		require.NoError(t, err)
		got = append(got, fmt.Sprintf("%s %d", f.Path, n))
	}
	bd.Close()
	assert.Equal(t, []string{dir + "/a.txt 5", dir + "/missing error", dir + "/sub/b.bin 200000"}, got)

	_, err = c.Files.SetPermissions(ctx, ref, dir+"/a.txt", daytona.Permissions{Mode: "600"})
	require.NoError(t, err)
	fi, _, err = c.Files.Info(ctx, ref, dir+"/a.txt")
	require.NoError(t, err)
	assert.Equal(t, "0600", fi.Permissions)

	list, _, err := c.Files.List(ctx, ref, dir)
	require.NoError(t, err)
	assert.Len(t, list, 2)

	_, err = c.Files.Delete(ctx, ref, dir, false)
	assert.ErrorIs(t, err, daytona.ErrBadRequest, "a directory needs recursive")
	_, err = c.Files.Delete(ctx, ref, dir, true)
	require.NoError(t, err)
	_, _, err = c.Files.Info(ctx, ref, dir)
	assert.ErrorIs(t, err, daytona.ErrNotFound)
}

func emulatorPTY(t *testing.T, env *testenv.Env, sb *testenv.Sandbox) {
	c, ctx, ref := env.Client, t.Context(), sb.Ref()

	id, _, err := c.PTY.Create(ctx, ref, &daytona.PTYCreateRequest{ID: "term", Cols: 120, Rows: 30, LazyStart: true})
	require.NoError(t, err)
	assert.Equal(t, "term", id)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := c.PTY.Connect(cctx, ref, id)
	require.NoError(t, err)
	defer p.Close()
	info, _, err := c.PTY.Resize(ctx, ref, id, 100, 40)
	require.NoError(t, err)
	assert.Equal(t, 100, info.Cols)

	// out is read only after done: the copy has ended by then.
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(&out, p)
		done <- err
	}()
	_, err = p.Write([]byte("echo pty-$((40+2))\rexit 5\r"))
	require.NoError(t, err)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("PTY did not exit")
	}
	assert.Contains(t, out.String(), "pty-42")
	ex, ok := p.Exit()
	require.True(t, ok)
	assert.Equal(t, 5, ex.Code)

	id2, _, err := c.PTY.Create(ctx, ref, &daytona.PTYCreateRequest{ID: "term2", LazyStart: true})
	require.NoError(t, err)
	p2, err := c.PTY.Connect(cctx, ref, id2)
	require.NoError(t, err)
	defer p2.Close()
	_, err = c.PTY.Kill(ctx, ref, id2)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, p2)
	require.NoError(t, err)
	ex, ok = p2.Exit()
	require.True(t, ok)
	assert.Equal(t, 137, ex.Code)

	_, err = c.PTY.Connect(cctx, ref, "no-such-pty")
	assert.Error(t, err)
}

func emulatorRetriesAndUncertainCreate(t *testing.T, env *testenv.Env, sb *testenv.Sandbox) {
	srv, c, ctx := env.Server, env.Client, t.Context()

	// 429 with the bucket's Retry-After on a read: retried.
	srv.ResetRequests()
	srv.Inject(daytonatest.Fault{Method: "GET", Route: "/sandbox/{sandboxIdOrName}", Times: 2, Status: 429,
		Header: http.Header{"Retry-After-authenticated": {"1"}}})
	_, resp, err := c.Sandboxes.Get(ctx, sb.ID)
	require.NoError(t, err)
	assert.Equal(t, 3, resp.Attempts)
	assert.Equal(t, 3, srv.CountRequests("GET", "/sandbox/{sandboxIdOrName}"))

	// An uncertain create: allocated, then the reply is lost (500). The
	// client does not retry; the caller finds the sandbox by its name.
	name := testName()
	srv.Inject(daytonatest.Fault{Method: "POST", Route: "/sandbox", Sandbox: name, Perform: true, Status: 500, Times: 1})
	_, _, err = c.Sandboxes.Create(ctx, &daytona.CreateSandboxRequest{Name: name, Snapshot: "base"})
	assert.ErrorIs(t, err, daytona.ErrServer)
	assert.Equal(t, 1, srv.CountRequests("POST", "/sandbox"), "create is never retried")
	found, _, err := c.Sandboxes.Get(ctx, name)
	require.NoError(t, err)
	require.NoError(t, c.Sandboxes.DeleteAndWait(ctx, found.ID))

	// A hanging call ends with the caller's deadline, as ErrTimeout.
	srv.Inject(daytonatest.Fault{Route: "/process/execute", Hang: true, Times: 1})
	hctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, _, err = c.Toolbox.Execute(hctx, sb.Ref(), &daytona.ExecuteRequest{Command: "true"})
	assert.ErrorIs(t, err, daytona.ErrTimeout)

	// A dropped connection on exec is not retried either.
	srv.ResetRequests()
	_, err = c.Toolbox.CreateSession(ctx, sb.Ref(), "s")
	require.NoError(t, err)
	srv.Inject(daytonatest.Fault{Route: "/process/session/{sessionId}/exec", Drop: true, Times: 1})
	_, _, err = c.Toolbox.ExecuteSessionCommand(ctx, sb.Ref(), "s", &daytona.SessionExecuteRequest{Command: "true", RunAsync: true})
	var te *daytona.TransportError
	assert.ErrorAs(t, err, &te)
	assert.Equal(t, 1, srv.CountRequests("POST", "/process/session/{sessionId}/exec"))

	// A session create is keyed by its ID: a lost answer (the session
	// made, the connection dropped; or made behind a gateway's 503) is
	// resent, and the resend's 409 is its success. A 409 to a first
	// attempt is a real conflict.
	for i, f := range []daytonatest.Fault{{Drop: true}, {Status: 503}} {
		f.Method, f.Route, f.Perform, f.Times = "POST", "/process/session", true, 1
		srv.Inject(f)
		srv.ResetRequests()
		id := fmt.Sprintf("keyed-%d", i)
		resp, err := c.Toolbox.CreateSession(ctx, sb.Ref(), id)
		require.NoError(t, err, "fault %+v", f)
		assert.Equal(t, 2, resp.Attempts)
		assert.Equal(t, http.StatusConflict, resp.StatusCode)
		assert.Equal(t, 2, srv.CountRequests("POST", "/process/session"))
		_, _, err = c.Toolbox.GetSession(ctx, sb.Ref(), id)
		require.NoError(t, err)
	}
	resp, err = c.Toolbox.CreateSession(ctx, sb.Ref(), "keyed-0")
	assert.ErrorIs(t, err, daytona.ErrConflict)
	assert.Nil(t, resp)
	// Only a 409 is a resend's success, and only a keyed route's.
	srv.Inject(daytonatest.Fault{Method: "POST", Route: "/process/session", Status: 503, Times: 1})
	srv.Inject(daytonatest.Fault{Method: "POST", Route: "/process/session", Status: 500, Times: 1})
	_, err = c.Toolbox.CreateSession(ctx, sb.Ref(), "keyed-2")
	assert.ErrorIs(t, err, daytona.ErrServer)
	srv.Inject(daytonatest.Fault{Method: "GET", Route: "/process/session/{sessionId}", Status: 503, Times: 1})
	srv.Inject(daytonatest.Fault{Method: "GET", Route: "/process/session/{sessionId}", Status: 409, Times: 1})
	_, _, err = c.Toolbox.GetSession(ctx, sb.Ref(), "keyed-0")
	assert.ErrorIs(t, err, daytona.ErrConflict)

	// Quota: 400 with the quota text.
	srv.Inject(daytonatest.Fault{Method: "POST", Route: "/sandbox", Status: 400, Times: 1,
		Body: `{"statusCode":400,"error":"Bad Request","message":"Total CPU limit exceeded. Maximum allowed: 10."}`})
	_, _, err = c.Sandboxes.Create(ctx, &daytona.CreateSandboxRequest{Name: testName(), Snapshot: "base"})
	assert.ErrorIs(t, err, daytona.ErrQuota)

	// Wrong key: 401, and the key is not in the error.
	bad, err := daytona.NewClient(daytona.WithAPIURL(srv.URL()), daytona.WithAPIKey("wrong-key-123456"))
	require.NoError(t, err)
	_, _, err = bad.Sandboxes.Get(ctx, sb.ID)
	assert.ErrorIs(t, err, daytona.ErrUnauthorized)
	assert.NotContains(t, err.Error(), "wrong-key-123456")
}

func emulatorDiskFull(t *testing.T, env *testenv.Env, sb *testenv.Sandbox) {
	srv, c, ctx := env.Server, env.Client, t.Context()
	require.NoError(t, srv.SetDiskAllocation(sb.ID, 64<<10))
	home, _, err := c.Toolbox.UserHomeDir(ctx, sb.Ref())
	require.NoError(t, err)
	_, _, err = c.Files.Upload(ctx, sb.Ref(), []daytona.UploadFile{{Path: home + "/big", Content: bytes.NewReader(make([]byte, 1<<20))}})
	require.Error(t, err, "an upload beyond the disk allocation fails")
	assert.ErrorIs(t, err, daytona.ErrDiskFull)
	assert.ErrorIs(t, err, daytona.ErrBadRequest)
}

// emulatorTransferSetup starts the emulator with a sandbox big enough for
// the transfer and returns a client, the sandbox ref and its home dir.
func emulatorTransferSetup(tb testing.TB) (*daytona.Client, daytona.SandboxRef, string) {
	env := testenv.New(tb)
	sb := env.StartSandbox(tb, nil)
	require.NoError(tb, env.Server.SetDiskAllocation(sb.ID, 2<<30))
	home, _, err := env.Client.Toolbox.UserHomeDir(context.Background(), sb.Ref())
	require.NoError(tb, err)
	return env.Client, sb.Ref(), home
}

// TestEmulatorTransfer256MiBBoundedHeap moves 256 MiB up and down through
// the client and the emulator (same process) with a bounded heap. Not
// parallel: the heap of other tests would be measured too.
func TestEmulatorTransfer256MiBBoundedHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 512 MiB through the emulator's disk")
	}
	const size = 256 << 20
	const budget = 32 << 20
	c, ref, home := emulatorTransferSetup(t)
	ctx := t.Context()
	want := xfer.CRC(size)

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-tk.C:
			}
		}
	}()

	res, _, err := c.Files.Upload(ctx, ref, []daytona.UploadFile{{Path: home + "/big.bin", Content: xfer.NewPattern(size)}})
	require.NoError(t, err)
	require.Len(t, res.Files, 1)
	body, _, err := c.Files.Download(ctx, ref, home+"/big.bin")
	require.NoError(t, err)
	h := crc32.NewIEEE()
	n, err := io.Copy(h, body)
	require.NoError(t, err)
	require.NoError(t, body.Close())
	close(stop)
	wg.Wait()

	assert.EqualValues(t, size, n)
	assert.Equal(t, want, h.Sum32(), "the bytes came back intact")
	growth := int64(peak.Load()) - int64(base.HeapInuse)
	t.Logf("heap in use: base %d KiB, peak %d KiB, growth %d KiB for 2×%d MiB", base.HeapInuse>>10, peak.Load()>>10, growth>>10, size>>20)
	assert.Less(t, growth, int64(budget))
}

// BenchmarkEmulatorUploadDownload reports the client's upload+download
// throughput against the emulator (which writes to a real disk) next to a
// raw loopback TCP copy of the same bytes, and their ratio.
func BenchmarkEmulatorUploadDownload(b *testing.B) {
	const size = 64 << 20
	c, ref, home := emulatorTransferSetup(b)
	ctx := context.Background()
	raw, err := xfer.BestRawLoopback(size, 3)
	require.NoError(b, err)
	b.SetBytes(2 * size)
	for b.Loop() {
		if _, err := c.Files.UploadFile(ctx, ref, home+"/big.bin", xfer.NewPattern(size)); err != nil {
			b.Fatal(err)
		}
		body, _, err := c.Files.Download(ctx, ref, home+"/big.bin")
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, body); err != nil || n != size {
			b.Fatalf("download: %d bytes, %v", n, err)
		}
		body.Close()
	}
	clientMBs := float64(2*size) * float64(b.N) / b.Elapsed().Seconds() / 1e6
	rawMBs := float64(2*size) / raw.Seconds() / 1e6
	b.ReportMetric(clientMBs, "client-MB/s")
	b.ReportMetric(rawMBs, "raw-MB/s")
	b.ReportMetric(clientMBs/rawMBs, "client/raw")
}
