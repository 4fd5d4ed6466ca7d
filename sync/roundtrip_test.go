package sync

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRoundTripDirectory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := t.TempDir()
	src := filepath.Join(host, "src")
	writeFile(t, filepath.Join(src, "a.txt"), "alpha", 0o644)
	writeFile(t, filepath.Join(src, "secret"), "s3cret", 0o600)
	writeFile(t, filepath.Join(src, "nested", "data.txt"), "nested data", 0o644)
	require.NoError(t, os.MkdirAll(filepath.Join(src, "empty", "deeper"), 0o755))
	require.NoError(t, os.Symlink("nested/data.txt", filepath.Join(src, "shortcut")))
	require.NoError(t, os.MkdirAll(filepath.Join(src, ".claude", "skills"), 0o755))
	require.NoError(t, os.Symlink("../../nested", filepath.Join(src, ".claude", "skills", "demo")))

	ctx := t.Context()
	in, err := SyncIn(ctx, e.t, []Operation{{ID: "in", Files: []Mapping{{SourcePath: src, TargetPath: e.root + "/proj", Kind: KindDirectory}}}}, Options{})
	require.NoError(t, err)
	require.Len(t, in, 1)
	assert.EqualValues(t, 5, in[0].FilesTransferred)
	assert.Positive(t, in[0].BytesTransferred)
	assert.Equal(t, "alpha", readFile(t, filepath.Join(e.root, "proj", "a.txt")))
	assert.Empty(t, e.scratchLeft(t))

	dst := filepath.Join(host, "back")
	out, err := SyncOut(ctx, e.t, []Operation{{ID: "out", Files: []Mapping{{SourcePath: e.root + "/proj", TargetPath: dst, Kind: KindDirectory}}}}, Options{})
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.EqualValues(t, 5, out[0].FilesTransferred)
	assert.Equal(t, "alpha", readFile(t, filepath.Join(dst, "a.txt")))
	assert.Equal(t, "s3cret", readFile(t, filepath.Join(dst, "secret")))
	assert.Equal(t, os.FileMode(0o600), permOf(t, filepath.Join(dst, "secret")))
	assert.Equal(t, "nested data", readFile(t, filepath.Join(dst, "shortcut")))
	l, err := os.Readlink(filepath.Join(dst, ".claude", "skills", "demo"))
	require.NoError(t, err)
	assert.Equal(t, "../../nested", l)
	fi, err := os.Stat(filepath.Join(dst, "empty", "deeper"))
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	assert.Empty(t, e.scratchLeft(t))
	assert.Empty(t, hostScratchLeft(t, host))
}
