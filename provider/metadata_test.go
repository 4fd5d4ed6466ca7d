package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/channel"
	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// The lease steps' whole answers (docs/behavior.md#acquire and the steps
// after it): every key of every metadata map, and what each step leaves on
// Daytona (labels, intervals, resources), compared whole, so a key that is
// dropped, added or filled from the wrong value fails here even where the
// tests of one behaviour look at one key.

var (
	hex64  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

const workspace = "/home/daytona/paperclip-workspace"

// TestLeaseStepsAnswerWholeMaps: acquire, execute, release, resume,
// realize and destroy of a one-shot and of a reusable lease, each answer
// compared whole, and what each leaves for the calls after it: the
// sandbox, the idle evidence (a held lease keeps the worker awake, a
// released one does not) and the channel table (a channel open finds a
// held lease in its directory and is refused once it is released).
func TestLeaseStepsAnswerWholeMaps(t *testing.T) {
	t.Parallel()
	for _, reuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("reuseLease=%v", reuse), func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t, map[string]any{"reuseLease": reuse, "cpu": 1.5, "image": "debian:12"})
			l := e.acquire(nil)
			id := *l.ProviderLeaseID
			info := e.info(id)
			sentinel, _ := l.Metadata["workspaceSentinel"].(map[string]any)
			token, _ := sentinel["token"].(string)
			require.Regexp(t, hex64, token)
			wantSentinel := map[string]any{"path": workspace + "/.paperclip-runtime/reusable-sandbox-lease.json", "result": "written", "token": token}
			if !reuse {
				// A one-shot lease's sentinel names its run and lease.
				wantSentinel["runId"], wantSentinel["providerLeaseId"] = "run-1", id
			}
			want := map[string]any{
				"cpu": 1.5, "image": "debian:12", "snapshot": nil, "timeoutMs": float64(20000), "reuseLease": reuse,
				"provider": "daytona", "shellCommand": "bash", "sandboxId": id, "sandboxName": info.Name,
				"sandboxState": "started", "target": "us", "remoteCwd": workspace, "resumedLease": false,
				"workspaceSentinel": wantSentinel,
			}
			require.Equal(t, want, l.Metadata)
			assert.Nil(t, l.ExpiresAt)
			assert.Regexp(t, `^paperclip-create-`+uuidRE.String()[1:], info.Name)
			ref := channel.Ref{CompanyID: "company-1", EnvironmentID: "env-1", LeaseID: id}
			held := func(step string) {
				t.Helper()
				assert.Equal(t, rpc.IdleReport{Allocations: 1}, e.d.idle.report(), "after %s: the lease is held", step)
				cl, err := e.d.channelLease(ref, "test")
				if assert.NoError(t, err, "after %s", step) {
					assert.Equal(t, workspace, cl.Cwd, "after %s", step)
					assert.Equal(t, id, cl.Sandbox.ID, "after %s", step)
				}
			}
			let := func(step string) {
				t.Helper()
				assert.Equal(t, rpc.IdleReport{SleepAllowed: true}, e.d.idle.report(), "after %s: nothing held", step)
				// Teardown forgets the lease: an open fails closed.
				_, err := e.d.channelLease(ref, "test")
				var none errNoLease
				assert.ErrorAs(t, err, &none, "after %s: channels refused", step)
			}
			held("acquire")

			// What the create left on Daytona.
			attempt := info.Labels[cleanup.LabelCreateAttempt]
			assert.Regexp(t, uuidRE, attempt)
			assert.Equal(t, map[string]string{
				"paperclip-company-id": "company-1", "paperclip-environment-id": "env-1", "paperclip-run-id": "run-1",
				"paperclip-provider": "daytona", "paperclip-reuse-lease": fmt.Sprint(reuse), cleanup.LabelCreateAttempt: attempt,
			}, info.Labels)
			assert.Empty(t, info.Env)
			assert.False(t, info.Public)
			assert.Equal(t, []int{2, 15, 60, 10080}, []int{info.CPU, info.AutoStopInterval, info.AutoArchiveInterval, info.AutoDeleteInterval},
				"cpu 1.5 rounds up; the intervals")

			// A command runs in the lease's directory.
			raw, err := e.call("environmentExecute", with(e.base(nil), "lease", l, "command", "pwd"))
			require.NoError(t, err)
			res := decode[map[string]any](t, raw)
			md, _ := res["metadata"].(map[string]any)
			delete(res, "metadata")
			assert.Equal(t, map[string]any{"exitCode": float64(0), "signal": nil, "timedOut": false, "stdout": workspace + "\n", "stderr": ""}, res)
			assert.ElementsMatch(t, []string{"cacheHit", "durationMs", "getDurationMs", "logStream"}, keys(md))
			assert.Equal(t, true, md["cacheHit"], "acquire left the sandbox's handle for the first command")

			realize, err := e.call("environmentRealizeWorkspace", e.realizeParams(l))
			require.NoError(t, err)
			assert.Equal(t, map[string]any{"cwd": workspace, "metadata": map[string]any{"provider": "daytona", "remoteCwd": workspace}}, decode[map[string]any](t, realize))
			held("execute and realize")

			raw, err = e.call("environmentReleaseLease", with(e.base(nil), "providerLeaseId", id, "leaseMetadata", l.Metadata))
			require.NoError(t, err)
			if !reuse {
				assert.Equal(t, map[string]any{"providerLeaseId": id, "state": "destroyed"}, decode[map[string]any](t, raw))
				e.await(id, "gone")
				let("release")
				// A one-shot lease is over: resuming it says so, whole.
				raw, err = e.call("environmentResumeLease", e.resumeParams(l, nil))
				require.NoError(t, err)
				assert.Equal(t, map[string]any{"providerLeaseId": nil, "metadata": map[string]any{"expired": true}}, decode[map[string]any](t, raw))
				return
			}
			assert.Equal(t, map[string]any{"providerLeaseId": id, "state": "stopped"}, decode[map[string]any](t, raw))
			e.await(id, "stopped")
			let("release")

			raw, err = e.call("environmentResumeLease", e.resumeParams(l, nil))
			require.NoError(t, err)
			r := decode[lease](t, raw)
			require.NotNil(t, r.ProviderLeaseID)
			assert.Equal(t, id, *r.ProviderLeaseID)
			want["resumedLease"], want["resumedFromState"] = true, "stopped"
			want["workspaceSentinel"] = map[string]any{"path": wantSentinel["path"], "result": "matched", "token": token}
			assert.Equal(t, want, r.Metadata)
			assert.Equal(t, "started", e.state(id))
			held("resume")

			raw, err = e.call("environmentDestroyLease", with(e.base(nil), "providerLeaseId", id, "leaseMetadata", r.Metadata))
			require.NoError(t, err)
			assert.Equal(t, map[string]any{"providerLeaseId": id, "state": "destroyed"}, decode[map[string]any](t, raw))
			e.await(id, "gone")
			let("destroy")
		})
	}
}

