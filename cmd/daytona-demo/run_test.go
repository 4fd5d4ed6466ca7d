package main

import (
	"bytes"
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDemoRunsAFullLifecycle is `make demo` in a test: the worker and the
// emulator as built binaries, every step answered, the sandbox destroyed,
// the worker exiting 0. (DAYTONA_API_KEY is cleared: tests never reach
// real Daytona.)
func TestDemoRunsAFullLifecycle(t *testing.T) {
	t.Setenv("DAYTONA_API_KEY", "")
	dir := t.TempDir()
	for name, pkg := range map[string]string{"daytona-worker": "../daytona-worker", "daytona-sim": "../daytona-sim"} {
		out, err := osexec.Command("go", "build", "-o", filepath.Join(dir, name), pkg).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := Run(ctx, []string{"-worker", filepath.Join(dir, "daytona-worker"), "-sim", filepath.Join(dir, "daytona-sim")}, &out, os.Stderr)
	require.NoError(t, err, "%s", out.String())
	for _, step := range []string{"initialize", "acquire lease", "realize workspace", "execute", "sync in", "sync out",
		"release lease", "resume lease", "destroy lease", "health", "shutdown"} {
		require.Regexp(t, `(?m)^  ok   `+step+` `, out.String())
	}
	require.Contains(t, out.String(), `"state":"destroyed"`)
	require.Contains(t, out.String(), "exit code 0")
	require.NotContains(t, out.String(), "FAIL")
}
