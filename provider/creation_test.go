package provider

import (
	"errors"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/stretchr/testify/require"
)

// Probe and failed-creation cleanup (docs/behavior.md#failed-create, docs/behavior.md#destroy-failed-creation, docs/behavior.md#envelope, docs/behavior.md#probe,
// docs/behavior.md#destroy) beyond acquire_test.go.

func TestProbeCreatesChecksAndAlwaysDeletes(t *testing.T) {
	e := newTestEnv(t, nil)
	raw, err := e.call("environmentProbe", e.base(nil))
	require.NoError(t, err)
	r := decode[map[string]any](t, raw)
	require.Equal(t, true, r["ok"])
	md := r["metadata"].(map[string]any)
	require.Regexp(t, `^Connected to Daytona sandbox paperclip-create-[0-9a-f-]{36}\.$`, r["summary"])
	require.Equal(t, "daytona", md["provider"])
	require.Equal(t, "bash", md["shellCommand"])
	require.Contains(t, md["remoteCwd"], "/paperclip-workspace")
	require.Equal(t, 1, e.srv.CountRequests("POST", rCreate))
	require.Equal(t, 1, e.srv.CountRequests("DELETE", rSandbox))
	e.expectLive()
	require.Zero(t, e.d.idle.report().Allocations)
	// The metadata names the probe's sandbox by id and by name, each in
	// its own field. (Sample-7 bug 2: the two swapped.)
	dels := e.srv.Deletions()
	require.Len(t, dels, 1)
	require.NotEqual(t, dels[0].Sandbox, dels[0].Name)
	require.Equal(t, dels[0].Sandbox, md["sandboxId"])
	require.Equal(t, dels[0].Name, md["sandboxName"])
}

func TestProbeNeverThrows(t *testing.T) {
	cases := map[string]daytonatest.Fault{
		"check fails":   {Route: rExecute, Status: 500, Body: `{"message":"toolbox broke"}`},
		"create denied": {Method: "POST", Route: rCreate, Status: 403, Body: `{"statusCode":403,"message":"organization suspended"}`},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t, nil)
			e.srv.Inject(f)
			raw, err := e.call("environmentProbe", e.base(nil))
			require.NoError(t, err, "probe reports, never throws")
			r := decode[map[string]any](t, raw)
			require.Equal(t, false, r["ok"])
			require.Equal(t, "Daytona sandbox probe failed.", r["summary"])
			require.NotContains(t, string(raw), e.srv.APIKey())
			e.expectLive()
		})
	}
}

// A language hint reaches Daytona as the label the SDKs send for it,
// code-toolbox-language.
func TestLanguageHintIsTheSDKsLabel(t *testing.T) {
	e := newTestEnv(t, map[string]any{"language": "python"})
	l := e.acquire(nil)
	info := e.info(*l.ProviderLeaseID)
	require.Equal(t, "python", info.Labels["code-toolbox-language"])
}

func TestSDKAddedLabelsDoNotBreakOwnership(t *testing.T) {
	// The language hint travels as an extra label on the create request; the
	// envelope keeps only the ownership labels, so cleanup still proves the
	// sandbox is ours and deletes it.
	e := newTestEnv(t, map[string]any{"language": "python"})
	e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rCreate, Perform: true, Status: 500, Times: 1})
	err := e.acquireErr(nil)
	var ce *cleanup.Error
	require.False(t, errors.As(err, &ce), "cleanup confirmed: %v", err)
	require.Equal(t, 1, e.srv.CountRequests("DELETE", rSandbox))
	e.expectLive()
}

// uncertainCreate: the create allocates, its reply is a 500, and the lookup
// by name meets f.
func uncertainCreate(t *testing.T, cfg map[string]any, f daytonatest.Fault) (*testEnv, *cleanup.Error) {
	e := newTestEnv(t, cfg)
	e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rCreate, Perform: true, Status: 500, Times: 1})
	e.srv.Inject(f)
	err := e.acquireErr(nil)
	return e, envelopeOf(t, err)
}

