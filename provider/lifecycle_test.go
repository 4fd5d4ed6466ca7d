package provider

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/daytonaworker/daytona-worker/channel"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/stretchr/testify/require"
)

// releaseParams builds release/destroy/stop params from a lease.
func (e *testEnv) leaseParams(l lease, cfg map[string]any, extra ...any) map[string]any {
	c := maps2(e.cfg, l.Metadata, cfg) // the host rebuilds config from lease metadata
	p := map[string]any{"driverKey": "daytona", "companyId": "company-1", "environmentId": "env-1",
		"config": c, "providerLeaseId": *l.ProviderLeaseID, "leaseMetadata": l.Metadata}
	return with(p, extra...)
}

func maps2(ms ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

func TestReusableLifecycleRoundTrips(t *testing.T) {
	e := newTestEnv(t, map[string]any{"reuseLease": true})
	// Validate: normalized config keeps the host's timeout and flags.
	raw, err := e.call("environmentValidateConfig", map[string]any{"driverKey": "daytona", "config": e.cfg})
	require.NoError(t, err)
	v := decode[map[string]any](t, raw)
	require.Equal(t, true, v["ok"])
	require.EqualValues(t, 20000, v["normalizedConfig"].(map[string]any)["timeoutMs"])

	e.srv.ResetRequests()
	l := e.acquire(nil)
	id := *l.ProviderLeaseID
	// create + one toolbox command per reported phase (workspace, shell,
	// sentinel): the reference needs six round trips.
	require.Equal(t, 1, e.srv.CountRequests("POST", "/sandbox"))
	require.Equal(t, 3, e.srv.CountRequests("POST", "/process/execute"))
	require.Len(t, e.srv.Requests(), 4, "acquire round trips: %v", e.srv.Requests())

	md := l.Metadata
	require.Equal(t, "daytona", md["provider"])
	require.Equal(t, "bash", md["shellCommand"])
	require.Equal(t, id, md["sandboxId"])
	require.True(t, strings.HasPrefix(md["sandboxName"].(string), "paperclip-create-"))
	require.Equal(t, false, md["resumedLease"])
	for _, k := range []string{"pluginId", "pluginKey", "driver", "agentId", "sandboxProviderPlugin", "sandboxLeaseAcquisition"} {
		require.NotContains(t, md, k, "host-owned key in lease metadata")
	}
	info, _ := e.srv.Sandbox(id)
	require.Equal(t, filepath.Join(info.WorkDir, "paperclip-workspace"), md["remoteCwd"])
	sentinel := md["workspaceSentinel"].(map[string]any)
	require.Equal(t, "written", sentinel["result"])
	require.Equal(t, md["remoteCwd"].(string)+"/.paperclip-runtime/reusable-sandbox-lease.json", sentinel["path"],
		"the reference plugin's sentinel, so either plugin resumes the other's lease")
	file, err := os.ReadFile(info.HostPath(sentinel["path"].(string)))
	require.NoError(t, err, "sentinel written inside the sandbox tree")
	require.Contains(t, string(file), sentinel["token"].(string))
	require.Equal(t, "true", info.Labels["paperclip-reuse-lease"])
	require.Equal(t, "run-1", info.Labels["paperclip-run-id"])
	require.Equal(t, 15, info.AutoStopInterval)
	require.Equal(t, 60, info.AutoArchiveInterval)
	require.Equal(t, 10080, info.AutoDeleteInterval)

	// Realize from the acquire-seeded handle: no sandbox read.
	e.srv.ResetRequests()
	raw, err = e.call("environmentRealizeWorkspace", with(e.base(nil), "lease", l, "workspace", map[string]any{}))
	require.NoError(t, err)
	require.Equal(t, md["remoteCwd"], decode[map[string]any](t, raw)["cwd"])
	require.Zero(t, e.srv.CountRequests("GET", "/sandbox/{sandboxIdOrName}"))

	// Release a reusable lease: stopped, receipt only once Daytona says so.
	raw, err = e.call("environmentReleaseLease", e.leaseParams(l, nil))
	require.NoError(t, err)
	require.JSONEq(t, `{"providerLeaseId":"`+id+`","state":"stopped"}`, string(raw))
	require.Equal(t, "stopped", e.state(id))

	// Late work on the released lease is refused.
	_, err = e.call("environmentRealizeWorkspace", with(e.base(nil), "lease", l, "workspace", map[string]any{}))
	require.ErrorContains(t, err, "is no longer active")

	// Resume (from a fresh worker, as after a restart): started, sentinel matched.
	e.d = e.newDriver()
	e.reg = registryOf(e.d)
	raw, err = e.call("environmentResumeLease", with(e.base(nil), "providerLeaseId", id, "leaseMetadata", md))
	require.NoError(t, err)
	r := decode[lease](t, raw)
	require.Equal(t, id, *r.ProviderLeaseID)
	require.Equal(t, true, r.Metadata["resumedLease"])
	require.Equal(t, "stopped", r.Metadata["resumedFromState"])
	require.Equal(t, "matched", r.Metadata["workspaceSentinel"].(map[string]any)["result"])
	require.Equal(t, md["remoteCwd"], r.Metadata["remoteCwd"], "the resumed lease works in the same workspace")
	require.Equal(t, md["shellCommand"], r.Metadata["shellCommand"])
	require.Equal(t, "started", e.state(id))

	// Destroy: deleted and gone; again: still a destroyed receipt.
	for range 2 {
		raw, err = e.call("environmentDestroyLease", e.leaseParams(r, nil))
		require.NoError(t, err)
		require.JSONEq(t, `{"providerLeaseId":"`+id+`","state":"destroyed"}`, string(raw))
		require.Equal(t, "gone", e.state(id))
	}
	// A destroyed lease does not resume.
	raw, err = e.call("environmentResumeLease", with(e.base(nil), "providerLeaseId", id, "leaseMetadata", md))
	require.NoError(t, err)
	require.JSONEq(t, `{"providerLeaseId":null,"metadata":{"expired":true}}`, string(raw))
}

func TestEphemeralReleaseDeletesAndWaits(t *testing.T) {
	e, l, id := leased(t, nil)
	raw, err := e.call("environmentReleaseLease", e.leaseParams(l, nil))
	require.NoError(t, err)
	require.JSONEq(t, `{"providerLeaseId":"`+id+`","state":"destroyed"}`, string(raw))
	require.Equal(t, "gone", e.state(id), "receipt only after completed destruction")
	s := l.Metadata["workspaceSentinel"].(map[string]any)
	require.Equal(t, "run-1", s["runId"])
	require.Equal(t, id, s["providerLeaseId"])
}

func TestArchiveOnRelease(t *testing.T) {
	e, l, id := leased(t, map[string]any{"archiveOnRelease": true})
	raw, err := e.call("environmentReleaseLease", e.leaseParams(l, nil))
	require.NoError(t, err)
	require.JSONEq(t, `{"providerLeaseId":"`+id+`","state":"stopped"}`, string(raw))
	e.await(id, "archived")
	info, _ := e.srv.Sandbox(id)
	require.Equal(t, 60, info.AutoDeleteInterval)
}

func TestArchiveFailureFallsBackToDelete(t *testing.T) {
	e, l, id := leased(t, map[string]any{"archiveOnRelease": true})
	e.srv.Inject(daytonatest.Fault{Route: "/sandbox/{sandboxIdOrName}/archive", Status: 500, Times: 1})
	raw, err := e.call("environmentReleaseLease", e.leaseParams(l, nil))
	require.NoError(t, err)
	require.JSONEq(t, `{"providerLeaseId":"`+id+`","state":"destroyed"}`, string(raw))
	require.Equal(t, "gone", e.state(id))
}

func TestReusableStopFailureFallsBackToDelete(t *testing.T) {
	e, l, id := leased(t, map[string]any{"reuseLease": true})
	e.srv.Inject(daytonatest.Fault{Route: "/sandbox/{sandboxIdOrName}/stop", Status: 500})
	raw, err := e.call("environmentReleaseLease", e.leaseParams(l, nil))
	require.NoError(t, err)
	require.JSONEq(t, `{"providerLeaseId":"`+id+`","state":"destroyed"}`, string(raw))

	// When stop and delete both fail there is no receipt.
	l2 := e.acquire(nil)
	e.srv.Inject(daytonatest.Fault{Method: "DELETE", Route: "/sandbox/{sandboxIdOrName}", Status: 500})
	_, err = e.call("environmentReleaseLease", e.leaseParams(l2, nil))
	require.Error(t, err)
	require.Equal(t, "started", e.state(*l2.ProviderLeaseID))
}

func registryOf(d *Driver) *rpc.Registry {
	reg := rpc.NewRegistry()
	d.Register(reg)
	return reg
}

func TestResumeRejectsMismatchedSentinel(t *testing.T) {
	e, l, id := leased(t, map[string]any{"reuseLease": true})
	s := l.Metadata["workspaceSentinel"].(map[string]any)
	require.NoError(t, os.WriteFile(e.hostPath(l, s["path"].(string)), []byte(`{"token":"someone-else"}`), 0o644))
	raw, err := e.call("environmentResumeLease", with(e.base(nil), "providerLeaseId", id, "leaseMetadata", l.Metadata))
	require.NoError(t, err)
	r := decode[lease](t, raw)
	require.Nil(t, r.ProviderLeaseID)
	require.Equal(t, "mismatch", r.Metadata["workspaceSentinel"].(map[string]any)["result"])
	require.Equal(t, "started", e.state(id), "a mismatch never deletes")

	require.NoError(t, os.Remove(e.hostPath(l, s["path"].(string))))
	raw, err = e.call("environmentResumeLease", with(e.base(nil), "providerLeaseId", id, "leaseMetadata", l.Metadata))
	require.NoError(t, err)
	require.Equal(t, "missing", decode[lease](t, raw).Metadata["workspaceSentinel"].(map[string]any)["result"])
}

func TestEphemeralResumePrecheckMakesNoProviderCall(t *testing.T) {
	e, l, id := leased(t, nil)
	cases := map[string]func(md map[string]any){
		"missing token":   func(md map[string]any) { delete(md["workspaceSentinel"].(map[string]any), "token") },
		"missing run":     func(md map[string]any) { delete(md["workspaceSentinel"].(map[string]any), "runId") },
		"foreign lease":   func(md map[string]any) { md["workspaceSentinel"].(map[string]any)["providerLeaseId"] = "other" },
		"foreign sandbox": func(md map[string]any) { md["sandboxId"] = "other" },
		"foreign export":  func(md map[string]any) { md["nativeWorkspaceExportResume"] = map[string]any{"runId": "run-2"} },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			var md map[string]any
			b, _ := json.Marshal(l.Metadata)
			require.NoError(t, json.Unmarshal(b, &md))
			mutate(md)
			e.srv.ResetRequests()
			raw, err := e.call("environmentResumeLease", with(e.base(nil), "providerLeaseId", id, "leaseMetadata", md))
			require.NoError(t, err)
			require.JSONEq(t, `{"providerLeaseId":null,"metadata":{"expired":true,"workspaceSentinel":{"result":"mismatch"}}}`, string(raw))
			require.Empty(t, e.srv.Requests())
		})
	}
	// The untouched proof resumes.
	raw, err := e.call("environmentResumeLease", with(e.base(nil), "providerLeaseId", id, "leaseMetadata", l.Metadata))
	require.NoError(t, err)
	require.Equal(t, "matched", decode[lease](t, raw).Metadata["workspaceSentinel"].(map[string]any)["result"])
}

