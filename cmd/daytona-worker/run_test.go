package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	osexec "os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/creack/pty"
	daytonaworker "github.com/daytonaworker/daytona-worker"
	"github.com/daytonaworker/daytona-worker/internal/cli"
	"github.com/daytonaworker/daytona-worker/provider"
	"github.com/stretchr/testify/require"
)

func runCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), cli.ExitCode(err)
}

// noRead is a stdin that fails the test if anything reads it: commands that
// only print must not start serving.
type noRead struct{ t *testing.T }

func (r noRead) Read([]byte) (int, error) {
	r.t.Error("stdin was read")
	return 0, io.EOF
}

func runNoStdin(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Run(context.Background(), args, noRead{t}, &out, &errb)
	require.Empty(t, errb.String(), "%q wrote to stderr; main reports the error", args)
	return out.String(), err
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

// envVars are every variable the worker or its launcher reads (grep
// Getenv/LookupEnv in the worker's packages and process.env in npm/).
var envVars = []string{"DAYTONA_WORKER_LOG_LEVEL", "DAYTONA_WORKER_PARENT_PID", "DAYTONA_API_KEY", "GOMEMLIMIT", "DAYTONA_WORKER_LAUNCH",
	"DAYTONA_API_URL", "DAYTONA_TARGET"}

func TestHelpOnEveryCommand(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"-help"}, {"help"},
		{"serve", "--help"}, {"serve", "-h"}, {"help", "serve"},
		{"version", "--help"}, {"version", "-h"}, {"help", "version"},
		{"manifest", "--help"}, {"manifest", "-h"}, {"manifest", "--profile", "current", "--help"}, {"help", "manifest"},
		{"doctor", "--help"}, {"help", "doctor"}, {"sweep", "-h"}, {"help", "sweep"},
	} {
		out, err := runNoStdin(t, args...)
		require.NoError(t, err, "%q", args)
		require.Equal(t, 0, cli.ExitCode(err))
		require.Contains(t, out, "usage: daytona-worker", "%q", args)
		for _, v := range envVars {
			require.Contains(t, out, v, "%q help does not list %s", args, v)
		}
	}
	out, _ := runNoStdin(t, "--help")
	for _, cmd := range []string{"serve", "version", "manifest", "doctor", "sweep"} {
		require.Contains(t, out, "\n  "+cmd+" ", "top-level help lists %s", cmd)
	}
	out, _ = runNoStdin(t, "manifest", "--help")
	require.Contains(t, out, "compat-2026.916  (default)")
	out, _ = runNoStdin(t, "serve", "--help")
	require.Contains(t, out, "JSON-RPC 2.0")
}

func TestExtraArgumentsAreErrors(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "x"}, {"serve", "--help", "x"}, {"serve", "--log-level=debug"},
		{"version", "x"}, {"--version", "x"},
		{"manifest", "x"}, {"manifest", "--profile", "current", "x"}, {"manifest", "--nope"},
		{"manifest", "--profile"}, {"manifest", "--profile", "nope"},
		{"help", "x"}, {"help", "serve", "x"}, {"--help", "serve", "x"},
		{"frobnicate"}, {"-x"},
		{"doctor", "x"}, {"doctor", "--nope"}, {"sweep"}, {"sweep", "--delete"}, {"sweep", "--run", "r", "x"},
		{"sweep", "--older-than", "soon", "--all"}, {"sweep", "--all", "--concurrency", "0"},
	} {
		out, err := runNoStdin(t, args...)
		require.Error(t, err, "%q", args)
		require.Equal(t, 2, cli.ExitCode(err), "%q", args)
		require.Empty(t, out, "%q", args)
		msg := err.Error()
		require.NotContains(t, msg, "\n", "%q: one line, got %q", args, msg)
		require.Contains(t, msg, "daytona-worker --help", "%q", args)
	}
}

