package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/cli"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// opsEnv is an in-process emulator the doctor and sweep commands reach
// through the environment variables an operator would set.
func opsEnv(t *testing.T) *testenv.Env {
	env := testenv.New(t)
	t.Setenv("DAYTONA_API_KEY", env.Server.APIKey())
	t.Setenv("DAYTONA_API_URL", env.Server.URL())
	t.Setenv("DAYTONA_TARGET", "")
	return env
}

// runOps runs one command in-process and returns its stdout, its error
// (what main prints on stderr) and its exit code.
func runOps(t *testing.T, ctx context.Context, args ...string) (string, string, int) {
	t.Helper()
	var out bytes.Buffer
	err := Run(ctx, args, strings.NewReader(""), &out, &out)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	return out.String(), msg, cli.ExitCode(err)
}

func ownedSandbox(t *testing.T, env *testenv.Env, environment, run string) *daytona.Sandbox {
	t.Helper()
	attempt := cleanup.NewAttemptID()
	labels, err := cleanup.OwnershipLabels("company-1", environment, run, attempt, false)
	require.NoError(t, err)
	return env.StartSandbox(t, &daytona.CreateSandboxRequest{Name: cleanup.CreationName(attempt), Labels: labels}).Sandbox
}

func gone(env *testenv.Env, id string) bool {
	info, ok := env.Server.Sandbox(id)
	return !ok || info.State == daytonatest.StateDestroyed
}

// TestSweepCommand: a dry run lists, --delete deletes and waits, and the
// unlabelled and partly labelled sandboxes survive even --all, although
// the listing ignores its label filter.
func TestSweepCommand(t *testing.T) {
	env := opsEnv(t)
	ctx := context.Background()
	a1, a2 := ownedSandbox(t, env, "env-1", "run-1"), ownedSandbox(t, env, "env-1", "run-1")
	b := ownedSandbox(t, env, "env-2", "run-2")
	plain := env.StartSandbox(t, nil).Sandbox
	partial := env.StartSandbox(t, &daytona.CreateSandboxRequest{Labels: map[string]string{
		cleanup.LabelProvider: cleanup.ProviderValue, cleanup.LabelCompanyID: "company-1", cleanup.LabelRunID: "run-1"}}).Sandbox
	env.Server.Inject(daytonatest.Fault{Method: "GET", Route: "/sandbox", ListIgnoresLabels: true})

	out, _, code := runOps(t, ctx, "sweep", "--run", "run-1")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "Daytona at "+env.Server.URL()+": 2 sandboxes")
	assert.Regexp(t, `(?m)^NAME\s+STATE\s+AGE\s+LABELS$`, out)
	for _, sb := range []*daytona.Sandbox{a1, a2} {
		assert.Regexp(t, `(?m)^`+sb.Name+`\s+started\s+0m\s+company-id=company-1,create-attempt=[0-9a-f-]+,environment-id=env-1,reuse-lease=false,run-id=run-1$`, out)
	}
	assert.NotContains(t, out, partial.Name)
	assert.Contains(t, out, "dry run: nothing was deleted")
	assert.False(t, gone(env, a1.ID), "a dry run deletes nothing")

	out, _, code = runOps(t, ctx, "sweep", "--run", "run-1", "--delete", "--concurrency", "2")
	require.Equal(t, 0, code, out)
	assert.Regexp(t, `(?m)^deleted `+a1.Name+` \([12]/2\)$`, out)
	assert.Contains(t, out, "swept 2 of 2 sandboxes")
	assert.True(t, gone(env, a1.ID) && gone(env, a2.ID))

	orig := stdoutIsTerminal
	stdoutIsTerminal = func(io.Writer) bool { return true }
	t.Cleanup(func() { stdoutIsTerminal = orig })
	out, _, code = runOps(t, ctx, "sweep", "--all", "--delete")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "\r["+strings.Repeat("=", barWidth)+"] 1/1 deleted, 0 failed", "a progress bar on a terminal")
	assert.True(t, gone(env, b.ID))
	assert.False(t, gone(env, plain.ID), "never a sandbox without the ownership labels")
	assert.False(t, gone(env, partial.ID), "never one with only some of them")

	out, _, code = runOps(t, ctx, "sweep", "--all")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, ": 0 sandboxes of this plugin match")
}

// TestSweepCommandReportsFailures: a delete Daytona refuses is named, and
// the command fails.
func TestSweepCommandReportsFailures(t *testing.T) {
	env := opsEnv(t)
	sb := ownedSandbox(t, env, "env-1", "run-1")
	env.Server.Inject(daytonatest.Fault{Method: "DELETE", Route: "/sandbox/{sandboxIdOrName}", Status: 400})
	out, msg, code := runOps(t, context.Background(), "sweep", "--environment", "env-1", "--delete")
	require.Equal(t, 1, code, out)
	assert.Contains(t, msg, "1 of 1 sandboxes could not be deleted")
	assert.Regexp(t, `(?m)^failed  `+sb.Name+` \(1/1\): `, out)
	assert.False(t, gone(env, sb.ID))
}

var checkNames = []string{"config", "DNS", "TCP", "TLS", "API key", "quota", "snapshot/image"}