// Archive-on-release falls back to a delete when any of its steps fails
// (the stop, the auto-delete interval, the archive), and sends no step
// after the one that failed.
func TestArchiveFallsBackToDeleteAtEveryStep(t *testing.T) {
	for _, step := range []string{"stop", "autodelete/{interval}", "archive"} {
		t.Run(step, func(t *testing.T) {
			e, l, id := leased(t, map[string]any{"archiveOnRelease": true})
			e.srv.Inject(daytonatest.Fault{Route: "/sandbox/{sandboxIdOrName}/" + step, Status: 500})
			e.srv.ResetRequests()
			raw, err := e.call("environmentReleaseLease", e.leaseParams(l, nil))
			require.NoError(t, err)
			require.JSONEq(t, `{"providerLeaseId":"`+id+`","state":"destroyed"}`, string(raw))
			require.Equal(t, "gone", e.state(id))
			steps := []string{"stop", "autodelete/{interval}", "archive"}
			for _, later := range steps[slices.Index(steps, step)+1:] {
				require.Zero(t, e.srv.CountRequests("POST", "/sandbox/{sandboxIdOrName}/"+later), "%s sent after %s failed", later, step)
			}
		})
	}
}

// The Stop button on a lease whose sandbox is already gone answers
// "destroyed" without a stop; one whose sandbox cannot be read fails.
func TestStopButtonOnAGoneOrUnreadableSandbox(t *testing.T) {
	e, l, id := leased(t, nil)
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Status: 500, Times: 1})
	_, err := e.call("environmentReleaseLease", e.leaseParams(l, nil, "cancelActiveWork", true))
	require.Error(t, err)
	require.Equal(t, "started", e.state(id))

	_, _, err = e.client.Sandboxes.Delete(context.Background(), id)
	require.NoError(t, err)
	require.NoError(t, e.client.Sandboxes.WaitUntilGone(context.Background(), id))
	e.srv.ResetRequests()
	raw, err := e.call("environmentReleaseLease", e.leaseParams(l, nil, "cancelActiveWork", true))
	require.NoError(t, err)
	require.JSONEq(t, `{"providerLeaseId":"`+id+`","state":"destroyed"}`, string(raw))
	require.Zero(t, e.srv.CountRequests("POST", "/sandbox/{sandboxIdOrName}/stop"))
}

