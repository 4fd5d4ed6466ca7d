package sync

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deltaTree writes a small host tree and returns its root.
func deltaTree(t *testing.T) string {
	t.Helper()
	host := filepath.Join(t.TempDir(), "src")
	for i, n := range []string{"a.txt", "b.txt", "c.txt", "sub/d.txt", "sub/e.txt", "sub/deep/f.txt"} {
		writeFile(t, filepath.Join(host, n), strings.Repeat(string(rune('a'+i)), 100), 0o644)
	}
	require.NoError(t, os.Symlink("a.txt", filepath.Join(host, "link")))
	return host
}

func oneReport(t *testing.T, res []OperationResult) DirReport {
	t.Helper()
	require.Len(t, res, 1)
	require.Len(t, res[0].Directories, 1)
	return res[0].Directories[0]
}

// TestDeltaSyncInSendsOnlyWhatChanged: a re-sync sends the changed file
// and its directory only, and counts what moved; a content change that
// kept the size and mtime is found by the hashes, and is not by the quick
// check the operator may opt into.
func TestDeltaSyncInSendsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := deltaTree(t)
	target, hostTarget := e.root+"/t", e.hostRoot+"/t"
	m := dirMapping(host, target)
	res, err := e.syncIn(t, Options{}, m)
	require.NoError(t, err)
	assert.Equal(t, DirReport{TargetPath: target, Way: WayFull, Reason: "the target does not exist yet"}, oneReport(t, res))
	assert.EqualValues(t, 7, res[0].FilesTransferred)

	writeFile(t, filepath.Join(host, "sub", "d.txt"), "changed", 0o644)
	res, err = e.syncIn(t, Options{}, m)
	require.NoError(t, err)
	// ".", 7 files and links, sub and sub/deep are listed; sub travels
	// with its changed file, so its mtime ends as the full sync's would.
	assert.Equal(t, DirReport{TargetPath: target, Way: WayDelta, Listed: 10, Unchanged: 7}, oneReport(t, res))
	assert.EqualValues(t, 1, res[0].FilesTransferred)
	assert.Less(t, res[0].BytesTransferred, int64(4096))
	assert.Equal(t, "changed", readFile(t, filepath.Join(hostTarget, "sub", "d.txt")))

	// Same size, same mtime, other content.
	p := filepath.Join(host, "b.txt")
	fi, err := os.Stat(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("X", 100)), 0o644))
	require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
	res, err = e.syncIn(t, Options{Delta: DeltaQuick}, m)
	require.NoError(t, err)
	assert.EqualValues(t, 0, res[0].FilesTransferred, "the quick check trusts size and mtime")
	assert.Equal(t, strings.Repeat("b", 100), readFile(t, filepath.Join(hostTarget, "b.txt")))
	res, err = e.syncIn(t, Options{}, m)
	require.NoError(t, err)
	assert.EqualValues(t, 1, res[0].FilesTransferred, "the hashes tell the content changed")
	assert.Equal(t, strings.Repeat("X", 100), readFile(t, filepath.Join(hostTarget, "b.txt")))

	// Nothing changed: nothing moves, not even an archive.
	e.srv.ResetRequests()
	res, err = e.syncIn(t, Options{}, m)
	require.NoError(t, err)
	assert.EqualValues(t, 0, res[0].FilesTransferred)
	assert.Equal(t, 1, e.srv.CountRequests("", ""), "the listing only")
	e.noScratchLeft(t, host)
}

// TestDeltaSyncInFallsBackToFull: whenever the delta cannot be computed
// safely, or would not pay, the whole tree goes, and the report says why.
func TestDeltaSyncInFallsBackToFull(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fake := t.TempDir()
	writeFile(t, filepath.Join(fake, "sha256sum"), "#!/bin/sh\nexit 1\n", 0o755)
	noHash := newEnvWith(t, map[string]string{"PATH": fake + ":" + os.Getenv("PATH")})
	for _, tc := range []struct {
		name   string
		env    *env
		o      Options
		before func(t *testing.T, host, hostTarget string)
		reason string
	}{
		{name: "listing too many entries", o: Options{MaxListEntries: 3}, reason: "the listing exceeds 3 entries"},
		{name: "listing too many bytes", o: Options{MaxListBytes: 200}, reason: "the listing exceeds 200 bytes"},
		{name: "no hash tool", env: noHash, reason: "the sandbox has no sha256sum -z"},
		{name: "delta off", o: Options{Delta: DeltaOff}, reason: "delta sync is off"},
		{name: "more than half changed", before: func(t *testing.T, host, _ string) {
			for _, n := range []string{"a.txt", "b.txt", "c.txt", "sub/d.txt", "sub/e.txt"} {
				writeFile(t, filepath.Join(host, n), "new", 0o644)
			}
		}, reason: "more than half of the tree changed"},
		{name: "a sandbox link where the host has a directory", before: func(t *testing.T, _, hostTarget string) {
			require.NoError(t, os.RemoveAll(filepath.Join(hostTarget, "sub", "deep")))
			require.NoError(t, os.Symlink("..", filepath.Join(hostTarget, "sub", "deep")))
		}, reason: "a sandbox symlink stands where the host has a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := e
			if tc.env != nil {
				env = tc.env
			}
			host := deltaTree(t)
			name := strings.ReplaceAll(tc.name, " ", "-")
			target, hostTarget := env.root+"/"+name, env.hostRoot+"/"+name
			m := dirMapping(host, target)
			_, err := env.syncIn(t, Options{Delta: DeltaOff}, m)
			require.NoError(t, err)
			writeFile(t, filepath.Join(host, "c.txt"), "one change", 0o644)
			if tc.before != nil {
				tc.before(t, host, hostTarget)
			}
			res, err := env.syncIn(t, tc.o, m)
			require.NoError(t, err)
			r := oneReport(t, res)
			assert.Equal(t, WayFull, r.Way)
			assert.Equal(t, tc.reason, r.Reason)
			assert.EqualValues(t, 7, res[0].FilesTransferred)
			assert.Equal(t, snapshotTree(t, host), snapshotTree(t, hostTarget))
		})
	}
}

