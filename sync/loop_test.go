package sync

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A followed directory export whose tree loops back on itself (up -> ..,
// a -> .) is refused by the sandbox before tar runs: tar -h has no loop
// detection and would recurse until the disk or the timeout gave out.
// The host target keeps its old content and no scratch file is left.
func TestSyncOutFollowedSymlinkLoopRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, link, target, loop string }{
		{"parent", "up", "..", "/proj/up/proj"},
		{"self", "a", ".", "/proj/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			writeFile(t, filepath.Join(e.root, "proj", "f.txt"), "f", 0o644)
			writeFile(t, filepath.Join(e.root, "proj", "sub", "g.txt"), "g", 0o644)
			require.NoError(t, os.Symlink(tc.target, filepath.Join(e.root, "proj", tc.link)))
			back := filepath.Join(t.TempDir(), "back")
			writeFile(t, filepath.Join(back, "old.txt"), "old", 0o644)
			before := snapshotTree(t, back)

			// The limit only keeps the unfixed code (which recurses until it)
			// from stalling the suite; it is never reached by the check.
			_, err := SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{{
				SourcePath: e.root + "/proj", TargetPath: back, Kind: KindDirectory, FollowSymlinks: true,
			}}}}, Options{Timeout: 2 * time.Minute})
			require.Error(t, err)
			var ae *ArchiveError
			require.True(t, errors.As(err, &ae), "want *ArchiveError, got %T: %v", err, err)
			assert.ErrorIs(t, err, ErrUnsafeArchive)
			assert.Contains(t, err.Error(), "Daytona syncOut refusing to follow a symlink loop under "+e.root+"/proj: ")
			assert.Contains(t, err.Error(), `"`+e.root+tc.loop+`"`)
			assert.Equal(t, before, snapshotTree(t, back))
			assert.Empty(t, hostScratchLeft(t, filepath.Dir(back)))
			assert.Empty(t, e.scratchLeft(t))
		})
	}
}

// A loop inside an excluded directory is never entered by tar, so it is
// not refused; followed links that do not loop (to a sibling directory
// outside the source, to a directory inside it) still export their content.
func TestSyncOutFollowedSymlinksWithoutLoopExport(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "other", "x.txt"), "x", 0o644)
	writeFile(t, filepath.Join(e.root, "proj", "sub", "g.txt"), "g", 0o644)
	require.NoError(t, os.Symlink("../other", filepath.Join(e.root, "proj", "sib")))
	require.NoError(t, os.Symlink("sub", filepath.Join(e.root, "proj", "again")))
	require.NoError(t, os.MkdirAll(filepath.Join(e.root, "proj", "node_modules"), 0o755))
	require.NoError(t, os.Symlink("..", filepath.Join(e.root, "proj", "node_modules", "up")))
	back := filepath.Join(t.TempDir(), "back")

	_, err := SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{{
		SourcePath: e.root + "/proj", TargetPath: back, Kind: KindDirectory, FollowSymlinks: true, Exclude: []string{"node_modules"},
	}}}}, Options{Timeout: 2 * time.Minute})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"sub": "dir 755", "sub/g.txt": "file 644 g",
		"sib": "dir 755", "sib/x.txt": "file 644 x",
		"again": "dir 755", "again/g.txt": "file 644 g",
	}, snapshotTree(t, back))
}

// The terminal fallback (taken when the sandbox disk is full) runs the
// same check before its tar: driven directly here, since the first pass
// would already have refused the loop.
func TestStreamedExportRefusesFollowedSymlinkLoop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "proj", "f.txt"), "f", 0o644)
	require.NoError(t, os.Symlink("..", filepath.Join(e.root, "proj", "up")))
	host := t.TempDir()
	back := filepath.Join(host, "back")
	// As above, the limit only bounds the unfixed code.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	m := Mapping{SourcePath: e.root + "/proj", TargetPath: back, Kind: KindDirectory, FollowSymlinks: true}
	_, _, err := e.t.streamDir(ctx, m, m.SourcePath, Options{HostReserve: -1}, nil)
	var ae *ArchiveError
	require.True(t, errors.As(err, &ae), "want *ArchiveError, got %T: %v", err, err)
	assert.EqualError(t, err, `Daytona syncOut refusing to follow a symlink loop under `+e.root+`/proj: "`+e.root+`/proj"`)
	assert.NoDirExists(t, back)
	assert.Empty(t, hostScratchLeft(t, host))
}
