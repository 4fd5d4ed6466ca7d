package sync

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// env is one emulated sandbox with a sync Target rooted at its work dir.
type env struct {
	srv  *daytonatest.Server
	c    *daytona.Client
	sb   *daytona.Sandbox
	info daytonatest.SandboxInfo
	t    Target
	root string // sandbox root as the sandbox names it
	// hostRoot is root on the host. They are the same path on the host
	// layout, which these tests use by default (below).
	hostRoot string
}

func newEnv(t testing.TB, opts ...daytonatest.Option) *env {
	t.Helper()
	return newEnvWith(t, nil, opts...)
}

// newEnvWith creates the sandbox with extra environment variables.
func newEnvWith(t testing.TB, sbEnv map[string]string, opts ...daytonatest.Option) *env {
	t.Helper()
	// Most tests here build and check the sandbox's tree from the host at
	// the paths the sandbox uses, so they run on the host layout; a test
	// that passes WithIsolation(IsolationAuto) gets Daytona's (namespace)
	// layout and uses hostRoot for its host side.
	opts = append([]daytonatest.Option{daytonatest.WithIsolation(daytonatest.IsolationOff)}, opts...)
	te := testenv.New(t, testenv.WithServer(opts...))
	sb := te.StartSandbox(t, &daytona.CreateSandboxRequest{Env: sbEnv})
	root := filepath.Join(sb.Info.WorkDir, "workspace")
	hostRoot := sb.Info.HostPath(root)
	require.NoError(t, os.MkdirAll(hostRoot, 0o755))
	require.NoError(t, sb.Info.Own(hostRoot))
	e := &env{srv: te.Server, c: te.Client, sb: sb.Sandbox, info: sb.Info, root: root, hostRoot: hostRoot}
	e.t = Target{Client: te.Client, Sandbox: sb.Ref(), Root: root, RunCommand: e.runCommand}
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

// fileMapping and dirMapping are one mapping of each kind.
func fileMapping(src, dst string) Mapping {
	return Mapping{SourcePath: src, TargetPath: dst, Kind: KindFile}
}

func dirMapping(src, dst string) Mapping {
	return Mapping{SourcePath: src, TargetPath: dst, Kind: KindDirectory}
}

// syncIn and syncOut run one operation holding ms.
func (e *env) syncIn(t testing.TB, o Options, ms ...Mapping) ([]OperationResult, error) {
	t.Helper()
	return SyncIn(t.Context(), e.t, []Operation{{ID: "i", Files: ms}}, o)
}

func (e *env) syncOut(t testing.TB, o Options, ms ...Mapping) ([]OperationResult, error) {
	t.Helper()
	return SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: ms}}, o)
}

// noScratchLeft asserts that no reserved name is left in the sandbox root
// or under any of the host directories.
func (e *env) noScratchLeft(t testing.TB, hostDirs ...string) {
	t.Helper()
	assert.Empty(t, e.scratchLeft(t))
	for _, d := range hostDirs {
		assert.Empty(t, hostScratchLeft(t, d))
	}
}

// scratchLeft lists reserved scratch names left directly under the root.
func (e *env) scratchLeft(t testing.TB) []string {
	t.Helper()
	ents, err := os.ReadDir(e.hostRoot)
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