// Resume takes what the lease metadata holds: without a provider lease id
// there is nothing to resume (and no call is made); a sentinel without its
// path is looked for under remoteCwd; metadata without remoteCwd gets it
// back from the sentinel's path.
func TestResumeFillsWhatTheMetadataLacks(t *testing.T) {
	e, l, id := leased(t, map[string]any{"reuseLease": true})
	cwd := l.Metadata["remoteCwd"].(string)
	sentinel := l.Metadata["workspaceSentinel"].(map[string]any)
	require.Equal(t, cwd+"/.paperclip-runtime/reusable-sandbox-lease.json", sentinel["path"])
	resume := func(id string, md map[string]any) lease {
		t.Helper()
		raw, err := e.call("environmentResumeLease", with(e.base(nil), "providerLeaseId", id, "leaseMetadata", md))
		require.NoError(t, err)
		return decode[lease](t, raw)
	}

	e.srv.ResetRequests()
	r := resume("", l.Metadata)
	require.Nil(t, r.ProviderLeaseID)
	require.Empty(t, e.srv.Requests(), "no provider call")

	noPath := maps.Clone(sentinel)
	delete(noPath, "path")
	r = resume(id, with(l.Metadata, "workspaceSentinel", noPath))
	require.NotNil(t, r.ProviderLeaseID)
	require.Equal(t, "matched", r.Metadata["workspaceSentinel"].(map[string]any)["result"])
	require.Equal(t, sentinel["path"], r.Metadata["workspaceSentinel"].(map[string]any)["path"])

	noCwd := maps.Clone(l.Metadata)
	delete(noCwd, "remoteCwd")
	r = resume(id, noCwd)
	require.NotNil(t, r.ProviderLeaseID)
	require.Equal(t, cwd, r.Metadata["remoteCwd"])
}

