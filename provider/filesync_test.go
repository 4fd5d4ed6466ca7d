package provider

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/provider/config"
	"github.com/daytonaworker/daytona-worker/rpc"
	filesync "github.com/daytonaworker/daytona-worker/sync"
)

// TestSyncOutVenvReportsOmittedLinks: the virtualenv export through
// the worker's own method: the file arrives, the interpreter link is left
// out, the operation's metadata lists it and the notice is logged.
func TestSyncOutVenvReportsOmittedLinks(t *testing.T) {
	e := newTestEnv(t, nil)
	var logs bytes.Buffer
	e.d.log = slog.New(slog.NewTextHandler(&logs, nil))
	l := e.acquire(nil)
	remote := l.Metadata["remoteCwd"].(string)
	r, err := e.execute(l, "sh", []string{"-c", "mkdir -p proj/.venv/bin proj/src && echo x > proj/src/main.py && ln -s /usr/bin/python3 proj/.venv/bin/python3"})
	require.NoError(t, err)
	require.NotNil(t, r.ExitCode)
	require.Zero(t, *r.ExitCode, r.Stderr)
	out := filepath.Join(t.TempDir(), "proj")
	op := map[string]any{"operationId": "out", "files": []any{map[string]any{"sourcePath": remote + "/proj", "targetPath": out, "kind": "directory"}}}
	raw, err := e.call("environmentSyncOut", with(e.base(nil), "lease", l, "operations", []any{op}))
	require.NoError(t, err)
	var res struct {
		Operations []struct {
			OperationID      string `json:"operationId"`
			FilesTransferred int64  `json:"filesTransferred"`
			Metadata         struct {
				OmittedUnsafeLinks struct {
					Count int64    `json:"count"`
					Paths []string `json:"paths"`
				} `json:"omittedUnsafeLinks"`
			} `json:"metadata"`
		} `json:"operations"`
	}
	require.NoError(t, json.Unmarshal(raw, &res), string(raw))
	require.Len(t, res.Operations, 1)
	assert.EqualValues(t, 1, res.Operations[0].Metadata.OmittedUnsafeLinks.Count)
	assert.Equal(t, []string{remote + "/proj/.venv/bin/python3"}, res.Operations[0].Metadata.OmittedUnsafeLinks.Paths)
	b, err := os.ReadFile(filepath.Join(out, "src", "main.py"))
	require.NoError(t, err)
	assert.Equal(t, "x\n", string(b))
	_, lerr := os.Lstat(filepath.Join(out, ".venv", "bin", "python3"))
	assert.ErrorIs(t, lerr, os.ErrNotExist)
	assert.Contains(t, logs.String(), "Workspace export omitted unsafe links; retrying with confined entries.")

	// A clean export omits nothing; its metadata says only which way the
	// directory went (docs/sync.md#delta): a new host target, the whole
	// tree.
	raw, err = e.call("environmentSyncOut", with(e.base(nil), "lease", l, "operations", []any{map[string]any{"operationId": "clean",
		"files": []any{map[string]any{"sourcePath": remote + "/proj/src", "targetPath": filepath.Join(t.TempDir(), "src"), "kind": "directory"}}}}))
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "omittedUnsafeLinks")
	assert.Contains(t, string(raw), `"directorySync":[{`)
	assert.Contains(t, string(raw), `"reason":"the host target does not exist yet"`)
}

