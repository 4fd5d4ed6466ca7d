package sync

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
)

// env is one emulated sandbox with a sync Target rooted at its work dir.
type env struct {
	srv  *daytonatest.Server
	c    *daytona.Client
	sb   *daytona.Sandbox
	info daytonatest.SandboxInfo
	t    Target
	root string // sandbox root (a real host path inside the emulator tree)
}

func newEnv(t testing.TB, opts ...daytonatest.Option) *env {
	t.Helper()
	return newEnvWith(t, nil, opts...)
}

// newEnvWith creates the sandbox with extra environment variables.
func newEnvWith(t testing.TB, sbEnv map[string]string, opts ...daytonatest.Option) *env {
	t.Helper()
	srv := daytonatest.NewServer(t, opts...)
	c, err := daytona.NewClient(
		daytona.WithAPIURL(srv.URL()),
		daytona.WithAPIKey(srv.APIKey()),
		daytona.WithPollBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(2 * time.Millisecond) }),
	)
	require.NoError(t, err)
	sb, _, err := c.Sandboxes.Create(context.Background(), &daytona.CreateSandboxRequest{
		Name: "sync-test-" + uuid.NewString()[:8], Snapshot: "base", Env: sbEnv,
	})
	require.NoError(t, err)
	sb, err = c.Sandboxes.WaitUntilStarted(context.Background(), sb.ID)
	require.NoError(t, err)
	info, ok := srv.Sandbox(sb.ID)
	require.True(t, ok)
	root := filepath.Join(info.WorkDir, "workspace")
	require.NoError(t, os.MkdirAll(root, 0o755))
	e := &env{srv: srv, c: c, sb: sb, info: info, root: root}
	e.t = Target{Client: c, Sandbox: sb.Ref(), Root: root, RunCommand: e.runCommand}
	return e
}

// runCommand is the post-upload seam wired straight to the toolbox.
func (e *env) runCommand(ctx context.Context, command, cwd string, timeout time.Duration) (int, string, string, error) {
	res, _, err := e.c.Toolbox.Execute(ctx, e.sb.Ref(), &daytona.ExecuteRequest{Command: command, Cwd: cwd, Timeout: seconds(timeout)})
	if err != nil {
		return 0, "", "", err
	}
	return res.ExitCode, res.Result, "", nil
}

// scratchLeft lists reserved scratch names left directly under the root.
func (e *env) scratchLeft(t testing.TB) []string {
	t.Helper()
	ents, err := os.ReadDir(e.root)
	require.NoError(t, err)
	var left []string
	for _, en := range ents {
		if strings.HasPrefix(en.Name(), scratchPrefix) {
			left = append(left, en.Name())
		}
	}
	return left
}

func hostScratchLeft(t testing.TB, dir string) []string {
	t.Helper()
	var left []string
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasPrefix(fi.Name(), scratchPrefix) {
			left = append(left, p)
		}
		return nil
	})
	return left
}

func mode(m uint32) *uint32 { return &m }

func writeFile(t testing.TB, p, content string, perm os.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), perm))
	require.NoError(t, os.Chmod(p, perm))
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

func permOf(t testing.TB, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

func lookPath(name string) (string, error) {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errNotFound
}
