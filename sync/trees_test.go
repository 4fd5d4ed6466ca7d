package sync

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// snapshotTree records a tree as path -> description (type, mode, content
// or link target) for equality checks.
func snapshotTree(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "link " + l
		case fi.IsDir():
			out[rel] = fmt.Sprintf("dir %o", fi.Mode().Perm())
		default:
			b, _ := os.ReadFile(p)
			out[rel] = fmt.Sprintf("file %o %s", fi.Mode().Perm(), b)
		}
		return nil
	}))
	return out
}

// TestRoundTrip: a host tree synced into the sandbox and back out arrives
// unchanged both times (contents, modes, symlinks, empty directories),
// whatever its names or size, and no scratch name is left on either side.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		build func(t *testing.T, src string)
		files int64 // files transferred each way; 0 = not checked
		check func(t *testing.T, e *env, in, out []OperationResult, back string)
	}{
		{"directory", func(t *testing.T, src string) {
			writeFile(t, filepath.Join(src, "a.txt"), "alpha", 0o644)
			writeFile(t, filepath.Join(src, "secret"), "s3cret", 0o600)
			writeFile(t, filepath.Join(src, "nested", "data.txt"), "nested data", 0o644)
			require.NoError(t, os.MkdirAll(filepath.Join(src, "empty", "deeper"), 0o755))
			require.NoError(t, os.Symlink("nested/data.txt", filepath.Join(src, "shortcut")))
			require.NoError(t, os.MkdirAll(filepath.Join(src, ".claude", "skills"), 0o755))
			require.NoError(t, os.Symlink("../../nested", filepath.Join(src, ".claude", "skills", "demo")))
		}, 5, func(t *testing.T, e *env, in, out []OperationResult, back string) {
			assert.Positive(t, in[0].BytesTransferred)
			assert.Equal(t, "alpha", readFile(t, filepath.Join(e.root, "p", "a.txt")))
			assert.Equal(t, "alpha", readFile(t, filepath.Join(back, "a.txt")))
			assert.Equal(t, "s3cret", readFile(t, filepath.Join(back, "secret")))
			assert.Equal(t, os.FileMode(0o600), permOf(t, filepath.Join(back, "secret")))
			assert.Equal(t, "nested data", readFile(t, filepath.Join(back, "shortcut")))
			l, err := os.Readlink(filepath.Join(back, ".claude", "skills", "demo"))
			require.NoError(t, err)
			assert.Equal(t, "../../nested", l)
			fi, err := os.Stat(filepath.Join(back, "empty", "deeper"))
			require.NoError(t, err)
			assert.True(t, fi.IsDir())
		}},
		{"unicode, long names, modes and empty dirs", func(t *testing.T, src string) {
			long := strings.Repeat("long-name-", 25) // 250 bytes, the NAME_MAX edge
			deep := filepath.Join(src, strings.Repeat("d/", 40))
			writeFile(t, filepath.Join(src, "ünïcödé ✓", "日本語.txt"), "unicode", 0o644)
			writeFile(t, filepath.Join(src, long), "long", 0o600)
			writeFile(t, filepath.Join(deep, "leaf"), "deep", 0o640)
			writeFile(t, filepath.Join(src, "spaces and 'quotes' $(x)"), "shell", 0o755)
			writeFile(t, filepath.Join(src, "-leading-dash"), "dash", 0o644)
			writeFile(t, filepath.Join(src, "new\nline"), "newline", 0o644)
			require.NoError(t, os.MkdirAll(filepath.Join(src, "empty"), 0o700))
			require.NoError(t, os.Chmod(filepath.Join(src, "empty"), 0o700))
			require.NoError(t, os.Symlink("日本語.txt", filepath.Join(src, "ünïcödé ✓", "link")))
		}, 0, nil},
		{"10k small files", func(t *testing.T, src string) {
			for i := range 10_000 {
				writeFile(t, filepath.Join(src, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d.txt", i)), fmt.Sprintf("file %d", i), 0o644)
			}
		}, 10_000, func(t *testing.T, _ *env, _, _ []OperationResult, back string) {
			assert.Equal(t, "file 9999", readFile(t, filepath.Join(back, "d99", "f09999.txt")))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			host := t.TempDir()
			src := filepath.Join(host, "src")
			tc.build(t, src)
			before := snapshotTree(t, src)
			in, err := e.syncIn(t, Options{}, dirMapping(src, e.root+"/p"))
			require.NoError(t, err)
			require.Len(t, in, 1)
			assert.Equal(t, before, snapshotTree(t, filepath.Join(e.root, "p")), "sandbox copy")
			e.noScratchLeft(t)
			back := filepath.Join(host, "back")
			out, err := e.syncOut(t, Options{}, dirMapping(e.root+"/p", back))
			require.NoError(t, err)
			require.Len(t, out, 1)
			assert.Equal(t, before, snapshotTree(t, back), "host copy")
			if tc.files > 0 {
				assert.EqualValues(t, tc.files, in[0].FilesTransferred)
				assert.EqualValues(t, tc.files, out[0].FilesTransferred)
			}
			if tc.check != nil {
				tc.check(t, e, in, out, back)
			}
			e.noScratchLeft(t, host)
		})
	}
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

	res, err := e.syncIn(t, Options{}, dirMapping(src, e.root+"/proj"))
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

func TestSymlinksInAndOutOfTheTree(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := t.TempDir()
	writeFile(t, filepath.Join(host, "outside", "shared.txt"), "shared", 0o644)
	src := filepath.Join(host, "src")
	writeFile(t, filepath.Join(src, "in.txt"), "in", 0o644)
	require.NoError(t, os.Symlink("in.txt", filepath.Join(src, "inlink")))
	require.NoError(t, os.Symlink(filepath.Join(host, "outside", "shared.txt"), filepath.Join(src, "outlink")))
	require.NoError(t, os.Symlink(filepath.Join(host, "outside"), filepath.Join(src, "outdir")))
	require.NoError(t, os.Symlink("missing", filepath.Join(src, "dangling")))
	ctx := t.Context()

	// Without followSymlinks links travel as links.
	_, err := SyncIn(ctx, e.t, []Operation{{ID: "i", Files: []Mapping{{SourcePath: src, TargetPath: e.root + "/links", Kind: KindDirectory}}}}, Options{})
	require.NoError(t, err)
	l, err := os.Readlink(filepath.Join(e.root, "links", "outlink"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(host, "outside", "shared.txt"), l)

	// With followSymlinks (tar -h) they become bytes; dangling ones stay links.
	_, err = SyncIn(ctx, e.t, []Operation{{ID: "i", Files: []Mapping{{SourcePath: src, TargetPath: e.root + "/deref", Kind: KindDirectory, FollowSymlinks: true}}}}, Options{})
	require.NoError(t, err)
	assert.Equal(t, "shared", readFile(t, filepath.Join(e.root, "deref", "outlink")))
	assert.Equal(t, "shared", readFile(t, filepath.Join(e.root, "deref", "outdir", "shared.txt")))
	fi, err := os.Lstat(filepath.Join(e.root, "deref", "inlink"))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular())

	// Outbound: links out of the workspace are left out (and reported);
	// in-tree and dangling relative links travel as links.
	back := filepath.Join(host, "back")
	res, err := SyncOut(ctx, e.t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: e.root + "/links", TargetPath: back, Kind: KindDirectory}}}}, Options{})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{e.root + "/links/outlink", e.root + "/links/outdir"}, res[0].OmittedUnsafeLinks)
	assert.Equal(t, map[string]string{"in.txt": "file 644 in", "inlink": "link in.txt", "dangling": "link missing"}, snapshotTree(t, back))
	require.NoError(t, os.RemoveAll(back))
	require.NoError(t, os.Remove(filepath.Join(e.root, "links", "outlink")))
	require.NoError(t, os.Remove(filepath.Join(e.root, "links", "outdir")))
	require.NoError(t, os.Remove(filepath.Join(e.root, "links", "dangling")))
	_, err = SyncOut(ctx, e.t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: e.root + "/links", TargetPath: back, Kind: KindDirectory, FollowSymlinks: true}}}}, Options{})
	require.NoError(t, err)
	assert.Equal(t, "in", readFile(t, filepath.Join(back, "inlink")))
}

func TestExcludeGlobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := t.TempDir()
	src := filepath.Join(host, "src")
	for _, p := range []string{"keep.txt", "node_modules/x/y.js", "a/node_modules/z.js", "build/out.o", "._resource", "logs/app.log", "src/app.log"} {
		writeFile(t, filepath.Join(src, p), p, 0o644)
	}
	ex := []string{"node_modules", "*.log", "build"}
	_, err := SyncIn(t.Context(), e.t, []Operation{{ID: "i", Files: []Mapping{{SourcePath: src, TargetPath: e.root + "/x", Kind: KindDirectory, Exclude: ex}}}}, Options{})
	require.NoError(t, err)
	got := snapshotTree(t, filepath.Join(e.root, "x"))
	assert.Equal(t, map[string]string{"keep.txt": "file 644 keep.txt", "a": "dir 755", "logs": "dir 755", "src": "dir 755"}, got)

	// A directory written with its trailing slash, or from "./", is the
	// same exclude. (Sample-8 bug 19: the slash kept, so "node_modules/"
	// matched nothing and the tree was uploaded.)
	ex2 := []string{"node_modules/", "*.log", "./build/"}
	_, err = SyncIn(t.Context(), e.t, []Operation{{ID: "i", Files: []Mapping{{SourcePath: src, TargetPath: e.root + "/x2", Kind: KindDirectory, Exclude: ex2}}}}, Options{})
	require.NoError(t, err)
	assert.Equal(t, got, snapshotTree(t, filepath.Join(e.root, "x2")))

	// Outbound excludes go to the sandbox's tar.
	for _, p := range []string{"node_modules/m.js", "deep/cache.log", "ok.txt"} {
		writeFile(t, filepath.Join(e.root, "y", p), p, 0o644)
	}
	back := filepath.Join(host, "back")
	_, err = SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: e.root + "/y", TargetPath: back, Kind: KindDirectory, Exclude: ex}}}}, Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"ok.txt": "file 644 ok.txt", "deep": "dir 755"}, snapshotTree(t, back))
}