// TestSyncRejectsNULInPaths: every path-like sync field with a NUL byte is
// -32602 naming the field, before any provider call.
func TestSyncRejectsNULInPaths(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	remote := l.Metadata["remoteCwd"].(string)
	host := t.TempDir()
	file := func(kv ...any) map[string]any {
		m := map[string]any{"sourcePath": host, "targetPath": remote + "/x", "kind": "directory"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	cases := map[string]map[string]any{
		"operations[0].files[0].sourcePath":   {"operationId": "o", "files": []any{file("sourcePath", host+"/a\x00b")}},
		"operations[0].files[0].targetPath":   {"operationId": "o", "files": []any{file("targetPath", remote+"/x\x00y")}},
		"operations[0].files[0].exclude[1]":   {"operationId": "o", "files": []any{file("exclude", []string{"ok", "*.lo\x00g"})}},
		"operations[0].files[0].writablePath": {"operationId": "o", "files": []any{file("writablePath", remote+"/w\x00")}},
		"operations[0].postUploadCommands[0].command": {"operationId": "o", "files": []any{},
			"postUploadCommands": []any{map[string]any{"command": "ec\x00ho hi"}}},
		"operations[0].postUploadCommands[0].cwd": {"operationId": "o", "files": []any{},
			"postUploadCommands": []any{map[string]any{"command": "true", "cwd": remote + "\x00/x"}}},
	}
	for field, op := range cases {
		for _, method := range []string{"environmentSyncIn", "environmentSyncOut"} {
			e.srv.ResetRequests()
			_, err := e.call(method, with(e.base(nil), "lease", l, "operations", []any{op}))
			require.ErrorIs(t, err, rpc.ErrInvalidParams, "%s %s", method, field)
			assert.Contains(t, err.Error(), field+" contains a NUL byte")
			assert.Zero(t, e.srv.CountRequests("", ""), "no provider call for %s", field)
		}
	}
	bad := lease{ProviderLeaseID: l.ProviderLeaseID, Metadata: map[string]any{"remoteCwd": remote + "\x00/evil"}}
	_, err := e.call("environmentSyncIn", with(e.base(nil), "lease", bad, "operations", []any{}))
	require.ErrorIs(t, err, rpc.ErrInvalidParams)
	assert.Contains(t, err.Error(), "lease.metadata.remoteCwd contains a NUL byte")
}

// TestSyncErrorCapsAHugeSourcePath: a 10 MB sourcePath gives an error
// message of bounded size, not a 10 MB one.
func TestSyncErrorCapsAHugeSourcePath(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	remote := l.Metadata["remoteCwd"].(string)
	huge := strings.Repeat("p", 10<<20)
	for _, tc := range []struct{ method, src, dst string }{
		{"environmentSyncIn", t.TempDir() + "/" + huge, remote + "/x"},
		{"environmentSyncOut", "/elsewhere/" + huge, t.TempDir() + "/x"},
	} {
		op := map[string]any{"operationId": "o", "files": []any{map[string]any{"sourcePath": tc.src, "targetPath": tc.dst, "kind": "file"}}}
		_, err := e.call(tc.method, with(e.base(nil), "lease", l, "operations", []any{op}))
		require.Error(t, err)
		require.Less(t, len(err.Error()), 2048, "%s: message of %d bytes: %.300s", tc.method, len(err.Error()), err.Error())
	}
}

// TestStaleAfterOutlastsTheLongestSyncCall: a sync call is bounded by the
// largest timeoutMs plus the answer margin, and its cleanup by the
// overrun past that; reserved temp names younger than the sweep's age may
// belong to a running call, so the age must be longer.
func TestStaleAfterOutlastsTheLongestSyncCall(t *testing.T) {
	longest := time.Duration(config.MaxTimeoutMs)*time.Millisecond + answerMargin + filesync.CleanupOverrun
	assert.Greater(t, filesync.DefaultStaleAfter, longest)
}

// TestSyncCleanupEndsBeforeTheHostStopsWaiting: a failed sync's cleanups
// may run CleanupOverrun past the provider's deadline, which is
// answerMargin before the host's; the answer must still reach the host,
// with a few seconds for the reply itself.
func TestSyncCleanupEndsBeforeTheHostStopsWaiting(t *testing.T) {
	assert.LessOrEqual(t, filesync.CleanupOverrun+5*time.Second, answerMargin)
}

// TestSyncLeaseErrorsNameTheMethod: a sync call without a lease id names
// its method, one without a usable remoteCwd gives the shared remote-dir
// message; both before any provider call.
func TestSyncLeaseErrorsNameTheMethod(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	remote := l.Metadata["remoteCwd"].(string)
	const noRemoteDir = "Daytona file sync requires a workspace remote dir on the lease metadata."
	for _, tc := range []struct{ method, name string }{
		{"environmentSyncIn", "syncIn"}, {"environmentSyncOut", "syncOut"},
	} {
		cases := map[string]struct {
			lease lease
			want  string
		}{
			"no lease id":        {lease{Metadata: map[string]any{"remoteCwd": remote}}, "Daytona " + tc.name + " requires a provider lease ID."},
			"empty lease id":     {lease{ProviderLeaseID: new(""), Metadata: map[string]any{"remoteCwd": remote}}, "Daytona " + tc.name + " requires a provider lease ID."},
			"no remoteCwd":       {lease{ProviderLeaseID: l.ProviderLeaseID, Metadata: map[string]any{}}, noRemoteDir},
			"blank remoteCwd":    {lease{ProviderLeaseID: l.ProviderLeaseID, Metadata: map[string]any{"remoteCwd": "  "}}, noRemoteDir},
			"relative remoteCwd": {lease{ProviderLeaseID: l.ProviderLeaseID, Metadata: map[string]any{"remoteCwd": "work"}}, noRemoteDir},
		}
		for name, c := range cases {
			e.srv.ResetRequests()
			_, err := e.call(tc.method, with(e.base(nil), "lease", c.lease, "operations", []any{}))
			require.Error(t, err, "%s %s", tc.method, name)
			assert.Equal(t, c.want, err.Error(), "%s %s", tc.method, name)
			assert.Zero(t, e.srv.CountRequests("", ""), "%s %s: no provider call", tc.method, name)
		}
	}
}

// TestSyncDeletedSandboxCodeIsSyncOutOnly: a sandbox deleted under the
// lease is the stable daytona_sandbox_not_found for syncOut only; syncIn
// passes the provider's not-found error through (retryable by the host).
func TestSyncDeletedSandboxCodeIsSyncOutOnly(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	remote := l.Metadata["remoteCwd"].(string)
	require.NoError(t, e.client.Sandboxes.DeleteAndWait(t.Context(), *l.ProviderLeaseID))
	src := filepath.Join(t.TempDir(), "a")
	require.NoError(t, os.WriteFile(src, []byte("a"), 0o600))
	in := map[string]any{"operationId": "in", "files": []any{map[string]any{"sourcePath": src, "targetPath": remote + "/a", "kind": "file"}}}
	_, err := e.call("environmentSyncIn", with(e.base(nil), "lease", l, "operations", []any{in}))
	require.Error(t, err)
	assert.NotErrorIs(t, err, filesync.ErrSandboxNotFound)
	assert.NotEqual(t, "daytona_sandbox_not_found", err.Error())
	assert.ErrorIs(t, err, daytona.ErrNotFound)

	out := map[string]any{"operationId": "out", "files": []any{map[string]any{"sourcePath": remote + "/a", "targetPath": src + ".out", "kind": "file"}}}
	_, err = e.call("environmentSyncOut", with(e.base(nil), "lease", l, "operations", []any{out}))
	require.ErrorIs(t, err, filesync.ErrSandboxNotFound)
	assert.Equal(t, "daytona_sandbox_not_found", err.Error())
}

// TestPostUploadCommandsRunVerbatim: a post-upload command goes out as the
// reference's SDK call sends it (one one-shot execute of the base64-decoded
// command in a plain sh, cwd defaulting to the remote dir, timeoutMs in
// whole seconds rounded up): no profile sourcing, no git environment, no
// session. The command sees the cwd and none of the exec wrapper's vars.
func TestPostUploadCommandsRunVerbatim(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	remote := l.Metadata["remoteCwd"].(string)
	hostRemote := e.hostPath(l, remote)
	require.NoError(t, os.MkdirAll(filepath.Join(hostRemote, "sub"), 0o755))
	require.NoError(t, e.info(*l.ProviderLeaseID).Own(filepath.Join(hostRemote, "sub")))
	first := `pwd > where-1; env > env-1`
	second := `pwd > where-2; exit 0`
	op := map[string]any{"operationId": "o", "files": []any{}, "postUploadCommands": []any{
		map[string]any{"command": first},
		map[string]any{"command": second, "cwd": remote + "/sub", "timeoutMs": 2500},
	}}
	e.srv.ResetRequests()
	before := len(e.srv.Dispatches())
	_, err := e.call("environmentSyncIn", with(e.base(nil), "lease", l, "operations", []any{op}))
	require.NoError(t, err)
	sdk := func(cmd string) string {
		return `sh -c "echo '` + base64.StdEncoding.EncodeToString([]byte(cmd)) + `' | base64 -d | sh"`
	}
	var sent []daytonatest.Dispatch
	for _, dp := range e.srv.Dispatches()[before:] {
		if strings.Contains(dp.Command, "base64 -d") {
			sent = append(sent, dp)
		}
	}
	require.Len(t, sent, 2)
	assert.Equal(t, sdk(first), sent[0].Command)
	assert.Equal(t, 20, sent[0].Timeout, "the config timeout when the command has none")
	assert.Equal(t, sdk(second), sent[1].Command)
	assert.Equal(t, 3, sent[1].Timeout, "timeoutMs rounded up to whole seconds")
	for _, dp := range sent {
		assert.Empty(t, dp.Session, "one-shot, not a session command")
	}
	assert.Zero(t, e.srv.CountRequests("POST", "/process/session/{sessionId}/exec"), "no session command")
	where, err := os.ReadFile(filepath.Join(hostRemote, "where-1"))
	require.NoError(t, err)
	assert.Equal(t, remote+"\n", string(where), "cwd defaults to the remote dir")
	where, err = os.ReadFile(filepath.Join(hostRemote, "sub", "where-2"))
	require.NoError(t, err)
	assert.Equal(t, remote+"/sub\n", string(where))
	env, err := os.ReadFile(filepath.Join(hostRemote, "env-1"))
	require.NoError(t, err)
	for _, v := range []string{"GIT_TERMINAL_PROMPT=", "GIT_ASKPASS=", "SSH_ASKPASS_REQUIRE=", "GCM_INTERACTIVE="} {
		assert.NotContains(t, string(env), v, "no exec-wrapper git environment")
	}
}

// TestManifestDeclaresConcurrentSyncOperations: every manifest profile
// declares concurrentSyncOperations true (the host may run sync operations
// of one lease in parallel), next to both native sync hooks, and the worker
// registers both sync methods the capability needs.
func TestManifestDeclaresConcurrentSyncOperations(t *testing.T) {
	for _, p := range Profiles {
		b, err := ManifestJSON(p)
		require.NoError(t, err)
		var m Manifest
		require.NoError(t, json.Unmarshal(b, &m))
		require.NotEmpty(t, m.EnvironmentDrivers, p)
		caps, ok := m.EnvironmentDrivers[0]["sandboxCapabilities"].(map[string]any)
		require.True(t, ok, "%s: sandboxCapabilities", p)
		for _, c := range []string{"concurrentSyncOperations", "nativeSyncIn", "nativeSyncOut"} {
			assert.Equal(t, true, caps[c], "%s: %s", p, c)
		}
	}
	e := newTestEnv(t, nil)
	for _, method := range []string{"environmentSyncIn", "environmentSyncOut"} {
		assert.True(t, e.reg.Has(method), method)
	}
}

// TestDiskFullExportIsCappedByTheSandboxDiskInGiB: Daytona reports a
// sandbox's disk in GiB, and a syncOut whose export finds the sandbox disk
// full streams through the terminal, capped at that allocation
// (docs/behavior.md#streaming-export). A 4 MiB tree comes back from a
// sandbox of a few GiB whose disk is full. (Sample-8 bug 6: the
// allocation taken as MiB, so every stream over a few MiB was refused.)
func TestDiskFullExportIsCappedByTheSandboxDiskInGiB(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	id := *l.ProviderLeaseID
	remote := l.Metadata["remoteCwd"].(string)
	big := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16)
	dir := e.hostPath(l, remote+"/out")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644))
	require.Less(t, e.info(id).Disk, 8, "a sandbox of a few GiB")
	used, err := e.srv.DiskUsage(id)
	require.NoError(t, err)
	require.NoError(t, e.srv.SetDiskAllocation(id, used+64<<10))

	back := filepath.Join(t.TempDir(), "back")
	op := map[string]any{"operationId": "out", "files": []any{map[string]any{"sourcePath": remote + "/out", "targetPath": back, "kind": "directory"}}}
	_, err = e.call("environmentSyncOut", with(e.base(nil), "lease", l, "operations", []any{op}))
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(back, "big.bin"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(big, got), "the tree came back whole")
	assert.Positive(t, e.srv.CountRequests("POST", "/process/pty"), "through the terminal")
}
