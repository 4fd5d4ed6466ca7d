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
	"github.com/daytonaworker/daytona-worker/internal/span/spantest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// daemonURL is the real toolbox daemon `make fidelity` runs these tests
// against (docs/emulator.md#a-real-daemon-behind-the-emulator); "" = the
// emulator's own toolbox.
var daemonURL = os.Getenv("DAYTONA_DAEMON_URL")

// TestRoundTripThroughTheToolbox reaches the sandbox through the toolbox
// API only, so it runs against Daytona's daemon as well as the emulator: a
// host tree synced in, changed and synced in again (the delta path), then
// synced back out arrives unchanged (contents, modes, symlinks, unicode
// names, an empty directory, a binary file), and synced out again after a
// change (the delta path of the export).
func TestRoundTripThroughTheToolbox(t *testing.T) {
	opts := []daytonatest.Option{daytonatest.WithIsolation(daytonatest.IsolationOff)}
	if daemonURL != "" {
		opts = append(opts, daytonatest.WithToolboxUpstream(daemonURL))
	}
	te := testenv.New(t, testenv.WithServer(opts...))
	sb := te.StartSandbox(t, nil)
	ctx := t.Context()
	// A real daemon's sandbox is this machine: a directory of the test's own.
	root := filepath.Join(sb.Info.WorkDir, "roundtrip")
	if daemonURL != "" {
		root = filepath.Join(os.TempDir(), "sync-roundtrip-"+strings.ReplaceAll(t.Name(), "/", "-")+"-"+time.Now().Format("150405.000000000"))
	}
	_, err := te.Client.Files.CreateFolder(ctx, sb.Ref(), root, "755")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = te.Client.Files.Delete(context.Background(), sb.Ref(), root, true) })
	tgt := Target{Client: te.Client, Sandbox: sb.Ref(), Root: root,
		RunCommand: func(ctx context.Context, command, cwd string, timeout time.Duration) (int, string, string, error) {
			res, _, err := te.Client.Toolbox.Execute(ctx, sb.Ref(), &daytona.ExecuteRequest{Command: command, Cwd: cwd, Timeout: seconds(timeout)})
			if err != nil {
				return 0, "", "", err
			}
			return res.ExitCode, res.Result, "", nil
		}}

	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a.txt"), "alpha\n", 0o644)
	writeFile(t, filepath.Join(src, "bin", "run.sh"), "#!/bin/sh\necho hi\n", 0o755)
	writeFile(t, filepath.Join(src, "ünï cödé", "ß.txt"), "straße", 0o600)
	bin := make([]byte, 1<<20)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	require.NoError(t, os.WriteFile(filepath.Join(src, "blob.bin"), bin, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(src, "empty"), 0o750))
	require.NoError(t, os.Symlink("a.txt", filepath.Join(src, "link")))

	in := func() {
		t.Helper()
		_, err := SyncIn(ctx, tgt, []Operation{{ID: "in", Files: []Mapping{{SourcePath: src, TargetPath: root + "/ws", Kind: KindDirectory}}}}, Options{})
		require.NoError(t, err)
	}
	in()
	writeFile(t, filepath.Join(src, "a.txt"), "alpha, changed\n", 0o644)
	in()

	back := t.TempDir()
	res, err := SyncOut(ctx, tgt, []Operation{{ID: "out", Files: []Mapping{{SourcePath: root + "/ws", TargetPath: filepath.Join(back, "ws"), Kind: KindDirectory}}}}, Options{})
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Equal(t, snapshotTree(t, src), snapshotTree(t, filepath.Join(back, "ws")))
	if daemonURL != "" {
		// The daemon's sandbox is this machine: the tree is really there.
		assert.Equal(t, "alpha, changed\n", readFile(t, filepath.Join(root, "ws", "a.txt")))
	}

	// A second export, after a change, goes the delta way, the changed
	// file in the listing's changes archive: the listing is the only
	// round trip (delta_changes.go).
	writeFile(t, filepath.Join(src, "bin", "run.sh"), "#!/bin/sh\necho changed\n", 0o755)
	in()
	sctx, rec := spantest.New(ctx)
	res, err = SyncOut(sctx, tgt, []Operation{{ID: "out", Files: []Mapping{{SourcePath: root + "/ws", TargetPath: filepath.Join(back, "ws"), Kind: KindDirectory}}}}, Options{})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Len(t, res[0].Directories, 1)
	assert.Equal(t, WayDelta, res[0].Directories[0].Way, res[0].Directories[0].Reason)
	assert.EqualValues(t, 1, res[0].FilesTransferred)
	assert.Equal(t, snapshotTree(t, src), snapshotTree(t, filepath.Join(back, "ws")))
	transferAttrs(t, rec, "outbound", 1)

	// And by the export, without the changes archive.
	writeFile(t, filepath.Join(src, "a.txt"), "alpha, changed again\n", 0o644)
	in()
	res, err = SyncOut(ctx, tgt, []Operation{{ID: "out", Files: []Mapping{{SourcePath: root + "/ws", TargetPath: filepath.Join(back, "ws"), Kind: KindDirectory}}}}, Options{changesMax: -1})
	require.NoError(t, err)
	require.Len(t, res[0].Directories, 1)
	assert.Equal(t, WayDelta, res[0].Directories[0].Way, res[0].Directories[0].Reason)
	assert.Equal(t, snapshotTree(t, src), snapshotTree(t, filepath.Join(back, "ws")))
}
