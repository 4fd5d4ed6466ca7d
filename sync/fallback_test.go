package sync

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fillSandbox leaves only `room` bytes of the sandbox's disk allocation.
func (e *env) fillSandbox(t testing.TB, room int64) {
	t.Helper()
	used, err := e.srv.DiskUsage(e.sb.ID)
	require.NoError(t, err)
	require.NoError(t, e.srv.SetDiskAllocation(e.sb.ID, used+room))
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

func TestDiskFullDirectoryExportStreamsThroughTerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := filepath.Join(e.root, "work")
	big := randomBytes(t, 900<<10) // > 16 frames, so flow control is exercised
	require.NoError(t, os.MkdirAll(filepath.Join(src, "sub", "empty"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "sub", "big.bin"), big, 0o640))
	writeFile(t, filepath.Join(src, "small.txt"), "small", 0o600)
	require.NoError(t, os.Symlink("sub/big.bin", filepath.Join(src, "link")))
	e.fillSandbox(t, 64<<10)

	host := t.TempDir()
	dst := filepath.Join(host, "out")
	res, err := SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: src, TargetPath: dst, Kind: KindDirectory}}}}, Options{HostReserve: -1})
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.EqualValues(t, 3, res[0].FilesTransferred)
	got, err := os.ReadFile(filepath.Join(dst, "sub", "big.bin"))
	require.NoError(t, err)
	assert.Equal(t, big, got)
	assert.Equal(t, os.FileMode(0o640), permOf(t, filepath.Join(dst, "sub", "big.bin")))
	assert.Equal(t, "small", readFile(t, filepath.Join(dst, "small.txt")))
	assert.DirExists(t, filepath.Join(dst, "sub", "empty"))
	assert.Empty(t, e.scratchLeft(t), "no archive left in the sandbox")
	assert.NoFileExists(t, filepath.Join(e.info.HomeDir, ".bash_history"), "no command log left in the sandbox")
	src2, err := os.ReadFile(filepath.Join(src, "sub", "big.bin"))
	require.NoError(t, err)
	assert.Equal(t, big, src2, "source preserved")
	assert.Empty(t, hostScratchLeft(t, host))
	assert.Positive(t, e.srv.CountRequests("POST", "/process/pty"))
}

func TestDiskFullSingleFileExportStreamsThroughTerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	payload := randomBytes(t, 300<<10)
	require.NoError(t, os.WriteFile(filepath.Join(e.root, "result.bin"), payload, 0o644))
	writeFile(t, filepath.Join(e.root, "notes.txt"), "notes", 0o644)
	e.fillSandbox(t, 16<<10)

	host := t.TempDir()
	res, err := SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{
		{SourcePath: e.root + "/notes.txt", TargetPath: filepath.Join(host, "notes.txt"), Kind: KindFile},
		{SourcePath: e.root + "/result.bin", TargetPath: filepath.Join(host, "r", "result.bin"), Kind: KindFile, Mode: mode(0o640)},
	}}}, Options{HostReserve: -1})
	require.NoError(t, err)
	assert.EqualValues(t, 2, res[0].FilesTransferred)
	assert.EqualValues(t, len(payload)+5, res[0].BytesTransferred)
	got, err := os.ReadFile(filepath.Join(host, "r", "result.bin"))
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	assert.Equal(t, os.FileMode(0o640), permOf(t, filepath.Join(host, "r", "result.bin")))
	assert.Equal(t, "notes", readFile(t, filepath.Join(host, "notes.txt")))
	assert.Equal(t, 2, e.srv.CountRequests("POST", "/process/pty"), "one terminal per streamed file")
	assert.Empty(t, e.scratchLeft(t))
	assert.Empty(t, hostScratchLeft(t, host))
}

// TestSingleFileFallbackRechecksIdentity: the source is replaced (new
// inode) while it streams; the sender reports 46 and the host refuses.
func TestSingleFileFallbackRechecksIdentity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := filepath.Join(e.root, "big")
	require.NoError(t, os.WriteFile(src, randomBytes(t, 1<<20), 0o644)) // > 17 frames
	first := true
	ts := &termStream{t: e.t, done: func(bool) {}, script: fileStreamScript(e.root, src)}
	ts.sink = func([]byte) error {
		if first {
			// The sender cannot finish before this first ack.
			first = false
			require.NoError(t, os.WriteFile(src+".new", []byte("swapped"), 0o644))
			require.NoError(t, os.Rename(src+".new", src))
		}
		return nil
	}
	_, rc, err := ts.run(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 46, rc)
}

// TestSingleFileFallbackRefusesEscape: the guarded copy fails for space and
// the stream re-checks confinement itself: a source that resolves outside
// the root is refused by both.
func TestSingleFileFallbackRefusesEscape(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ts := &termStream{t: e.t, done: func(bool) {}, sink: func([]byte) error { return nil }}
	outside := filepath.Join(e.info.Root, "secret")
	require.NoError(t, os.WriteFile(outside, []byte("secret"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(e.root, "link")))
	ts.script = fileStreamScript(e.root, e.root+"/link")
	n, rc, err := ts.run(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 42, rc)
	assert.Zero(t, n)
}