func TestSyncOutMergesIntoExistingHostDirectory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := t.TempDir()
	dst := filepath.Join(host, "proj")
	writeFile(t, filepath.Join(dst, "host-only.txt"), "host", 0o644)
	writeFile(t, filepath.Join(dst, "shared.txt"), "old", 0o644)
	writeFile(t, filepath.Join(dst, "becomes-file", "x"), "old dir", 0o644)
	writeFile(t, filepath.Join(dst, "becomes-dir"), "old file", 0o644)
	require.NoError(t, os.Symlink("host-only.txt", filepath.Join(dst, "link-becomes-dir")))
	writeFile(t, filepath.Join(e.root, "w", "becomes-dir", "y"), "now in a dir", 0o644)
	writeFile(t, filepath.Join(e.root, "w", "link-becomes-dir", "z"), "a dir, not a link", 0o644)
	writeFile(t, filepath.Join(e.root, "w", "shared.txt"), "new", 0o644)
	writeFile(t, filepath.Join(e.root, "w", "becomes-file"), "now a file", 0o644)
	writeFile(t, filepath.Join(e.root, "w", "sub", "n.txt"), "n", 0o644)
	_, err := e.syncOut(t, Options{}, dirMapping(e.root+"/w", dst))
	require.NoError(t, err)
	assert.Equal(t, "host", readFile(t, filepath.Join(dst, "host-only.txt")))
	assert.Equal(t, "new", readFile(t, filepath.Join(dst, "shared.txt")))
	assert.Equal(t, "now a file", readFile(t, filepath.Join(dst, "becomes-file")))
	assert.Equal(t, "now in a dir", readFile(t, filepath.Join(dst, "becomes-dir", "y")), "a file the sandbox made a directory is replaced")
	assert.Equal(t, "a dir, not a link", readFile(t, filepath.Join(dst, "link-becomes-dir", "z")))
	fi, err := os.Lstat(filepath.Join(dst, "link-becomes-dir"))
	require.NoError(t, err)
	assert.True(t, fi.IsDir(), "the host link was replaced by the directory, not followed")
	assert.Equal(t, "n", readFile(t, filepath.Join(dst, "sub", "n.txt")))
	assert.Empty(t, hostScratchLeft(t, host))
}