// TestDeltaSyncInTargetNotADirectory: a file where the target directory
// goes is no listing to compare with: the full sync runs and fails as it
// always did.
func TestDeltaSyncInTargetNotADirectory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	writeFile(t, filepath.Join(e.hostRoot, "file"), "x", 0o644)
	host := deltaTree(t)
	_, err := e.syncIn(t, Options{}, dirMapping(host, e.root+"/file"))
	var se *SandboxCommandError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "x", readFile(t, filepath.Join(e.hostRoot, "file")))
}

// TestParseListingRefusesWhatDoesNotParse: a listing from an untrusted
// sandbox that is cut, malformed, overlong or carries names the daemon
// could not transport exactly is refused (the mapping then goes full).
func TestParseListingRefusesWhatDoesNotParse(t *testing.T) {
	head := "H\x000\x000\x000022\n\x001\x00"
	dot := "d\x00755\x004096\x001700000000.0000000000\x000\x000\x002\x00.\x00\x002049:1:1700000000.5\x00"
	file := "f\x00644\x003\x001700000000.0000000000\x000\x000\x001\x00./a\nb\x00\x002049:7:1700000000.5\x00"
	hash := strings.Repeat("e", 64) + "  ./a\nb\x00"
	good := head + dot + file + "S\x00" + hash + "E\x00"
	l, err := parseListing([]byte(good), 10)
	require.NoError(t, err)
	require.Len(t, l.entries, 2)
	want := &sbEntry{typ: 'f', mode: 0o644, size: 3, mtime: 1700000000, nlink: 1, key: "2049:7:3:1700000000.0000000000:1700000000.5", hash: strings.Repeat("e", 64)}
	assert.Equal(t, want, l.entries["a\nb"])
	assert.EqualValues(t, 0o22, l.umask)
	// A hash from the sandbox's record names the file by its key.
	l, err = parseListing([]byte(head+dot+file+"S\x00"+strings.Repeat("e", 64)+" "+want.key+"\x00E\x00"), 10)
	require.NoError(t, err)
	assert.Equal(t, want, l.entries["a\nb"])

	for name, bad := range map[string]string{
		"cut":                  strings.TrimSuffix(good, "E\x00"),
		"no end":               good[:len(good)-1],
		"too many entries":     head + dot + file + strings.Replace(file, "./a", "./c", 1) + "S\x00E\x00",
		"not utf-8":            strings.Replace(good, "./a\nb", "./a\uFFFDb", 2),
		"absolute name":        strings.Replace(good, "./a\nb\x00\x00", "/etc/passwd\x00\x00", 1),
		"a record line cut":    head + dot + file + "S\x00" + strings.Repeat("e", 60) + " 2049:7\x00E\x00",
		"short entry":          head + "f\x00644\x00S\x00E\x00",
		"bad mode":             strings.Replace(good, "644", "9x9", 1),
		"bad size":             strings.Replace(good, "\x003\x00", "\x00-x\x00", 1),
		"duplicate":            head + dot + file + file + "S\x00E\x00",
		"bad hash":             strings.Replace(good, strings.Repeat("e", 64), strings.Repeat("z", 64), 1),
		"bad umask":            strings.Replace(good, "0022", "99", 1),
		"no hash section":      head + dot + file + "E\x00",
		"garbage":              "hello",
		"an unknown one-field": "Q\x00",
	} {
		_, err := parseListing([]byte(bad), 2)
		assert.Error(t, err, name)
	}
	// A listing without the target itself: find has no -printf.
	l, err = parseListing([]byte(head+"S\x00E\x00"), 2)
	require.NoError(t, err)
	assert.Equal(t, byte('T'), l.state)
	for _, s := range []string{"A", "N"} {
		l, err := parseListing([]byte(s+"\x00"), 2)
		require.NoError(t, err)
		assert.Equal(t, s[0], l.state)
	}
}