func TestFailedCreateNeverDeletesAMismatchedSandbox(t *testing.T) {
	cases := map[string]func(labels map[string]string){
		"paperclip-company-id":     func(l map[string]string) { l["paperclip-company-id"] = "company-2" },
		"paperclip-environment-id": func(l map[string]string) { l["paperclip-environment-id"] = "env-2" },
		"paperclip-run-id":         func(l map[string]string) { l["paperclip-run-id"] = "run-2" },
		"paperclip-create-attempt": func(l map[string]string) { l["paperclip-create-attempt"] = "another-attempt" },
		"paperclip-provider":       func(l map[string]string) { delete(l, "paperclip-provider") },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t, nil)
			// The create allocates and its reply is lost; before the lookup
			// by name answers, the sandbox's labels stop matching ours.
			e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rCreate, Perform: true, Status: 500, Times: 1})
			gate := make(chan struct{})
			e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Gate: gate, Times: 1})
			done := e.async("environmentAcquireLease", with(e.base(nil), "runId", "run-1"))
			e.awaitRequests("GET", rSandbox, 1)
			live := e.live()
			require.Len(t, live, 1)
			labels := live[0].Labels
			change(labels)
			_, _, err := e.client.Sandboxes.ReplaceLabels(t.Context(), live[0].ID, labels)
			require.NoError(t, err)
			close(gate)
			r := wait(t, done)
			ce := envelopeOf(t, r.err)
			require.Contains(t, ce.Message, "cleanup could not be confirmed")
			require.ErrorIs(t, r.err, cleanup.ErrOwnership)
			require.Zero(t, e.srv.CountRequests("DELETE", rSandbox), "a sandbox not proven ours is never deleted")
			e.expectLive(live[0].ID)
		})
	}
	t.Run("name", func(t *testing.T) {
		// The host's retry names one creation, the provider id it recorded
		// belongs to a sandbox of another name: refused, nothing deleted.
		e, _, id := leased(t, nil)
		c, err := e.d.resolveAccount(mustJSON(t, e.cfg))
		require.NoError(t, err)
		attempt := "0b6c0d1e-6f4e-4c43-9d0a-6e5a4b1f2c3d"
		labels, err := cleanup.OwnershipLabels("company-1", "env-1", "run-1", attempt, false)
		require.NoError(t, err)
		env := cleanup.Envelope{ProviderLeaseID: cleanup.CreationName(attempt), ObservedProviderLeaseID: id, CompanyID: "company-1",
			EnvironmentID: "env-1", RunID: "run-1", AttemptID: attempt, AccountFingerprint: c.fingerprint, Labels: labels}
		require.NoError(t, env.Validate())
		_, err = e.call("environmentDestroyLease", with(e.base(nil), "providerLeaseId", env.ProviderLeaseID,
			"leaseMetadata", map[string]any{"failedCreateCleanup": env}))
		require.ErrorIs(t, err, cleanup.ErrOwnership)
		require.Zero(t, e.srv.CountRequests("DELETE", rSandbox))
		e.expectLive(id)
	})
}

func TestFailedCreateLookupOrDeleteFailureIsReported(t *testing.T) {
	t.Run("lookup fails", func(t *testing.T) {
		e, ce := uncertainCreate(t, nil, daytonatest.Fault{Method: "GET", Route: rSandbox, Status: 500, Times: 1})
		require.Contains(t, ce.Message, "cleanup could not be confirmed for "+ce.Envelope.ProviderLeaseID)
		require.Empty(t, ce.Envelope.ObservedProviderLeaseID)
		require.Zero(t, e.srv.CountRequests("DELETE", rSandbox))
		require.Len(t, e.live(), 1, "kept for the host's reconciliation")
		require.True(t, errors.Is(ce, daytona.ErrServer), "causes kept for the worker's log")
	})
	t.Run("delete fails", func(t *testing.T) {
		e, ce := uncertainCreate(t, nil, daytonatest.Fault{Method: "DELETE", Route: rSandbox, Status: 500, Times: 1})
		require.Contains(t, ce.Message, "cleanup could not be confirmed")
		require.NotEmpty(t, ce.Envelope.ObservedProviderLeaseID, "the observed id travels with the envelope")
		e.expectLive(ce.Envelope.ObservedProviderLeaseID)
		resolveEnvelope(t, e, ce)
	})
	t.Run("delete acknowledgement lost", func(t *testing.T) {
		// Deleted, the reply is a 500: the envelope keeps the observed id,
		// whose absence then confirms the cleanup.
		e, ce := uncertainCreate(t, nil, daytonatest.Fault{Method: "DELETE", Route: rSandbox, Perform: true, Status: 500, Times: 1})
		require.NotEmpty(t, ce.Envelope.ObservedProviderLeaseID)
		e.expectLive()
		resolveEnvelope(t, e, ce)
	})
}