// A resume whose lease metadata names another remoteCwd than the lease
// had moves its channels there: one opened after the resume starts in the
// new directory, not the one the acquire recorded. (Sample-7 bug 1: the
// recorded directory kept.)
func TestResumeMovesTheChannelCwd(t *testing.T) {
	e, l, id := leased(t, map[string]any{"reuseLease": true})
	ref := channel.Ref{CompanyID: "company-1", EnvironmentID: "env-1", LeaseID: id}
	cl, err := e.d.channelLease(ref, "test")
	require.NoError(t, err)
	require.Equal(t, l.Metadata["remoteCwd"], cl.Cwd)
	moved := l.Metadata["remoteCwd"].(string) + "/moved"
	raw, err := e.call("environmentResumeLease", with(e.base(nil), "providerLeaseId", id, "leaseMetadata", with(l.Metadata, "remoteCwd", moved)))
	require.NoError(t, err)
	require.NotNil(t, decode[lease](t, raw).ProviderLeaseID, "resumed")
	cl, err = e.d.channelLease(ref, "test")
	require.NoError(t, err)
	require.Equal(t, moved, cl.Cwd)
}

// A restarted worker learns a lease from any call that carries it: after
// an execute on a fresh driver, a channel open on that lease finds it
// (and its sandbox), where it would otherwise refuse with "no cached
// sandbox resolves the provider lease". (Sample-7 bug 6: the lease not
// recorded when the handle cache resolved it.)
func TestAnExecuteTeachesARestartedWorkerTheLease(t *testing.T) {
	e, l, id := leased(t, nil)
	e.use(e.newDriver())
	ref := channel.Ref{CompanyID: "company-1", EnvironmentID: "env-1", LeaseID: id}
	_, err := e.d.channelLease(ref, "test")
	require.Error(t, err, "a fresh worker knows nothing yet")
	_, err = e.execute(l, "true", nil)
	require.NoError(t, err)
	cl, err := e.d.channelLease(ref, "test")
	require.NoError(t, err)
	require.Equal(t, id, cl.Sandbox.ID)
}