func TestDroppedConnectionsLeaveEarlierFilesAndNoScratch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := t.TempDir()
	writeFile(t, filepath.Join(host, "in1", "a.txt"), "a", 0o644)
	writeFile(t, filepath.Join(host, "in2", "b.txt"), "b", 0o644)
	writeFile(t, filepath.Join(host, "f.txt"), "f", 0o644)

	// Inbound: the second operation's upload is dropped.
	e.srv.Inject(daytonatest.Fault{Route: "/files/bulk-upload", Drop: true, Skip: 1, Times: 1})
	res, err := SyncIn(t.Context(), e.t, []Operation{
		{ID: "1", Files: []Mapping{{SourcePath: filepath.Join(host, "in1"), TargetPath: e.root + "/in1", Kind: KindDirectory}}},
		{ID: "2", Files: []Mapping{{SourcePath: filepath.Join(host, "in2"), TargetPath: e.root + "/in2", Kind: KindDirectory}}},
	}, Options{})
	require.ErrorIs(t, err, ErrTransfer)
	assert.Len(t, res, 1, "the first operation completed")
	assert.Equal(t, "a", readFile(t, filepath.Join(e.root, "in1", "a.txt")))
	assert.NoDirExists(t, filepath.Join(e.root, "in2"))
	assert.Empty(t, e.scratchLeft(t))

	e.srv.Inject(daytonatest.Fault{Route: "/files/bulk-upload", Drop: true, Times: 1})
	_, err = e.syncIn(t, Options{}, fileMapping(filepath.Join(host, "f.txt"), e.root+"/f.txt"))
	require.ErrorIs(t, err, ErrTransfer)
	assert.Empty(t, e.scratchLeft(t))

	// Outbound: earlier host files stay, the dropped directory never appears.
	writeFile(t, filepath.Join(e.root, "out1", "x.txt"), "x", 0o644)
	writeFile(t, filepath.Join(e.root, "out2", "y.txt"), "y", 0o644)
	writeFile(t, filepath.Join(e.root, "z.txt"), "z", 0o644)
	// Every later download is dropped (a single drop of a GET is retried by the transport).
	e.srv.Inject(daytonatest.Fault{Route: "/files/download", Drop: true, Skip: 1})
	_, err = SyncOut(t.Context(), e.t, []Operation{
		{ID: "1", Files: []Mapping{{SourcePath: e.root + "/out1", TargetPath: filepath.Join(host, "out1"), Kind: KindDirectory}}},
		{ID: "2", Files: []Mapping{{SourcePath: e.root + "/out2", TargetPath: filepath.Join(host, "out2"), Kind: KindDirectory}}},
	}, Options{})
	require.Error(t, err)
	assert.Equal(t, "x", readFile(t, filepath.Join(host, "out1", "x.txt")))
	assert.NoDirExists(t, filepath.Join(host, "out2"))
	writeFile(t, filepath.Join(host, "z.txt"), "old z", 0o644)
	e.srv.Inject(daytonatest.Fault{Route: "/files/bulk-download", Drop: true, Times: 1})
	_, err = e.syncOut(t, Options{}, fileMapping(e.root+"/z.txt", filepath.Join(host, "z.txt")))
	require.ErrorIs(t, err, ErrTransfer)
	assert.Equal(t, "old z", readFile(t, filepath.Join(host, "z.txt")))
	e.noScratchLeft(t, host)
}

