package sync

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hashLog is a sandbox PATH whose sha256sum notes every file it is asked
// to hash (names starting with ./) in the returned log, then hashes.
func hashLog(t *testing.T) (*env, func() []string) {
	t.Helper()
	real, err := lookPath("sha256sum")
	require.NoError(t, err)
	bin := t.TempDir()
	log := filepath.Join(bin, "log")
	writeFile(t, filepath.Join(bin, "sha256sum"), "#!/bin/sh\nfor a; do case $a in ./*) printf '%s\\0' \"$a\" >>"+log+";; esac; done\nexec "+real+" \"$@\"\n", 0o755)
	e := newEnvWith(t, map[string]string{"PATH": bin + ":" + os.Getenv("PATH")})
	return e, func() []string {
		b, err := os.ReadFile(log)
		if os.IsNotExist(err) {
			return nil
		}
		require.NoError(t, err)
		require.NoError(t, os.Remove(log))
		return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	}
}

// sandboxHome is the sandbox user's home directory.
func sandboxHome(t *testing.T, e *env) string {
	t.Helper()
	code, out, _, err := e.runCommand(t.Context(), `printf %s "$HOME"`, e.root, time.Minute)
	require.NoError(t, err)
	require.Zero(t, code)
	return out
}

// TestDeltaRecordHashesOnlyWhatChanged: the sandbox's record spares
// reading unchanged files; a file changed with its size and mtime kept is
// still read (its ctime moved) and sent; files whose ctime is too recent
// are never recorded; the record lives outside the sync root.
func TestDeltaRecordHashesOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	e, hashed := hashLog(t)
	host := deltaTree(t)
	target, hostTarget := e.root+"/t", e.hostRoot+"/t"
	m := dirMapping(host, target)
	settled := Options{settle: -time.Hour} // every ctime counts as settled
	_, err := e.syncIn(t, settled, m)
	require.NoError(t, err)
	assert.Empty(t, hashed(), "a first sync lists nothing")

	_, err = e.syncIn(t, settled, m)
	require.NoError(t, err)
	assert.Len(t, hashed(), 6, "no record yet: every file is read")
	res, err := e.syncIn(t, settled, m)
	require.NoError(t, err)
	assert.Empty(t, hashed(), "the record holds every file")
	assert.EqualValues(t, 0, res[0].FilesTransferred)

	// Same size, same mtime, other content in the sandbox.
	p := filepath.Join(hostTarget, "sub", "e.txt")
	fi, err := os.Stat(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, bytes.Repeat([]byte("Z"), 100), 0o644))
	require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
	res, err = e.syncIn(t, settled, m)
	require.NoError(t, err)
	assert.Equal(t, []string{"./sub/e.txt"}, hashed())
	assert.EqualValues(t, 1, res[0].FilesTransferred)
	assert.Equal(t, strings.Repeat("e", 100), readFile(t, p))

	recs, err := filepath.Glob(filepath.Join(e.info.HostPath(sandboxHome(t, e)), ".cache", "paperclip-delta", "*"))
	require.NoError(t, err)
	assert.Len(t, recs, 1, "one record, outside the root")

	// Files whose ctime is within the settling time (here an hour, so
	// that the test does not depend on how fast the machine runs it) are
	// read on every listing and never recorded: a second write in the
	// same clock tick would not move their ctime.
	recent := Options{settle: time.Hour}
	_, err = e.syncIn(t, recent, m)
	require.NoError(t, err)
	assert.Len(t, hashed(), 6)
	_, err = e.syncIn(t, recent, m)
	require.NoError(t, err)
	assert.Len(t, hashed(), 6)
	recs, err = filepath.Glob(filepath.Join(e.info.HostPath(sandboxHome(t, e)), ".cache", "paperclip-delta", "*"))
	require.NoError(t, err)
	assert.Empty(t, recs, "a record of nothing settled is removed")
	assert.Empty(t, hostScratchLeft(t, e.hostRoot))
	assert.NoFileExists(t, filepath.Join(e.hostRoot, "t", "paperclip-delta"))
}

// TestDeltaRecordNeverInsideTheRoot: when the cache directory lies inside
// the sync root, the record goes to $TMPDIR instead, and nothing of it
// appears in the tree.
func TestDeltaRecordNeverInsideTheRoot(t *testing.T) {
	t.Parallel()
	e, hashed := hashLog(t)
	home := sandboxHome(t, e)
	e.t.Root = home // ~/.cache is now inside the root
	host := deltaTree(t)
	m := dirMapping(host, home+"/t")
	settled := Options{settle: -time.Hour}
	for range 3 {
		_, err := e.syncIn(t, settled, m)
		require.NoError(t, err)
	}
	assert.Len(t, hashed(), 6, "the second sync wrote a record the third used")
	assert.NoDirExists(t, filepath.Join(e.info.HostPath(home), ".cache", "paperclip-delta"))
	code, out, _, err := e.runCommand(t.Context(), `ls -d "$TMPDIR"/paperclip-delta-*`, home, time.Minute)
	require.NoError(t, err)
	assert.Zero(t, code, out)
}
