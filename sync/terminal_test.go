package sync

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
)

// rawSender runs a hand-written (misbehaving) sender in the sandbox's
// terminal against the real host receiver.
func rawSender(t *testing.T, e *env, script string, limit int64, sink func([]byte) error) (int64, int, error) {
	t.Helper()
	if sink == nil {
		sink = func([]byte) error { return nil }
	}
	ts := &termStream{t: e.t, limit: limit, sink: sink, done: func(bool) {}, script: script, stopped: make(chan struct{})}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	return ts.run(ctx)
}

func b64(n int) string { return base64.StdEncoding.EncodeToString([]byte(strings.Repeat("z", n))) }

func TestTerminalRejectsSenderIgnoringFlowControl(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The sender floods 20 frames without reading a single ack while the
	// host's first write is held.
	script := "for i in $(seq 0 19); do printf 'D %d " + b64(100) + "\\n' $i; done; read -r x\n"
	first := true
	ts := &termStream{t: e.t, done: func(bool) {}, script: script, stopped: make(chan struct{})}
	ts.sink = func([]byte) error {
		if first {
			first = false
			<-ts.stopped // hold the first write until the host gives up
		}
		return nil
	}
	_, _, err := ts.run(t.Context())
	require.ErrorIs(t, err, ErrStream)
	assert.Contains(t, err.Error(), "exceeded 16 unacknowledged frames")
}

// TestTerminalRejectsMisbehavingSenders: the host receiver refuses a
// sender that breaks the framing, and one that sends more than the disk
// allocation.
func TestTerminalRejectsMisbehavingSenders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		name, script, want string
		limit              int64
	}{
		{"sequence gap", "printf 'D 0 " + b64(10) + "\\nD 2 " + b64(10) + "\\n'; read -r x; read -r x\n", "sequence gap", 0},
		{"byte count mismatch", "printf 'D 0 " + b64(100) + "\\n'; read -r x; printf 'E 1 99 0\\n'; read -r x\n", "end frame mismatch", 0},
		{"oversized frame", "printf 'D 0 " + b64(frameSize+3) + "\\n'; read -r x\n", "oversized data frame", 0},
		{"garbage", "printf 'hello\\n'; read -r x\n", "unexpected terminal output", 0},
		{"over the limit", termSender("", "head -c 200000 /dev/zero", ""), "exceeds the sandbox disk allocation", 100_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := rawSender(t, e, tc.script, tc.limit, nil)
			require.ErrorIs(t, err, ErrStream)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestTerminalDirectoryExportCappedByDiskAllocation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := filepath.Join(e.root, "w")
	require.NoError(t, os.MkdirAll(src, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "big"), randomBytes(t, 200<<10), 0o644))
	e.fillSandbox(t, 8<<10)
	e.t.DiskAllocation = 100 << 10 // the provider-reported allocation
	host := t.TempDir()
	_, err := e.syncOut(t, Options{HostReserve: -1}, dirMapping(src, filepath.Join(host, "w")))
	require.Error(t, err)
	assert.NoDirExists(t, filepath.Join(host, "w"))
	e.noScratchLeft(t, host)
}

// TestExportsKeepHostReserve: no outbound host write may leave less than
// the reserve free, on the disk-full terminal fallback as on the normal
// path; an earlier host file stays intact and nothing is left behind.
func TestExportsKeepHostReserve(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		terminal bool  // the sandbox disk is full, so the export streams
		size     int   // of the sandbox file w/a
		free     int64 // bytes free beyond the reserve
		kind     Kind  // the mapping: w/a as a file, w as a directory
		old      string
	}{
		{"terminal file", true, 200 << 10, 20 << 10, KindFile, "old host copy"},
		{"normal directory", false, 100 << 10, 10 << 10, KindDirectory, ""},
		{"normal file", false, 100 << 10, 10 << 10, KindFile, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			require.NoError(t, os.MkdirAll(filepath.Join(e.root, "w"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(e.root, "w", "a"), randomBytes(t, tc.size), 0o644))
			if tc.terminal {
				e.fillSandbox(t, 8<<10)
			}
			host := t.TempDir()
			m := fileMapping(e.root+"/w/a", filepath.Join(host, "a"))
			if tc.kind == KindDirectory {
				m = dirMapping(e.root+"/w", filepath.Join(host, "w"))
			}
			if tc.old != "" {
				writeFile(t, m.TargetPath, tc.old, 0o644)
			}
			o := Options{HostReserve: 1 << 30, HostFreeSpace: func(string) (int64, error) { return 1<<30 + tc.free, nil }}
			_, err := e.syncOut(t, o, m)
			require.ErrorIs(t, err, ErrHostSpace)
			switch {
			case tc.old != "":
				assert.Equal(t, tc.old, readFile(t, m.TargetPath), "earlier host file intact")
			case tc.kind == KindDirectory:
				assert.NoDirExists(t, m.TargetPath)
			default:
				assert.NoFileExists(t, m.TargetPath)
			}
			e.noScratchLeft(t, host)
		})
	}
}

func TestTerminalCleanupGivesUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.NoError(t, os.WriteFile(filepath.Join(e.root, "big"), randomBytes(t, 100<<10), 0o644))
	e.fillSandbox(t, 8<<10)
	hang := e.srv.Inject(daytonatest.Fault{Method: "DELETE", Route: "/process/pty/{sessionId}", Hang: true})
	host := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := SyncOut(ctx, e.t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: e.root + "/big", TargetPath: filepath.Join(host, "big"), Kind: KindFile}}}}, Options{HostReserve: -1, CleanupTimeout: 100 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, 1, hang.Hits(), "the kill hung and cleanup gave up")
	fi, err := os.Stat(filepath.Join(host, "big"))
	require.NoError(t, err)
	assert.EqualValues(t, 100<<10, fi.Size())
}

func TestTerminalDroppedMidStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "d1", "first.txt"), "first", 0o644)
	src := filepath.Join(e.root, "d2")
	require.NoError(t, os.MkdirAll(src, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "big"), randomBytes(t, 600<<10), 0o644))
	host := t.TempDir()
	_, err := e.syncOut(t, Options{}, dirMapping(e.root+"/d1", filepath.Join(host, "d1")))
	require.NoError(t, err)
	e.fillSandbox(t, 8<<10)
	e.srv.Inject(daytonatest.Fault{Route: "/process/pty/{sessionId}/connect", WSClose: true, WSCloseAfterBytes: 200 << 10})
	_, err = e.syncOut(t, Options{HostReserve: -1}, dirMapping(src, filepath.Join(host, "d2")))
	require.ErrorIs(t, err, ErrStream)
	assert.Equal(t, "first", readFile(t, filepath.Join(host, "d1", "first.txt")))
	assert.NoDirExists(t, filepath.Join(host, "d2"))
	e.noScratchLeft(t, host)
}

func TestTerminalStreamsEmptyAndExactFrameSizedFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, size := range []int{0, 1, 40959, 40960, 3 * 40959} {
		src := filepath.Join(e.root, fmt.Sprintf("f%d", size))
		data := randomBytes(t, size)
		require.NoError(t, os.WriteFile(src, data, 0o644))
		var got []byte
		n, rc, err := rawSender(t, e, fileStreamScript(e.root, src), 0, func(b []byte) error { got = append(got, b...); return nil })
		require.NoError(t, err, size)
		assert.Equal(t, 0, rc)
		assert.EqualValues(t, size, n)
		assert.Equal(t, len(data), len(got))
		assert.True(t, bytes.Equal(data, got), size)
	}
}

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
	res, err := e.syncOut(t, Options{HostReserve: -1}, dirMapping(src, dst))
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
		{SourcePath: e.root + "/result.bin", TargetPath: filepath.Join(host, "r", "result.bin"), Kind: KindFile, Mode: new(uint32(0o640))},
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
	e.noScratchLeft(t, host)
}

// TestDiskFullSingleFileExportKeepsATrailingHole: a streamed file whose
// last frames are all zeros is written with a hole there (seeks, not
// writes) and must still end at its full size. (Sample-8 bug 18: the size
// taken from the last frame alone, so the file was cut to one frame.)
func TestDiskFullSingleFileExportKeepsATrailingHole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	payload := append(randomBytes(t, 200<<10), make([]byte, 300<<10)...) // several frames of zeros last
	require.NoError(t, os.WriteFile(filepath.Join(e.root, "tail.bin"), payload, 0o644))
	e.fillSandbox(t, 16<<10)
	host := t.TempDir()
	res, err := SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{
		{SourcePath: e.root + "/tail.bin", TargetPath: filepath.Join(host, "tail.bin"), Kind: KindFile},
	}}}, Options{HostReserve: -1})
	require.NoError(t, err)
	assert.EqualValues(t, len(payload), res[0].BytesTransferred)
	got, err := os.ReadFile(filepath.Join(host, "tail.bin"))
	require.NoError(t, err)
	assert.Equal(t, len(payload), len(got), "the whole size")
	assert.True(t, bytes.Equal(payload, got), "the same bytes")
	assert.Equal(t, 1, e.srv.CountRequests("POST", "/process/pty"), "through the terminal")
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