// TestSparse2GiBFileRoundTrip moves a 2 GiB file with one data block at
// each end; on the host it stays sparse.
func TestSparse2GiBFileRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 2 GiB through the emulator; skipped with -short")
	}
	if raceEnabled && os.Getenv("SYNC_SPARSE_RACE") == "" {
		t.Skip("~80 s under -race; run without -race (or set SYNC_SPARSE_RACE=1)")
	}
	t.Parallel()
	// Room for the file and its guarded snapshot, so the normal path runs.
	e := newEnv(t, daytonatest.WithDiskBytes(8<<30))
	host := t.TempDir()
	src := filepath.Join(host, "sparse.img")
	const size = 2 << 30
	f, err := os.Create(src)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("head"), 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("tail"), size-4)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	ctx := t.Context()
	res, err := SyncIn(ctx, e.t, []Operation{{ID: "i", Files: []Mapping{{SourcePath: src, TargetPath: e.root + "/sparse.img", Kind: KindFile}}}}, Options{})
	require.NoError(t, err)
	assert.EqualValues(t, size, res[0].BytesTransferred)
	back := filepath.Join(host, "back.img")
	res, err = SyncOut(ctx, e.t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: e.root + "/sparse.img", TargetPath: back, Kind: KindFile}}}}, Options{})
	require.NoError(t, err)
	assert.EqualValues(t, size, res[0].BytesTransferred)
	fi, err := os.Stat(back)
	require.NoError(t, err)
	assert.EqualValues(t, size, fi.Size())
	st := fi.Sys().(*syscall.Stat_t)
	assert.Less(t, st.Blocks*512, int64(1<<20), "the host copy is sparse")
	g, err := os.Open(back)
	require.NoError(t, err)
	defer g.Close()
	buf := make([]byte, 4)
	_, err = g.ReadAt(buf, 0)
	require.NoError(t, err)
	assert.Equal(t, "head", string(buf))
	_, err = g.ReadAt(buf, size-4)
	require.NoError(t, err)
	assert.Equal(t, "tail", string(buf))
	require.NoError(t, os.Remove(filepath.Join(e.root, "sparse.img")))
}

// TestSyncInReadOnlyDirectoryResyncs: a directory mapping whose mode has no
// write bits (and a host tree with a read-only subdirectory and a file
// large enough to travel outside the archive otherwise) syncs twice as a
// non-root sandbox user: the second, unchanged sync recognises the target
// as identical and leaves it alone instead of failing to write into it. A
// changed tree is never skipped silently.
func TestSyncInReadOnlyDirectoryResyncs(t *testing.T) {
	// A read-only directory does not refuse root's writes: the sandbox
	// user must not be root, or this test could not tell the
	// compare-and-skip step from a plain extraction. Daytona's layout
	// gives it uid 1000; without a namespace the test reruns as a
	// non-root user.
	e := newEnv(t, daytonatest.WithIsolation(daytonatest.IsolationAuto))
	if ok, _ := e.srv.Isolated(); !ok && testenv.RunAsNonRoot(t) {
		return
	}
	host := t.TempDir()
	writeFile(t, filepath.Join(host, "a.txt"), "a", 0o644)
	writeFile(t, filepath.Join(host, "sub", "g.txt"), "g", 0o644)
	writeFile(t, filepath.Join(host, "big.bin"), strings.Repeat("b", directMinSize+1), 0o644)
	require.NoError(t, os.Chmod(filepath.Join(host, "sub"), 0o555))
	target, hostTarget := e.root+"/ro", e.hostRoot+"/ro"
	// Runs before the emulator and TempDir removals: make both trees
	// removable again.
	t.Cleanup(func() {
		for _, dir := range []string{host, hostTarget} {
			_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					_ = os.Chmod(p, 0o755)
				}
				return nil
			})
		}
	})
	m := Mapping{SourcePath: host, TargetPath: target, Kind: KindDirectory, Mode: new(uint32(0o555))}
	// The first sync sends the tree; the second, a delta sync, finds
	// nothing changed and sends nothing; the third, with the delta sync
	// off, goes through the compare-and-skip step.
	for i, o := range []Options{{}, {}, {Delta: DeltaOff}} {
		res, err := e.syncIn(t, o, m)
		require.NoError(t, err, "sync %d", i+1)
		require.Len(t, res, 1)
		require.Len(t, res[0].Directories, 1)
		if i == 1 {
			assert.EqualValues(t, 0, res[0].FilesTransferred, "sync %d", i+1)
			assert.Equal(t, WayDelta, res[0].Directories[0].Way)
		} else {
			assert.EqualValues(t, 3, res[0].FilesTransferred, "sync %d", i+1)
			assert.Equal(t, WayFull, res[0].Directories[0].Way)
		}
		fi, err := os.Stat(hostTarget)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o555), fi.Mode().Perm(), "sync %d", i+1)
		assert.Equal(t, "g", readFile(t, filepath.Join(hostTarget, "sub", "g.txt")))
		assert.Equal(t, directMinSize+1, len(readFile(t, filepath.Join(hostTarget, "big.bin"))))
	}
	e.noScratchLeft(t, host)

	// A changed file is not "identical": the sync fails loudly (the
	// read-only target refuses the sandbox user's extraction), on the
	// delta path as on the full one.
	writeFile(t, filepath.Join(host, "a.txt"), "changed", 0o644)
	for _, o := range []Options{{Delta: DeltaOff}, {}} {
		_, err := e.syncIn(t, o, m)
		var se *SandboxCommandError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, 43, se.Exit)
		assert.Contains(t, err.Error(), "Daytona syncIn extract command failed (exit 43)")
		assert.Contains(t, err.Error(), "tar: a.txt: Cannot open")
		assert.Equal(t, "a", readFile(t, filepath.Join(hostTarget, "a.txt")))
	}
	e.noScratchLeft(t, host)
}