func TestFailedCreateHungLookupOrDeleteIsBounded(t *testing.T) {
	for name, f := range map[string]daytonatest.Fault{
		"lookup": {Method: "GET", Route: rSandbox, Hang: true, Times: 1},
		"delete": {Method: "DELETE", Route: rSandbox, Hang: true, Times: 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// The call's deadline passes once the cleanup hangs (a short
			// acquire budget could also run out before the create reached
			// Daytona, on a loaded machine, and then nothing is allocated).
			e := newTestEnv(t, nil)
			e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rCreate, Perform: true, Status: 500, Times: 1})
			hang := e.srv.Inject(f)
			ce := envelopeOf(t, e.acquireExpiringWhen(func() bool { return hang.Hits() > 0 }))
			require.Equal(t, "Daytona lease acquisition timed out; allocation cleanup is pending", ce.Message)
			require.Len(t, e.live(), 1, "nothing deleted on a spent budget")
			resolveEnvelope(t, e, ce)
		})
	}
}

// Title 30: the lookup of a failed create's leftover has a 10 s bound of
// its own, well inside the acquire budget. When it hangs, the acquire ends
// after that bound, not before, with the creation-cleanup error naming the
// sandbox, the create error first and the lookup's liveness timeout second.
func TestFailedCreateLookupHasATenSecondBound(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rCreate, Perform: true, Status: 500, Times: 1,
		Body: `{"statusCode":500,"message":"create exploded"}`})
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: rSandbox, Hang: true, Times: 1})
	start := time.Now()
	err := e.acquireErr(nil) // the call's own deadline (60 s) is far away
	elapsed := time.Since(start)
	ce := envelopeOf(t, err)
	require.Equal(t, "Daytona sandbox creation failed; cleanup could not be confirmed for "+ce.Envelope.ProviderLeaseID, ce.Message)
	require.Nil(t, ce.Diagnostic, "not a spent budget")
	require.Len(t, ce.Causes, 2)
	var create *daytona.ErrorResponse
	require.ErrorAs(t, ce.Causes[0], &create)
	require.Equal(t, "create exploded", create.Message)
	require.EqualError(t, ce.Causes[1],
		`Daytona sandbox liveness call "sandbox.failedCreateLookup" did not respond within 10000 ms; the sandbox connection is unresponsive.`)
	require.GreaterOrEqual(t, elapsed, 10*time.Second, "the bound is not shorter than 10 s")
	require.Len(t, e.live(), 1, "nothing deleted without a lookup")
	resolveEnvelope(t, e, ce)
}

func TestFailedCreateRetryStaysUnresolvedWhileNotVisible(t *testing.T) {
	e := newTestEnv(t, nil)
	e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rCreate, Status: 503, Times: 1})
	ce := envelopeOf(t, e.acquireErr(nil))
	p := with(e.base(nil), "providerLeaseId", ce.Envelope.ProviderLeaseID,
		"leaseMetadata", map[string]any{"failedCreateCleanup": ce.Envelope})
	for range 2 {
		_, err := e.call("environmentDestroyLease", p)
		require.ErrorIs(t, err, cleanup.ErrNotObserved, "absence of a never-observed name is not proof")
	}
	require.Equal(t, 1, e.d.idle.report().UncertainCleanups, "still keeps the worker awake")
	require.Zero(t, e.srv.CountRequests("DELETE", rSandbox))
}

func TestSentinelIdentityChangesWithResources(t *testing.T) {
	e := newTestEnv(t, map[string]any{"reuseLease": true, "image": "node:20"})
	token := func(cfg map[string]any) string {
		l := e.acquire(cfg)
		return l.Metadata["workspaceSentinel"].(map[string]any)["token"].(string)
	}
	a, b, c := token(map[string]any{"cpu": 2}), token(map[string]any{"cpu": 4}), token(map[string]any{"cpu": 2})
	require.NotEqual(t, a, b, "a resized environment does not resume old leases")
	require.Equal(t, a, c, "the same identity yields the same token")
}