func TestManifestDefaultsToCompatProfile(t *testing.T) {
	def, err := runNoStdin(t, "manifest")
	require.NoError(t, err)
	compat, err := runNoStdin(t, "manifest", "--profile", "compat-2026.916")
	require.NoError(t, err)
	require.Equal(t, compat, def, "manifest without --profile is the compat-2026.916 profile (what `make package` builds)")
	require.NotContains(t, def, "defaultAcquireTimeoutMs")
	current, err := runNoStdin(t, "manifest", "--profile=current")
	require.NoError(t, err)
	require.NotEqual(t, current, def)
}

// TestBareWorkerOnTerminalSaysJSONRPC: a person who runs the binary by hand
// gets one line saying what it waits for, and it still serves.
func TestBareWorkerOnTerminalSaysJSONRPC(t *testing.T) {
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n"
	for _, tty := range []bool{true, false} {
		for _, args := range [][]string{nil, {"serve"}} {
			t.Run(fmt.Sprintf("tty=%v/%q", tty, args), func(t *testing.T) {
				saved := stdinIsTerminal
				t.Cleanup(func() { stdinIsTerminal = saved })
				stdinIsTerminal = func(io.Reader) bool { return tty }
				var out, errb bytes.Buffer
				err := Run(context.Background(), args, strings.NewReader(initialize), &out, &errb)
				require.NoError(t, err)
				require.Contains(t, out.String(), `"ok":true`, "it serves either way")
				require.NotContains(t, out.String(), "JSON-RPC 2.0 on stdin", "the notice never reaches stdout")
				if tty {
					require.Equal(t, ttyNotice+"\n", firstLine(errb.String()))
					require.Contains(t, ttyNotice, "JSON-RPC")
					require.Contains(t, ttyNotice, "stdin")
					require.Equal(t, 1, strings.Count(errb.String(), ttyNotice))
				} else {
					require.NotContains(t, errb.String(), ttyNotice)
				}
			})
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i+1]
	}
	return s
}

// TestIsTerminal checks the real detector: a pseudo-terminal is one; a pipe
// and /dev/null (how scripts detach stdin) are not.
func TestIsTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	defer ptmx.Close()
	defer tty.Close()
	require.True(t, stdinIsTerminal(tty))
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	require.False(t, stdinIsTerminal(r))
	null, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer null.Close()
	require.False(t, stdinIsTerminal(null))
	require.False(t, stdinIsTerminal(strings.NewReader("")))
}

func TestUnknownLogLevelIsAnError(t *testing.T) {
	for _, v := range []string{"verbose", "warning", "debug-4", "INFO+2", "1", "debug,info"} {
		t.Setenv(logLevelEnv, v)
		for _, args := range [][]string{nil, {"serve"}} {
			out, err := runNoStdin(t, args...)
			require.Error(t, err, "%s=%q", logLevelEnv, v)
			require.Equal(t, 2, cli.ExitCode(err))
			require.Empty(t, out)
			msg := err.Error()
			require.NotContains(t, msg, "\n")
			require.Contains(t, msg, logLevelEnv)
			require.Contains(t, msg, "debug, info, warn or error")
		}
	}
	// A bad level does not stop the commands that do not log.
	t.Setenv(logLevelEnv, "verbose")
	_, err := runNoStdin(t, "version")
	require.NoError(t, err)
	_, err = runNoStdin(t, "manifest")
	require.NoError(t, err)
}