// TestSyncInMappingMadeWritableOpensTheTarget: a target an earlier
// read-only mapping locked is opened again once the operator makes the
// mapping writable, by a full sync and by a delta sync alike, as a
// non-root sandbox user. The full sync used to extract before it applied
// the new mode and so stayed locked out for good (the equivalence test
// found it, seed 1796588639690674258).
func TestSyncInMappingMadeWritableOpensTheTarget(t *testing.T) {
	e := newEnv(t, daytonatest.WithIsolation(daytonatest.IsolationAuto))
	if ok, _ := e.srv.Isolated(); !ok && testenv.RunAsNonRoot(t) {
		return
	}
	for _, o := range []Options{{Delta: DeltaOff}, {}} {
		host := t.TempDir()
		writeFile(t, filepath.Join(host, "a.txt"), "a", 0o644)
		writeFile(t, filepath.Join(host, "b.txt"), "b", 0o644)
		name := "full"
		if o.Delta != DeltaOff {
			name = "delta"
		}
		target, hostTarget := e.root+"/"+name, e.hostRoot+"/"+name
		t.Cleanup(func() { _ = os.Chmod(hostTarget, 0o755) })
		m := Mapping{SourcePath: host, TargetPath: target, Kind: KindDirectory, Mode: new(uint32(0o555))}
		_, err := e.syncIn(t, o, m)
		require.NoError(t, err, "%s: the read-only sync", name)

		m.Mode = new(uint32(0o700))
		writeFile(t, filepath.Join(host, "a.txt"), "changed", 0o644)
		_, err = e.syncIn(t, o, m)
		require.NoError(t, err, "%s: the sync that makes the mapping writable", name)
		fi, err := os.Stat(hostTarget)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), name)
		assert.Equal(t, "changed", readFile(t, filepath.Join(hostTarget, "a.txt")), name)
		assert.Equal(t, "b", readFile(t, filepath.Join(hostTarget, "b.txt")), name)
		e.noScratchLeft(t, host)
	}
}