// TestDoctorCommand: every check passes against the emulator, each on one
// line with its time; --json --create is one object with a lease's timing
// table, and leaves nothing behind. The key is never printed.
func TestDoctorCommand(t *testing.T) {
	env := opsEnv(t)
	key := env.Server.APIKey()
	out, msg, code := runOps(t, context.Background(), "doctor", "--snapshot", "base")
	require.Equal(t, 0, code, "%s%s", out, msg)
	assert.Contains(t, out, "Daytona API at "+env.Server.URL())
	for _, name := range checkNames {
		assert.Regexp(t, `(?m)^✓ `+regexp.QuoteMeta(name)+`\s+[0-9.]+ ms  \S`, out)
	}
	assert.Contains(t, out, "organization daytonatest, region us: CPU ")
	assert.Contains(t, out, "snapshot base is active")
	assert.Contains(t, out, "all checks passed")
	assert.NotContains(t, out, key)

	out, msg, code = runOps(t, context.Background(), "doctor", "--json", "--create")
	require.Equal(t, 0, code, "%s%s", out, msg)
	assert.Equal(t, 1, strings.Count(out, "\n"), "one JSON object")
	var rep doctorReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.True(t, rep.OK)
	require.Len(t, rep.Checks, len(checkNames))
	require.NotNil(t, rep.Create)
	var steps []string
	for _, s := range rep.Create.Steps {
		assert.True(t, s.OK, "%+v", s)
		steps = append(steps, s.Name)
	}
	assert.Equal(t, []string{"acquire", "execute echo ok", "sync in", "sync out", "destroy"}, steps)
	assert.Empty(t, rep.Create.Leftover)
	assert.Empty(t, env.Server.Sandboxes(), "the lease was destroyed")
	assert.NotContains(t, out, key)
}

// TestDoctorFailures: each failure is a ✗ line with a fix, the checks that
// need it are not run, the exit code is 1, and the key (here a wrong one)
// appears nowhere.
func TestDoctorFailures(t *testing.T) {
	env := opsEnv(t)
	const wrongKey = "dtn_wrong_9f3c1e7a5b2d4c6e8f0a1b3c5d7e9f1a"
	cfgFile := filepath.Join(t.TempDir(), "env.json")
	require.NoError(t, os.WriteFile(cfgFile, []byte(`{"apiKey":"`+wrongKey+`","timeoutMs":0}`), 0o600))
	for name, tc := range map[string]struct {
		setup  func(t *testing.T)
		args   []string
		failed string
		want   string
	}{
		"wrong key": {setup: func(t *testing.T) { t.Setenv("DAYTONA_API_KEY", wrongKey) },
			failed: "API key", want: "fix: create an API key"},
		"invalid config": {args: []string{"--config", cfgFile}, failed: "config", want: "timeoutMs"},
		"connection refused": {args: []string{"--api-url", "http://127.0.0.1:1/api"}, failed: "TCP",
			want: "fix: a firewall or proxy blocks outbound port 1"},
		"missing snapshot": {args: []string{"--snapshot", "nope"}, failed: "snapshot/image", want: "fix: create the snapshot",
			setup: func(*testing.T) {
				env.Server.Inject(daytonatest.Fault{Method: "GET", Route: "/snapshots/{id}", Status: 404, Times: 1})
			}},
		"credentials in the URL": {args: []string{"--api-url", "http://user:" + wrongKey + "@127.0.0.1:1/api?token=" + wrongKey}, failed: "config", want: "must not carry credentials"},
		"region without quota":   {args: []string{"--target", "eu", "--snapshot", "base"}, failed: "quota", want: "no quota in region eu"},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup(t)
			}
			out, msg, code := runOps(t, context.Background(), append([]string{"doctor", "--create"}, tc.args...)...)
			require.Equal(t, 1, code, out)
			assert.Regexp(t, `(?m)^✗ `+regexp.QuoteMeta(tc.failed)+` `, out)
			assert.Contains(t, out, tc.want)
			assert.Regexp(t, `doctor: (1 check|[2-9] checks) failed`, msg)
			assert.NotContains(t, out+msg, wrongKey)
			assert.NotContains(t, out, "all checks passed")
			assert.Contains(t, out, "--create skipped: the "+tc.failed+" check failed")
			assert.Empty(t, env.Server.Sandboxes(), "no --create after a failed check")
		})
	}
}

// TestDoctorCreateInterrupted: Ctrl-C during the lease still deletes the
// sandbox; when Daytona refuses the delete, the sandbox's name and the
// sweep command that removes it are printed, and that command works.
func TestDoctorCreateInterrupted(t *testing.T) {
	env := opsEnv(t)
	h := env.Server.Inject(daytonatest.Fault{Method: "POST", Route: "/files/bulk-upload", Hang: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = env.Server.Await(ctx, func() bool { return h.Hits() > 0 })
		cancel() // Ctrl-C
	}()
	out, _, code := runOps(t, ctx, "doctor", "--create")
	require.Equal(t, 1, code, out)
	assert.Contains(t, out, "interrupted: deleting the sandbox")
	assert.Regexp(t, `(?m)^  cleanup\s+[0-9.]+ ms  nothing left behind$`, out)
	assert.Empty(t, env.Server.Sandboxes())

	h.Remove()
	env.Server.Inject(daytonatest.Fault{Method: "POST", Route: "/files/bulk-upload", Status: 400})
	del := env.Server.Inject(daytonatest.Fault{Method: "DELETE", Route: "/sandbox/{sandboxIdOrName}", Status: 500})
	out, _, code = runOps(t, context.Background(), "doctor", "--create")
	require.Equal(t, 1, code, out)
	m := regexp.MustCompile(`(?m)^✗ sandbox (\S+) may still exist; remove it with:\n    (daytona-worker sweep .*)$`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	sbs := env.Server.Sandboxes()
	require.Len(t, sbs, 1)
	assert.Equal(t, sbs[0].Name, m[1])
	del.Remove()
	args := strings.Fields(m[2])[1:]
	out, _, code = runOps(t, context.Background(), args...)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "swept 1 of 1")
	assert.Empty(t, env.Server.Sandboxes())
}