// TestDeltaSyncInFractionalMtimeIsAChange: a sandbox file whose mtime has
// a fraction of a second was not written by tar: it is sent, whatever its
// content.
func TestDeltaSyncInFractionalMtimeIsAChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := deltaTree(t)
	m := dirMapping(host, e.root+"/t")
	_, err := e.syncIn(t, Options{}, m)
	require.NoError(t, err)
	p := filepath.Join(e.hostRoot, "t", "a.txt")
	fi, err := os.Stat(p)
	require.NoError(t, err)
	require.NoError(t, os.Chtimes(p, fi.ModTime().Add(time.Millisecond), fi.ModTime().Add(time.Millisecond)))
	res, err := e.syncIn(t, Options{}, m)
	require.NoError(t, err)
	assert.EqualValues(t, 1, res[0].FilesTransferred)
	fi2, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, fi.ModTime(), fi2.ModTime())
}

// TestDeltaSyncInDiskFullLeavesTargetUntouched: on the delta path too, an
// extraction that runs out of sandbox disk leaves the target as it was.
func TestDeltaSyncInDiskFullLeavesTargetUntouched(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := t.TempDir()
	target := filepath.Join(e.root, "tree")
	m := dirMapping(host, target)
	for i := range 10 {
		writeFile(t, filepath.Join(host, "f"+strconv.Itoa(i)), "old", 0o644)
	}
	_, err := e.syncIn(t, Options{}, m)
	require.NoError(t, err)
	for _, n := range []string{"f0", "f1"} {
		writeFile(t, filepath.Join(host, n), "new "+n+strings.Repeat("z", 8000), 0o644)
	}
	used, err := e.srv.DiskUsage(e.sb.ID)
	require.NoError(t, err)
	// Room for the uploaded archive (about 19 KB, with the upload's own
	// temporary copy) but not for its files once extracted next to it.
	require.NoError(t, e.srv.SetDiskAllocation(e.sb.ID, used+28000))
	res, err := e.syncIn(t, Options{}, m)
	require.ErrorContains(t, err, "Daytona syncIn extract command failed", "the extraction, not the upload, ran out of disk")
	assert.Empty(t, res)
	for _, n := range []string{"f0", "f1"} {
		assert.Equal(t, "old", readFile(t, filepath.Join(target, n)), "untouched")
	}
	assert.Empty(t, e.scratchLeft(t), "every reserved name swept")
}

// TestDeltaSyncInFirstSyncCostsOneRoundTripMore: into a target that does
// not exist, or exists empty, the delta sync adds its listing and nothing
// else to today's requests.
func TestDeltaSyncInFirstSyncCostsOneRoundTripMore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := deltaTree(t)
	requests := func(o Options, target string) int {
		e.srv.ResetRequests()
		_, err := e.syncIn(t, o, dirMapping(host, target))
		require.NoError(t, err)
		return e.srv.CountRequests("", "")
	}
	today := requests(Options{Delta: DeltaOff}, e.root+"/off")
	assert.Equal(t, today+1, requests(Options{}, e.root+"/absent"))
	require.NoError(t, os.Mkdir(filepath.Join(e.hostRoot, "empty"), 0o755))
	assert.Equal(t, today+1, requests(Options{}, e.root+"/empty"))
}

// The group of an unchanged file decides too: a file the sandbox holds
// in another group than extraction would give it is sent again and
// regrouped, as the full sync would; in a setgid directory extraction
// gives it the directory's group, so a file already in that group stays.
// (Sample-7 bug 22 dropped the group check; an equivalence run found the
// setgid case.) Changing groups needs root.
func TestDeltaSyncInComparesTheGroup(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("chown to another group needs root")
	}
	e := newEnv(t)
	host := deltaTree(t)
	target, hostTarget := e.root+"/t", e.hostRoot+"/t"
	m := dirMapping(host, target)
	_, err := e.syncIn(t, Options{}, m)
	require.NoError(t, err)
	gid := func(p string) uint32 {
		fi, err := os.Lstat(filepath.Join(hostTarget, p))
		require.NoError(t, err)
		return fi.Sys().(*syscall.Stat_t).Gid
	}
	own := gid("a.txt")

	require.NoError(t, os.Lchown(filepath.Join(hostTarget, "a.txt"), -1, 4242))
	res, err := e.syncIn(t, Options{}, m)
	require.NoError(t, err)
	assert.Equal(t, WayDelta, oneReport(t, res).Way)
	assert.EqualValues(t, 1, res[0].FilesTransferred, "the regrouped file travels")
	assert.Equal(t, own, gid("a.txt"))

	// sub made setgid in group 4242: its files are extracted into 4242.
	sub := filepath.Join(hostTarget, "sub")
	require.NoError(t, os.Chown(sub, -1, 4242))
	require.NoError(t, os.Chmod(sub, 0o755|os.ModeSetgid))
	require.NoError(t, os.Lchown(filepath.Join(sub, "d.txt"), -1, 4242))
	res, err = e.syncIn(t, Options{}, m)
	require.NoError(t, err)
	assert.Equal(t, WayDelta, oneReport(t, res).Way)
	assert.EqualValues(t, 1, res[0].FilesTransferred, "only sub/e.txt, in the user's group, travels")
	assert.EqualValues(t, 4242, gid("sub/d.txt"))
	assert.EqualValues(t, 4242, gid("sub/e.txt"))
}
