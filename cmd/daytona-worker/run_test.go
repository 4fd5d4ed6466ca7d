package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/daytonaworker/daytona-worker/provider"
	"github.com/stretchr/testify/require"
)

func runCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), exitCode(err)
}

func TestVersionAndHelp(t *testing.T) {
	out, _, code := runCmd(t, "version")
	require.Equal(t, 0, code)
	require.Contains(t, out, "daytona-worker "+provider.ManifestVersion())
	out, _, code = runCmd(t, "help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "manifest")
	_, _, code = runCmd(t, "frobnicate")
	require.Equal(t, 2, code)
	_, _, code = runCmd(t, "manifest", "--profile", "nope")
	require.Equal(t, 2, code)
	_, _, code = runCmd(t, "serve", "extra")
	require.Equal(t, 2, code)
}

func TestServeInProcessUntilEOF(t *testing.T) {
	var out bytes.Buffer
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n")
	require.NoError(t, serve(context.Background(), in, &out, &bytes.Buffer{}, serveOptions{}))
	require.Contains(t, out.String(), `"ok":true`)
}

func manifestProfile(t *testing.T, p provider.Profile) map[string]any {
	t.Helper()
	out, _, code := runCmd(t, "manifest", "--profile", string(p))
	require.Equal(t, 0, code)
	require.True(t, strings.HasSuffix(out, "}\n"))
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	return m
}

func TestManifestProfiles(t *testing.T) {
	cur := manifestProfile(t, provider.ProfileCurrent)
	compat := manifestProfile(t, provider.ProfileCompat2026916)
	for _, m := range []map[string]any{cur, compat} {
		require.NotEqual(t, "paperclip.daytona-sandbox-provider", m["id"], "must not claim the first-party id")
		require.Regexp(t, `^[a-z0-9][a-z0-9._-]*$`, m["id"])
		require.EqualValues(t, 1, m["apiVersion"])
		require.Regexp(t, `^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`, m["version"])
		require.Equal(t, []any{"automation"}, m["categories"])
		require.Equal(t, []any{"environment.drivers.register"}, m["capabilities"])
		require.Equal(t, map[string]any{"worker": "./worker.mjs"}, m["entrypoints"])
		drivers := m["environmentDrivers"].([]any)
		require.Len(t, drivers, 1)
		d := drivers[0].(map[string]any)
		require.Equal(t, "daytona", d["driverKey"])
		require.Equal(t, "sandbox_provider", d["kind"])
		require.Equal(t, true, d["supportsReusableLeases"])
		props := d["configSchema"].(map[string]any)["properties"].(map[string]any)
		for _, k := range []string{"apiKey", "apiUrl", "target", "snapshot", "image", "language", "cpu", "memory", "disk", "gpu",
			"timeoutMs", "livenessTimeoutMs", "autoStopInterval", "autoArchiveInterval", "autoDeleteInterval", "reuseLease", "ttlMinutes"} {
			require.Contains(t, props, k)
		}
		// docs/behavior.md#config-schema / docs/behavior.md#reference-tests items 192–197.
		require.Equal(t, "secret-ref", props["apiKey"].(map[string]any)["format"])
		require.NotContains(t, props["apiKey"], "default", "a default on a secret-ref would be saved as a company secret")
		mem := props["memory"].(map[string]any)
		require.Equal(t, []any{1.0, 2.0, 4.0, 8.0}, mem["enum"])
		require.Contains(t, mem["enum"], mem["default"])
		require.EqualValues(t, 300000, props["timeoutMs"].(map[string]any)["default"])
		require.NotContains(t, d["configSchema"], "required")
	}
	curDriver := cur["environmentDrivers"].([]any)[0].(map[string]any)
	require.EqualValues(t, 300000, curDriver["defaultAcquireTimeoutMs"])
	require.EqualValues(t, 1, curDriver["creationOperationVersion"])

	// The compat profile holds only what the 2026.916.1 validator accepts.
	compatDriver := compat["environmentDrivers"].([]any)[0].(map[string]any)
	for k := range compatDriver {
		require.Contains(t, provider.CompatDriverKeys, k, "driver key %q is rejected by host 2026.916.1", k)
	}
	for k := range compatDriver["sandboxCapabilities"].(map[string]any) {
		require.Contains(t, provider.CompatCapabilityKeys, k)
	}
	// And it differs from current only by the newer keys.
	delete(curDriver, "defaultAcquireTimeoutMs")
	delete(curDriver, "creationOperationVersion")
	require.Equal(t, cur, compat)
}

// pendingCapabilities are declared in manifest.json but their methods land
// with later issues. The host never grants a capability whose methods are not
// advertised, so declaring early is harmless; this list keeps it honest and
// must shrink to empty as the methods arrive.
var pendingCapabilities = map[string]string{}

func TestDeclaredCapabilitiesAreBackedByMethods(t *testing.T) {
	reg := productRegistry(slog.New(slog.DiscardHandler))
	caps, err := provider.DeclaredCapabilities()
	require.NoError(t, err)
	require.NotEmpty(t, caps)
	for _, c := range caps {
		methods, known := provider.CapabilityMethods[c]
		require.True(t, known, "unknown capability %q", c)
		all := true
		for _, m := range methods {
			all = all && reg.Has(m)
		}
		if why, pending := pendingCapabilities[c]; pending {
			require.False(t, all, "%s is implemented now: remove it from pendingCapabilities (%s)", c, why)
			continue
		}
		require.True(t, all, "capability %s is declared but %v are not all registered", c, methods)
	}
	for c := range pendingCapabilities {
		require.True(t, slices.Contains(caps, c), "pending capability %s is not declared", c)
	}
}

// TestWorkerDoesNotLinkTheEmulator: the emulator is test-only code.
func TestWorkerDoesNotLinkTheEmulator(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "github.com/daytonaworker/daytona-worker/rpc")
	require.NotContains(t, string(out), "daytona/daytonatest")
	require.NotContains(t, string(out), "testing\n", "the worker must not link the testing package")
}
