package sync

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// TestLargeFilesTravelDirect: files of directMinSize and more skip the
// archive (one write in the sandbox instead of two) and still arrive with
// their bytes, mode and modification time, beside the archived small files,
// with no scratch name left behind.
func TestLargeFilesTravelDirect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := filepath.Join(t.TempDir(), "src")
	big := make([]byte, directMinSize+12345)
	for i := range big {
		big[i] = byte(i * 7)
	}
	require.NoError(t, os.MkdirAll(filepath.Join(src, "deep", "er"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "deep", "er", "big.bin"), big, 0o640))
	require.NoError(t, os.WriteFile(filepath.Join(src, "big two.bin"), big[:directMinSize], 0o755))
	writeFile(t, filepath.Join(src, "small.txt"), "small", 0o644)
	stamp := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	require.NoError(t, os.Chtimes(filepath.Join(src, "deep", "er", "big.bin"), stamp, stamp))

	res, err := SyncIn(t.Context(), e.t, []Operation{{ID: "in", Files: []Mapping{{SourcePath: src, TargetPath: e.root + "/proj", Kind: KindDirectory}}}}, Options{})
	require.NoError(t, err)
	assert.EqualValues(t, 3, res[0].FilesTransferred)
	assert.GreaterOrEqual(t, res[0].BytesTransferred, int64(2*directMinSize+12345+5), "archive bytes plus the direct files")
	got, err := os.ReadFile(filepath.Join(e.root, "proj", "deep", "er", "big.bin"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(big, got), "large file bytes intact")
	assert.Equal(t, os.FileMode(0o640), permOf(t, filepath.Join(e.root, "proj", "deep", "er", "big.bin")))
	assert.Equal(t, os.FileMode(0o755), permOf(t, filepath.Join(e.root, "proj", "big two.bin")))
	fi, err := os.Stat(filepath.Join(e.root, "proj", "deep", "er", "big.bin"))
	require.NoError(t, err)
	assert.True(t, fi.ModTime().Equal(stamp), "mtime kept: %s", fi.ModTime())
	assert.Equal(t, "small", readFile(t, filepath.Join(e.root, "proj", "small.txt")))
	assert.Empty(t, e.scratchLeft(t))
}