// TestProbeAnswersWholeMaps: a probe that connects and one that does not,
// compared whole; neither leaves a sandbox.
func TestProbeAnswersWholeMaps(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, map[string]any{"reuseLease": true})
	raw, err := e.call("environmentProbe", e.base(nil))
	require.NoError(t, err)
	got := decode[map[string]any](t, raw)
	md, _ := got["metadata"].(map[string]any)
	name, _ := md["sandboxName"].(string)
	id, _ := md["sandboxId"].(string)
	assert.Regexp(t, uuidRE, id)
	assert.Equal(t, map[string]any{"ok": true, "summary": "Connected to Daytona sandbox " + name + ".", "metadata": map[string]any{
		"image": nil, "snapshot": nil, "timeoutMs": float64(20000), "reuseLease": true, "provider": "daytona",
		"remoteCwd": workspace, "sandboxId": id, "sandboxName": name, "shellCommand": "bash", "target": "us",
	}}, got)
	e.await(id, "gone")

	raw, err = e.call("environmentProbe", e.base(map[string]any{"apiKey": "wrong"}))
	require.NoError(t, err)
	msg := "daytona: POST /sandbox: 401 Unauthorized: Unauthorized"
	assert.Equal(t, map[string]any{"ok": false, "summary": "Daytona sandbox probe failed.",
		"diagnostics": []any{map[string]any{"severity": "error", "message": msg}},
		"metadata":    map[string]any{"error": msg, "image": nil, "snapshot": nil, "timeoutMs": float64(20000), "reuseLease": true, "provider": "daytona"},
	}, decode[map[string]any](t, raw))
	assert.Empty(t, e.srv.Sandboxes(), "no sandbox left")
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestSyncAnswersWholeMaps: a syncIn and two syncOuts of a directory and
// a file mapping, each operation's answer compared whole: the counts of
// what moved and metadata.directorySync (the first of each direction the
// whole tree, since nothing is there yet; the second syncOut a delta in
// which nothing changed, so only the file mapping moves).
func TestSyncAnswersWholeMaps(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	src, back := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("a"), 0o644))
	call := func(method string, op map[string]any) map[string]any {
		t.Helper()
		raw, err := e.call(method, with(e.base(nil), "lease", l, "operations", []any{op}))
		require.NoError(t, err)
		return decode[map[string]any](t, raw)
	}
	answer := func(id string, files, bytes int, dir map[string]any) map[string]any {
		return map[string]any{"operations": []any{map[string]any{"operationId": id, "filesTransferred": float64(files), "bytesTransferred": float64(bytes),
			"metadata": map[string]any{"directorySync": []any{dir}}}}}
	}
	in := map[string]any{"operationId": "in", "files": []any{
		map[string]any{"sourcePath": src, "targetPath": workspace + "/proj", "kind": "directory"},
		map[string]any{"sourcePath": filepath.Join(src, "a"), "targetPath": workspace + "/one", "kind": "file"},
	}}
	// The archive (a header, a block of data and the end blocks) and the
	// file's byte.
	assert.Equal(t, answer("in", 2, 2049, map[string]any{"targetPath": workspace + "/proj", "way": "full", "reason": "the target does not exist yet",
		"listedEntries": float64(0), "unchangedEntries": float64(0)}), call("environmentSyncIn", in))

	out := map[string]any{"operationId": "out", "files": []any{
		map[string]any{"sourcePath": workspace + "/proj", "targetPath": back + "/proj", "kind": "directory"},
		map[string]any{"sourcePath": workspace + "/one", "targetPath": back + "/one", "kind": "file"},
	}}
	assert.Equal(t, answer("out", 2, 2049, map[string]any{"targetPath": back + "/proj", "way": "full", "reason": "the host target does not exist yet",
		"listedEntries": float64(0), "unchangedEntries": float64(0)}), call("environmentSyncOut", out))
	assert.Equal(t, answer("out", 1, 1, map[string]any{"targetPath": back + "/proj", "way": "delta",
		"listedEntries": float64(2), "unchangedEntries": float64(1)}), call("environmentSyncOut", out))
	assert.Equal(t, "a", readHostFile(t, filepath.Join(back, "proj", "a")))
	assert.Equal(t, "a", readHostFile(t, filepath.Join(back, "one")))
}

func readHostFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}