func TestLogLevels(t *testing.T) {
	for v, want := range map[string]slog.Level{
		"": slog.LevelWarn, "  ": slog.LevelWarn, "debug": slog.LevelDebug, "DEBUG": slog.LevelDebug,
		" info\n": slog.LevelInfo, "Warn": slog.LevelWarn, "error": slog.LevelError,
	} {
		got, err := logLevel(v)
		require.NoError(t, err, "%q", v)
		require.Equal(t, want, got, "%q", v)
	}
	// The level reaches the logger: a debug line appears only when asked for.
	frames := `{"jsonrpc":"2.0","method":"no.such.notification","params":{}}` + "\n"
	t.Setenv(logLevelEnv, "debug")
	var out, errb bytes.Buffer
	require.NoError(t, Run(context.Background(), nil, strings.NewReader(frames), &out, &errb))
	require.Contains(t, errb.String(), `"level":"DEBUG"`)
	t.Setenv(logLevelEnv, "")
	errb.Reset()
	require.NoError(t, Run(context.Background(), nil, strings.NewReader(frames), &out, &errb))
	require.NotContains(t, errb.String(), `"level":"DEBUG"`)
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
	oct := manifestProfile(t, provider.ProfileCompat202610)
	for _, m := range []map[string]any{cur, compat, oct} {
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
	octDriver := oct["environmentDrivers"].([]any)[0].(map[string]any)
	require.EqualValues(t, 300000, octDriver["defaultAcquireTimeoutMs"])
	require.NotContains(t, octDriver, "creationOperationVersion", "the October 2026 hosts refuse it")
	require.Equal(t, provider.ManifestVersion()+"-oct2026", oct["version"])

	// The compat profile holds only what the 2026.916.1 validator accepts.
	compatDriver := compat["environmentDrivers"].([]any)[0].(map[string]any)
	for k := range compatDriver {
		require.Contains(t, provider.CompatDriverKeys, k, "driver key %q is rejected by host 2026.916.1", k)
	}
	for k := range compatDriver["sandboxCapabilities"].(map[string]any) {
		require.Contains(t, provider.CompatCapabilityKeys, k)
	}
	// The two are distinct packages: the host refreshes a saved manifest only
	// when the version string changes, and npm keys packages by version.
	// compat carries manifest.json's (and npm/package.json's) version; current
	// the same with the prerelease tag "current", which the host's semver
	// pattern accepts.
	require.Equal(t, provider.ManifestVersion(), compat["version"])
	require.Equal(t, provider.ManifestVersion()+"-current", cur["version"])
	require.NotEqual(t, compat["version"], cur["version"])
	var pkg struct{ Version, License string }
	b, err := os.ReadFile("../../npm/package.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &pkg))
	require.Equal(t, compat["version"], pkg.Version, "npm/package.json holds the compat (manifest.json) version")
	require.Equal(t, "MIT", pkg.License)
	for _, m := range []map[string]any{cur, compat, oct} {
		require.Regexp(t, hostSemver, m["version"])
	}

	// And it differs from current only by the newer keys and the version.
	delete(curDriver, "defaultAcquireTimeoutMs")
	delete(curDriver, "creationOperationVersion")
	delete(cur, "version")
	delete(compat, "version")
	require.Equal(t, cur, compat)
}

// hostSemver is the version pattern of the host's manifest schema
// (pluginManifestV1Schema, @paperclipai/shared 2026.916.1).
const hostSemver = `^\d+\.\d+\.\d+(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`

// pendingCapabilities are declared in manifest.json but their methods land
// with later issues. The host never grants a capability whose methods are not
// advertised, so declaring early is harmless; this list keeps it honest and
// must shrink to empty as the methods arrive.
var pendingCapabilities = map[string]string{}

func TestDeclaredCapabilitiesAreBackedByMethods(t *testing.T) {
	reg, _ := productRegistry(slog.New(slog.DiscardHandler))
	caps, err := declaredCapabilities()
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

// declaredCapabilities returns the sandboxCapabilities declared true by the
// manifest's first driver, sorted.
func declaredCapabilities() ([]string, error) {
	var m provider.Manifest
	if err := json.Unmarshal(daytonaworker.ManifestJSON, &m); err != nil {
		return nil, err
	}
	if len(m.EnvironmentDrivers) == 0 {
		return nil, fmt.Errorf("manifest declares no environment driver")
	}
	caps, _ := m.EnvironmentDrivers[0]["sandboxCapabilities"].(map[string]any)
	var out []string
	for k, v := range caps {
		if b, _ := v.(bool); b {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}

// TestWorkerDoesNotLinkTheEmulator: the emulator is test-only code.
func TestWorkerDoesNotLinkTheEmulator(t *testing.T) {
	out, err := osexec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "github.com/daytonaworker/daytona-worker/rpc")
	require.NotContains(t, string(out), "daytona/daytonatest")
	require.NotContains(t, string(out), "testing\n", "the worker must not link the testing package")
}
