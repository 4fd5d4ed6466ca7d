package sync

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sandboxTree writes deltaTree's files under the sandbox root and returns
// the sandbox path of the tree and its path on the host.
func sandboxTree(t *testing.T, e *env, name string) (string, string) {
	t.Helper()
	sb, hostSide := e.root+"/"+name, e.hostRoot+"/"+name
	for i, n := range []string{"a.txt", "b.txt", "c.txt", "sub/d.txt", "sub/e.txt", "sub/deep/f.txt"} {
		writeFile(t, filepath.Join(hostSide, n), strings.Repeat(string(rune('a'+i)), 100), 0o644)
	}
	require.NoError(t, os.Symlink("a.txt", filepath.Join(hostSide, "link")))
	return sb, hostSide
}

// TestDeltaSyncOutDownloadsOnlyWhatChanged: a re-export downloads the
// changed entries only and counts what moved; a sandbox edit that kept the
// size and mtime is found by the hashes (not by the opt-in quick check); a
// host file the export would overwrite is overwritten; a host file the
// sandbox lacks stays, as with the full export; nothing changed means
// nothing but the listing.
func TestDeltaSyncOutDownloadsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src, sbSide := sandboxTree(t, e, "proj")
	back := filepath.Join(t.TempDir(), "back")
	m := dirMapping(src, back)
	res, err := e.syncOut(t, Options{}, m)
	require.NoError(t, err)
	assert.Equal(t, DirReport{TargetPath: back, Way: WayFull, Reason: "the host target does not exist yet"}, oneReport(t, res))
	assert.EqualValues(t, 7, res[0].FilesTransferred)

	// Nothing changed: the listing is the only request.
	e.srv.ResetRequests()
	res, err = e.syncOut(t, Options{}, m)
	require.NoError(t, err)
	assert.Equal(t, DirReport{TargetPath: back, Way: WayDelta, Listed: 10, Unchanged: 7}, oneReport(t, res))
	assert.EqualValues(t, 0, res[0].FilesTransferred)
	assert.EqualValues(t, 0, res[0].BytesTransferred)
	assert.Equal(t, 1, e.srv.CountRequests("", ""), "the listing only")

	writeFile(t, filepath.Join(sbSide, "sub", "d.txt"), "changed", 0o644)
	writeFile(t, filepath.Join(back, "only-on-the-host"), "mine", 0o600)
	writeFile(t, filepath.Join(back, "c.txt"), "edited on the host", 0o644)
	res, err = e.syncOut(t, Options{}, m)
	require.NoError(t, err)
	assert.Equal(t, DirReport{TargetPath: back, Way: WayDelta, Listed: 10, Unchanged: 5}, oneReport(t, res))
	assert.EqualValues(t, 2, res[0].FilesTransferred)
	assert.Less(t, res[0].BytesTransferred, int64(16<<10), "two files and the directory headers")
	assert.Equal(t, "changed", readFile(t, filepath.Join(back, "sub", "d.txt")))
	assert.Equal(t, strings.Repeat("c", 100), readFile(t, filepath.Join(back, "c.txt")))
	assert.Equal(t, "mine", readFile(t, filepath.Join(back, "only-on-the-host")))

	// Same size, same mtime, other content.
	p := filepath.Join(sbSide, "b.txt")
	fi, err := os.Stat(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("X", 100)), 0o644))
	require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
	res, err = e.syncOut(t, Options{Delta: DeltaQuick}, m)
	require.NoError(t, err)
	assert.EqualValues(t, 0, res[0].FilesTransferred, "the quick check trusts size and mtime")
	assert.Equal(t, strings.Repeat("b", 100), readFile(t, filepath.Join(back, "b.txt")))
	res, err = e.syncOut(t, Options{}, m)
	require.NoError(t, err)
	assert.EqualValues(t, 1, res[0].FilesTransferred, "the hashes tell the content changed")
	assert.Equal(t, strings.Repeat("X", 100), readFile(t, filepath.Join(back, "b.txt")))
	e.noScratchLeft(t, back)
}