// A directory syncOut into a host target that does not exist yet makes it
// 0755, or the mapping's mode when it has one, whatever mode the sandbox
// directory has. (Sample-5 bug 22: the default became 0700.)
func TestSyncOutNewHostTargetMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := filepath.Join(e.root, "modes")
	writeFile(t, filepath.Join(src, "a.txt"), "a", 0o644)
	require.NoError(t, os.Chmod(src, 0o711))
	host := t.TempDir()
	for _, c := range []struct {
		mode *uint32
		want fs.FileMode
	}{{nil, 0o755}, {new(uint32(0o750)), 0o750}} {
		for _, o := range []Options{{Delta: DeltaOff}, {}} {
			dst := filepath.Join(host, fmt.Sprintf("out-%o-%s", c.want, o.Delta))
			m := dirMapping(e.root+"/modes", dst)
			m.Mode = c.mode
			_, err := e.syncOut(t, o, m)
			require.NoError(t, err)
			fi, err := os.Stat(dst)
			require.NoError(t, err)
			assert.Equal(t, c.want, fi.Mode().Perm(), dst)
			assert.Equal(t, "a", readFile(t, filepath.Join(dst, "a.txt")))
		}
	}
}

// Files that end in zeros (or are nothing but zeros) arrive whole: the host
// writer seeks over all-zero blocks, so a file whose last block is one must
// still be cut to its length (sample-4 bug 19 left them short), through a
// file mapping and through a directory export alike.
func TestZeroTailedFilesArriveWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const block = 64 << 10 // the host writer's buffer
	files := map[string][]byte{
		"zeros.bin":      make([]byte, 3*block+5),
		"tail-block.bin": append([]byte("data"), make([]byte, 2*block)...),
		"exact.bin":      make([]byte, block),
		"head-zeros.bin": append(make([]byte, block), []byte("data")...),
	}
	require.NoError(t, os.MkdirAll(filepath.Join(e.root, "z"), 0o755))
	for name, b := range files {
		require.NoError(t, os.WriteFile(filepath.Join(e.root, "z", name), b, 0o644))
	}
	host := t.TempDir()
	var ms []Mapping
	for name := range files {
		ms = append(ms, Mapping{SourcePath: e.root + "/z/" + name, TargetPath: filepath.Join(host, "files", name), Kind: KindFile})
	}
	ms = append(ms, Mapping{SourcePath: e.root + "/z", TargetPath: filepath.Join(host, "dir"), Kind: KindDirectory})
	_, err := e.syncOut(t, Options{}, ms...)
	require.NoError(t, err)
	for name, want := range files {
		for _, p := range []string{filepath.Join(host, "files", name), filepath.Join(host, "dir", name)} {
			got, err := os.ReadFile(p)
			require.NoError(t, err)
			require.Equal(t, len(want), len(got), "%s: length", p)
			require.True(t, bytes.Equal(want, got), "%s: content", p)
		}
	}
}

// followSymlinks refuses a link back into its own ancestors (a loop) but
// not one to a directory it has already walked beside it: a link to a
// sibling directory is packed as a second copy. (Sample-6 bug 19: the
// walked directory left on the loop stack.)
func TestFollowSymlinksPacksALinkToAWalkedSibling(t *testing.T) {
	e := newEnv(t)
	src := filepath.Join(t.TempDir(), "src")
	require.NoError(t, os.MkdirAll(filepath.Join(src, "a"), 0o755))
	writeFile(t, filepath.Join(src, "a", "f.txt"), "A", 0o644)
	require.NoError(t, os.Symlink("a", filepath.Join(src, "b"))) // walked after a
	m := Mapping{SourcePath: src, TargetPath: e.root + "/sib", Kind: KindDirectory, FollowSymlinks: true}
	_, err := e.syncIn(t, Options{}, m)
	require.NoError(t, err)
	assert.Equal(t, "A", readFile(t, filepath.Join(e.root, "sib", "a", "f.txt")))
	assert.Equal(t, "A", readFile(t, filepath.Join(e.root, "sib", "b", "f.txt")))

	require.NoError(t, os.Symlink("..", filepath.Join(src, "a", "up"))) // a real loop
	m.TargetPath = e.root + "/loop"
	_, err = e.syncIn(t, Options{}, m)
	require.ErrorIs(t, err, ErrInvalidOperation)
	require.ErrorContains(t, err, "symlink loop")
}