func TestShellFallsBackToSh(t *testing.T) {
	ws, err := parseSetup("noise\npaperclip-setup\t/home/u/paperclip-workspace\tsh\n")
	require.NoError(t, err)
	require.Equal(t, setupResult{remoteCwd: "/home/u/paperclip-workspace", shell: "sh"}, ws)
	ws, err = parseSetup("paperclip-setup\t/w\tzsh\n")
	require.NoError(t, err)
	require.Equal(t, "sh", ws.shell, "anything but bash is sh")
	_, err = parseSetup("paperclip-setup\trelative\tbash\n")
	require.Error(t, err)
	sh, res := verifySentinel("paperclip-setup\tsh\n{\"token\":\"t\"}\n", "t")
	require.Equal(t, "sh", sh)
	require.Equal(t, "matched", res)
	_, res = verifySentinel("paperclip-setup\tbash\n\npaperclip-setup-missing\n", "t")
	require.Equal(t, "missing", res)
	_, res = verifySentinel("paperclip-setup\tbash\nnot json\n", "t")
	require.Equal(t, "mismatch", res)
}

// Title 55: an image without bash. The setup and resume scripts run under
// a POSIX sh (dash or busybox) with a PATH that holds no bash: they still
// create the workspace, write and read back the sentinel, and report sh.
func TestSetupScriptsRunWithoutBash(t *testing.T) {
	posix := ""
	for _, name := range []string{"dash", "busybox"} {
		if p, err := osexec.LookPath(name); err == nil {
			posix = p
			break
		}
	}
	if posix == "" {
		t.Skip("needs dash or busybox: a POSIX sh that is not bash")
	}
	bin := t.TempDir()
	for _, tool := range []string{"mkdir", "chmod", "mv", "rm", "cat"} {
		p, err := osexec.LookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(p, filepath.Join(bin, tool)))
	}
	run := func(script string) string {
		args := []string{"-c", script}
		if strings.HasSuffix(posix, "busybox") {
			args = append([]string{"sh"}, args...)
		}
		cmd := osexec.Command(posix, args...)
		cmd.Dir = t.TempDir()
		cmd.Env = []string{"PATH=" + bin, "HOME=" + cmd.Dir}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		return string(out)
	}
	require.Empty(t, run(`command -v bash || true`), "no bash on PATH")

	ws, err := parseSetup(run(workspaceScript))
	require.NoError(t, err)
	st, err := os.Stat(ws.remoteCwd)
	require.NoError(t, err)
	require.True(t, st.IsDir())
	require.Equal(t, os.FileMode(0o755), st.Mode().Perm())
	require.Equal(t, "sh", parseShell(run(shellScript)))
	probe, err := parseSetup(run(probeScript))
	require.NoError(t, err)
	require.Equal(t, "sh", probe.shell)

	sentinel := filepath.Join(ws.remoteCwd, sentinelRelPath)
	run(sentinelScript(sentinel, []byte(`{"token":"t"}`)))
	sh, res := verifySentinel(run(resumeScript(sentinel)), "t")
	require.Equal(t, "sh", sh)
	require.Equal(t, "matched", res)
}

func TestFencedFailedCreateRetryIsNotIdleEvidence(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	c, err := e.d.resolveAccount(mustJSON(t, e.cfg))
	require.NoError(t, err)
	attempt := "0b6c0d1e-6f4e-4c43-9d0a-6e5a4b1f2c3d"
	labels, err := cleanup.OwnershipLabels("company-1", "env-1", "run-1", attempt, false)
	require.NoError(t, err)
	env := cleanup.Envelope{ProviderLeaseID: cleanup.CreationName(attempt), ObservedProviderLeaseID: *l.ProviderLeaseID,
		CompanyID: "company-1", EnvironmentID: "env-1", RunID: "run-1", AttemptID: attempt,
		AccountFingerprint: c.fingerprint, Labels: labels}
	e.use(e.newDriver())
	_, err = e.call("environmentDestroyLease", with(e.base(nil), "providerLeaseId", env.ProviderLeaseID,
		"leaseMetadata", map[string]any{"failedCreateCleanup": env}))
	require.ErrorIs(t, err, cleanup.ErrOwnership)
	require.Zero(t, e.d.idle.report().UncertainCleanups, "nothing of ours to wait for")
	e.expectLive(*l.ProviderLeaseID)
}
