package sync

import (
	"bytes"
	"context"
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

func TestTerminalRejectsSequenceGap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, _, err := rawSender(t, e, "printf 'D 0 "+b64(10)+"\\nD 2 "+b64(10)+"\\n'; read -r x; read -r x\n", 0, nil)
	require.ErrorIs(t, err, ErrStream)
	assert.Contains(t, err.Error(), "sequence gap")
}

func TestTerminalRejectsByteCountMismatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, _, err := rawSender(t, e, "printf 'D 0 "+b64(100)+"\\n'; read -r x; printf 'E 1 99 0\\n'; read -r x\n", 0, nil)
	require.ErrorIs(t, err, ErrStream)
	assert.Contains(t, err.Error(), "end frame mismatch")
}

func TestTerminalRejectsOversizedFrameAndGarbage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, _, err := rawSender(t, e, "printf 'D 0 "+b64(frameSize+3)+"\\n'; read -r x\n", 0, nil)
	require.ErrorIs(t, err, ErrStream)
	_, _, err = rawSender(t, e, "printf 'hello\\n'; read -r x\n", 0, nil)
	require.ErrorIs(t, err, ErrStream)
	assert.Contains(t, err.Error(), "unexpected terminal output")
}

func TestTerminalStreamCapsAtLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, _, err := rawSender(t, e, termSender("", "head -c 200000 /dev/zero", ""), 100_000, nil)
	require.ErrorIs(t, err, ErrStream)
	assert.Contains(t, err.Error(), "exceeds the sandbox disk allocation")
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
	_, err := SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: src, TargetPath: filepath.Join(host, "w"), Kind: KindDirectory}}}}, Options{HostReserve: -1})
	require.Error(t, err)
	assert.NoDirExists(t, filepath.Join(host, "w"))
	assert.Empty(t, hostScratchLeft(t, host))
	assert.Empty(t, e.scratchLeft(t))
}

func TestTerminalKeepsHostReserve(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.NoError(t, os.WriteFile(filepath.Join(e.root, "big"), randomBytes(t, 200<<10), 0o644))
	e.fillSandbox(t, 8<<10)
	host := t.TempDir()
	writeFile(t, filepath.Join(host, "big"), "old host copy", 0o644)
	o := Options{HostReserve: 1 << 30, HostFreeSpace: func(string) (int64, error) { return 1<<30 + 20<<10, nil }}
	_, err := SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: e.root + "/big", TargetPath: filepath.Join(host, "big"), Kind: KindFile}}}}, o)
	require.ErrorIs(t, err, ErrHostSpace)
	assert.Equal(t, "old host copy", readFile(t, filepath.Join(host, "big")), "earlier host file intact")
	assert.Empty(t, hostScratchLeft(t, host))
	assert.Empty(t, e.scratchLeft(t))
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
	_, err := SyncOut(t.Context(), e.t, []Operation{{ID: "a", Files: []Mapping{{SourcePath: e.root + "/d1", TargetPath: filepath.Join(host, "d1"), Kind: KindDirectory}}}}, Options{})
	require.NoError(t, err)
	e.fillSandbox(t, 8<<10)
	e.srv.Inject(daytonatest.Fault{Route: "/process/pty/{sessionId}/connect", WSClose: true, WSCloseAfterBytes: 200 << 10})
	_, err = SyncOut(t.Context(), e.t, []Operation{{ID: "b", Files: []Mapping{{SourcePath: src, TargetPath: filepath.Join(host, "d2"), Kind: KindDirectory}}}}, Options{HostReserve: -1})
	require.ErrorIs(t, err, ErrStream)
	assert.Equal(t, "first", readFile(t, filepath.Join(host, "d1", "first.txt")))
	assert.NoDirExists(t, filepath.Join(host, "d2"))
	assert.Empty(t, hostScratchLeft(t, host))
	assert.Empty(t, e.scratchLeft(t))
}

func TestNormalExportKeepsHostReserveToo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "w", "a"), strings.Repeat("a", 100<<10), 0o644)
	host := t.TempDir()
	o := Options{HostReserve: 1 << 30, HostFreeSpace: func(string) (int64, error) { return 1<<30 + 10<<10, nil }}
	_, err := SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: e.root + "/w", TargetPath: filepath.Join(host, "w"), Kind: KindDirectory}}}}, o)
	require.ErrorIs(t, err, ErrHostSpace)
	_, err = SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: e.root + "/w/a", TargetPath: filepath.Join(host, "a"), Kind: KindFile}}}}, o)
	require.ErrorIs(t, err, ErrHostSpace)
	assert.NoDirExists(t, filepath.Join(host, "w"))
	assert.NoFileExists(t, filepath.Join(host, "a"))
	assert.Empty(t, hostScratchLeft(t, host))
	assert.Empty(t, e.scratchLeft(t))
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
