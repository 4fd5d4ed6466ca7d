package sync

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/internal/span/spantest"
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
	// The listing carries the changed files (delta_changes.go), or the
	// export runs with an exclude file written by its script, or, when
	// too large for it, uploaded first.
	for name, o := range map[string]Options{"changes": {}, "inline": {changesMax: -1}, "uploaded": {changesMax: -1, inlineSkip: -1}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			downloadsOnlyWhatChanged(t, o)
		})
	}
}

func downloadsOnlyWhatChanged(t *testing.T, o Options) {
	e := newEnv(t)
	src, sbSide := sandboxTree(t, e, "proj")
	back := filepath.Join(t.TempDir(), "back")
	m := dirMapping(src, back)
	res, err := e.syncOut(t, o, m)
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
	ctx, rec := spantest.New(t.Context())
	e.srv.ResetRequests()
	res, err = SyncOut(ctx, e.t, []Operation{{ID: "o", Files: []Mapping{m}}}, o)
	require.NoError(t, err)
	assert.Equal(t, DirReport{TargetPath: back, Way: WayDelta, Listed: 10, Unchanged: 5}, oneReport(t, res))
	assert.EqualValues(t, 2, res[0].FilesTransferred)
	assert.Less(t, res[0].BytesTransferred, int64(16<<10), "two files and the directory headers")
	assert.Equal(t, "changed", readFile(t, filepath.Join(back, "sub", "d.txt")))
	assert.Equal(t, strings.Repeat("c", 100), readFile(t, filepath.Join(back, "c.txt")))
	assert.Equal(t, "mine", readFile(t, filepath.Join(back, "only-on-the-host")))
	// The listing alone, or: list, (upload,) export script, download,
	// scratch removal. (Files written within the settle time are never
	// recorded, so here every file is one the listing hashes and carries.)
	assert.Equal(t, []string{"list", "compare", "transfer"}, rec.Names())
	want, guards := 1, 1
	switch {
	case o.inlineSkip < 0:
		want, guards = 5, 3 // and the exclude file's upload (the export script removes it)
	case o.changesMax < 0:
		want, guards = 4, 2
	}
	assert.Equal(t, want, e.srv.CountRequests("", ""))
	transferAttrs(t, rec, "outbound", guards)

	// Same size, same mtime, other content.
	p := filepath.Join(sbSide, "b.txt")
	fi, err := os.Stat(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("X", 100)), 0o644))
	require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
	quick := o
	quick.Delta = DeltaQuick
	res, err = e.syncOut(t, quick, m)
	require.NoError(t, err)
	assert.EqualValues(t, 0, res[0].FilesTransferred, "the quick check trusts size and mtime")
	assert.Equal(t, strings.Repeat("b", 100), readFile(t, filepath.Join(back, "b.txt")))
	res, err = e.syncOut(t, o, m)
	require.NoError(t, err)
	assert.EqualValues(t, 1, res[0].FilesTransferred, "the hashes tell the content changed")
	assert.Equal(t, strings.Repeat("X", 100), readFile(t, filepath.Join(back, "b.txt")))
	e.noScratchLeft(t, back)
}

// TestDeltaSyncOutFallsBackToFull: whenever the delta cannot be computed
// safely, or would not pay, the whole tree is exported, and the report
// says why.
func TestDeltaSyncOutFallsBackToFull(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fake := t.TempDir()
	writeFile(t, filepath.Join(fake, "sha256sum"), "#!/bin/sh\nexit 1\n", 0o755)
	noHash := newEnvWith(t, map[string]string{"PATH": fake + ":" + os.Getenv("PATH")})
	for _, tc := range []struct {
		name   string
		env    *env
		o      Options
		follow bool
		before func(t *testing.T, sbSide string)
		reason string
	}{
		{name: "listing too many entries", o: Options{MaxListEntries: 3}, reason: "the listing exceeds 3 entries"},
		{name: "listing too many bytes", o: Options{MaxListBytes: 200}, reason: "the listing exceeds 200 bytes"},
		{name: "no hash tool", env: noHash, reason: "the sandbox has no sha256sum -z"},
		{name: "delta off", o: Options{Delta: DeltaOff}, reason: "delta sync is off"},
		{name: "links followed", follow: true, reason: "links are followed"},
		{name: "more than half changed", before: func(t *testing.T, sbSide string) {
			for _, n := range []string{"a.txt", "b.txt", "c.txt", "sub/d.txt", "sub/e.txt"} {
				writeFile(t, filepath.Join(sbSide, n), "new", 0o644)
			}
		}, reason: "more than half of the tree changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := e
			if tc.env != nil {
				env = tc.env
			}
			src, sbSide := sandboxTree(t, env, strings.ReplaceAll(tc.name, " ", "-"))
			back := filepath.Join(t.TempDir(), "back")
			m := dirMapping(src, back)
			m.FollowSymlinks = tc.follow
			_, err := env.syncOut(t, Options{Delta: DeltaOff}, m)
			require.NoError(t, err)
			writeFile(t, filepath.Join(sbSide, "c.txt"), "one change", 0o644)
			if tc.before != nil {
				tc.before(t, sbSide)
			}
			res, err := env.syncOut(t, tc.o, m)
			require.NoError(t, err)
			r := oneReport(t, res)
			assert.Equal(t, WayFull, r.Way)
			assert.Equal(t, tc.reason, r.Reason)
			assert.EqualValues(t, 7, res[0].FilesTransferred)
			if !tc.follow {
				assert.Equal(t, snapshotTree(t, sbSide), snapshotTree(t, back))
			}
		})
	}
}

// TestDeltaSyncOutSpecialFileFailsAsTheFullExport: a FIFO in the sandbox
// tree makes the full export fail (the host refuses special members); the
// delta falls back to it, so the failure is the same.
func TestDeltaSyncOutSpecialFileFailsAsTheFullExport(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src, sbSide := sandboxTree(t, e, "proj")
	back := filepath.Join(t.TempDir(), "back")
	m := dirMapping(src, back)
	_, err := e.syncOut(t, Options{}, m)
	require.NoError(t, err)
	require.NoError(t, syscall.Mkfifo(filepath.Join(sbSide, "sub", "fifo"), 0o644))
	_, errFull := e.syncOut(t, Options{Delta: DeltaOff}, m)
	var ae *ArchiveError
	require.ErrorAs(t, errFull, &ae)
	ctx, rec := spantest.New(t.Context())
	_, errDelta := SyncOut(ctx, e.t, []Operation{{ID: "o", Files: []Mapping{m}}}, Options{})
	assert.Equal(t, errFull.Error(), errDelta.Error())
	// The comparison found the FIFO and refused; the full export ran.
	assert.Equal(t, []string{"list", "compare!", "transfer!"}, rec.Names())
	e.noScratchLeft(t, back)
}

// TestDeltaSyncOutHostileListing: the listing comes from an untrusted
// sandbox. Names with newlines (which an exclude file cannot hold) are
// downloaded again rather than skipped; links that escape are omitted as
// the full export omits them, and a host entry of that name is left
// alone; a listing that lies about sizes cannot get a member past the
// archive limits, and at worst withholds the sandbox's own change.
func TestDeltaSyncOutHostileListing(t *testing.T) {
	t.Parallel()
	// From the listing's changes archive, and by the export.
	for way, o := range map[string]Options{"changes": {}, "export": {changesMax: -1}} {
		t.Run("names and links/"+way, func(t *testing.T) {
			t.Parallel()
			hostileNamesAndLinks(t, o)
		})
	}
	t.Run("sizes", func(t *testing.T) {
		t.Parallel()
		// A find that reports every size as 100 bytes (the third field of
		// each ten-field entry).
		realFind, err := lookPath("find")
		require.NoError(t, err)
		fake := t.TempDir()
		writeFile(t, filepath.Join(fake, "find"), "#!/bin/sh\ncase \" $* \" in *\" -printf \"*) ;; *) exec "+realFind+" \"$@\";; esac\n"+
			realFind+" \"$@\" | sed -z '3~10s/.*/100/'\n", 0o755)
		e := newEnvWith(t, map[string]string{"PATH": fake + ":" + os.Getenv("PATH")})
		src, sbSide := sandboxTree(t, e, "proj")
		back := filepath.Join(t.TempDir(), "back")
		m := dirMapping(src, back)
		_, err = e.syncOut(t, Options{}, m)
		require.NoError(t, err)

		// A 1,000-byte file listed as 100 bytes: the archive's real member
		// still meets the limit, as in the full export.
		writeFile(t, filepath.Join(sbSide, "b.txt"), strings.Repeat("B", 1000), 0o644)
		lim := Options{Limits: Limits{MaxEntrySize: 500}, deltaAnySize: true}
		res, err := e.syncOut(t, lim, m)
		var ae *ArchiveError
		require.ErrorAs(t, err, &ae, "%v", res)
		assert.Contains(t, err.Error(), ReasonOversized)
		assert.Equal(t, strings.Repeat("b", 100), readFile(t, filepath.Join(back, "b.txt")))

		// A change that kept the mtime, listed with the host's size: the
		// quick check believes it, and the host keeps its own copy; nothing
		// else is touched.
		require.NoError(t, os.Remove(filepath.Join(sbSide, "b.txt")))
		p := filepath.Join(sbSide, "c.txt")
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("C", 150)), 0o644))
		require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
		before := snapshotTree(t, back)
		res, err = e.syncOut(t, Options{Delta: DeltaQuick}, m)
		require.NoError(t, err)
		assert.Equal(t, WayDelta, oneReport(t, res).Way)
		assert.Equal(t, before, snapshotTree(t, back))
		e.noScratchLeft(t, back)
	})
}

// hostileNamesAndLinks is TestDeltaSyncOutHostileListing's names and links
// case, with o's way of moving what differs.
func hostileNamesAndLinks(t *testing.T, o Options) {
	e := newEnv(t)
	src, sbSide := sandboxTree(t, e, "proj")
	writeFile(t, filepath.Join(sbSide, "sub", "trailing"), "unchanged", 0o644)
	for _, n := range []string{"new\nline", "trailing ", "back\\slash", "*star", "-dash", "$(x)", "tab\tname"} {
		writeFile(t, filepath.Join(sbSide, "sub", n), "content of "+n, 0o644)
	}
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(sbSide, "abs")))
	require.NoError(t, os.Symlink("../../outside", filepath.Join(sbSide, "sub", "up")))
	back := filepath.Join(t.TempDir(), "back")
	m := dirMapping(src, back)
	full, err := e.syncOut(t, Options{Delta: DeltaOff}, m)
	require.NoError(t, err)
	writeFile(t, filepath.Join(back, "abs"), "the host's own", 0o600)
	writeFile(t, filepath.Join(back, "sub", "trailing"), "edited on the host", 0o644)

	e.srv.ResetRequests()
	res, err := e.syncOut(t, o, m)
	require.NoError(t, err)
	assert.Equal(t, WayDelta, oneReport(t, res).Way)
	want := 1 // the listing, carrying the changes
	if o.changesMax < 0 {
		want = 4 // list, export script, download, scratch removal
	}
	assert.Equal(t, want, e.srv.CountRequests("", ""))
	// Names an exclude line cannot hold travel again: a newline, a
	// trailing blank (which would exclude "trailing" instead).
	assert.EqualValues(t, 3, res[0].FilesTransferred, "and the host's edit is overwritten")
	assert.Equal(t, full[0].OmittedUnsafeLinkCount, res[0].OmittedUnsafeLinkCount)
	assert.ElementsMatch(t, []string{src + "/abs", src + "/sub/up"}, res[0].OmittedUnsafeLinks)
	assert.Equal(t, "the host's own", readFile(t, filepath.Join(back, "abs")))
	assert.NoFileExists(t, filepath.Join(back, "sub", "up"))
	assert.Equal(t, "content of new\nline", readFile(t, filepath.Join(back, "sub", "new\nline")))
	assert.Equal(t, "unchanged", readFile(t, filepath.Join(back, "sub", "trailing")))
	e.noScratchLeft(t, back)
}

// TestDeltaSyncOutDiskFullStreamsTheWholeTree: the disk-full fallback on
// the delta path streams the whole tree through the terminal (a full disk
// holds no exclude file), merged into the host target; the report says
// the whole tree went, and why. The listing's changes archive is written
// to no disk, so with it the delta still works.
func TestDeltaSyncOutDiskFullStreamsTheWholeTree(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src, sbSide := sandboxTree(t, e, "proj")
	back := filepath.Join(t.TempDir(), "back")
	m := dirMapping(src, back)
	_, err := e.syncOut(t, Options{HostReserve: -1}, m)
	require.NoError(t, err)
	big := randomBytes(t, 300<<10)
	require.NoError(t, os.WriteFile(filepath.Join(sbSide, "sub", "big.bin"), big, 0o640))
	writeFile(t, filepath.Join(back, "only-on-the-host"), "mine", 0o600)
	e.fillSandbox(t, 64<<10)
	res, err := e.syncOut(t, Options{HostReserve: -1, deltaAnySize: true, changesMax: -1}, m)
	require.NoError(t, err)
	assert.Equal(t, DirReport{TargetPath: back, Way: WayFull, Reason: "the sandbox disk is full", Listed: 11, Unchanged: 7}, oneReport(t, res))
	assert.EqualValues(t, 8, res[0].FilesTransferred, "the whole tree")
	assert.Equal(t, big, []byte(readFile(t, filepath.Join(back, "sub", "big.bin"))))
	assert.Equal(t, "mine", readFile(t, filepath.Join(back, "only-on-the-host")))
	assert.Positive(t, e.srv.CountRequests("POST", "/process/pty"))
	e.noScratchLeft(t, back)

	// The listing's changes archive needs no sandbox disk: the next
	// change comes back with the disk still full, in one request.
	big2 := randomBytes(t, 200<<10)
	require.NoError(t, os.WriteFile(filepath.Join(sbSide, "sub", "big.bin"), big2, 0o640))
	e.srv.ResetRequests()
	res, err = e.syncOut(t, Options{HostReserve: -1, deltaAnySize: true}, m)
	require.NoError(t, err)
	assert.Equal(t, WayDelta, oneReport(t, res).Way)
	assert.Equal(t, big2, []byte(readFile(t, filepath.Join(back, "sub", "big.bin"))))
	assert.Equal(t, 1, e.srv.CountRequests("", ""), "the listing only")
	e.noScratchLeft(t, back)
}

// TestDeltaSyncOutUnsafeLinkTheListingMissed: an escaping link the listing
// did not show (made after it, here hidden by a find that leaves it out
// of the listing) makes the first archive fail as in the full export; the
// export is rebuilt without it, with the exclude file there again (the
// first script removed an uploaded one, so it is uploaded again), and only
// what changed comes back.
func TestDeltaSyncOutUnsafeLinkTheListingMissed(t *testing.T) {
	t.Parallel()
	for name, inline := range map[string]int{"inline": 0, "uploaded": -1} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			realFind, err := lookPath("find")
			require.NoError(t, err)
			fake := t.TempDir()
			// Listing walks print ten fields an entry (%y first); the
			// entry whose path is ./evil is dropped from them.
			writeFile(t, filepath.Join(fake, "find"), `#!/bin/bash
case " $* " in *%y*) ;; *) exec `+realFind+` "$@";; esac
`+realFind+` "$@" | { f=(); while IFS= read -r -d '' x; do f+=("$x"); if [ ${#f[@]} = 10 ]; then [ "${f[7]}" = ./evil ] || printf '%s\0' "${f[@]}"; f=(); fi; done; }
`, 0o755)
			e := newEnvWith(t, map[string]string{"PATH": fake + ":" + os.Getenv("PATH")})
			src, sbSide := sandboxTree(t, e, "proj")
			back := filepath.Join(t.TempDir(), "back")
			m := dirMapping(src, back)
			_, err = e.syncOut(t, Options{}, m)
			require.NoError(t, err)

			require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(sbSide, "evil")))
			writeFile(t, filepath.Join(sbSide, "sub", "d.txt"), "changed", 0o644)
			e.srv.ResetRequests()
			// Without the changes archive: the listing did not show the
			// link, so the changes alone would not bring it.
			res, err := e.syncOut(t, Options{inlineSkip: inline, changesMax: -1}, m)
			require.NoError(t, err)
			assert.Equal(t, WayDelta, oneReport(t, res).Way)
			assert.Equal(t, []string{src + "/evil"}, res[0].OmittedUnsafeLinks)
			assert.EqualValues(t, 1, res[0].FilesTransferred, "only the changed file")
			assert.Equal(t, "changed", readFile(t, filepath.Join(back, "sub", "d.txt")))
			assert.NoFileExists(t, filepath.Join(back, "evil"))
			// list, then per export: (upload,) script, download, archive removal.
			want := 7
			if inline < 0 {
				want = 9
			}
			assert.Equal(t, want, e.srv.CountRequests("", ""))
			e.noScratchLeft(t, back)
		})
	}
}

// TestDeltaSyncOutChangesArchive: the listing carries the files it had to
// hash (their record key is new) and, when those hold every file the host
// lacks, that is the whole sync: one request. Otherwise (the host lost a
// file the sandbox did not change, the changes are over the bound, the
// archive does not decode) the export runs as before, and the end state
// is the same.
func TestDeltaSyncOutChangesArchive(t *testing.T) {
	t.Parallel()
	fake := t.TempDir()
	writeFile(t, filepath.Join(fake, "base64"), "#!/bin/sh\ncat >/dev/null; printf '!!!'\n", 0o755)
	for name, tc := range map[string]struct {
		env    func(t *testing.T) *env
		o      Options
		change func(t *testing.T, sbSide, back string)
		check  func(t *testing.T, sbSide, back string)
		want   int // requests
	}{
		"a sandbox edit": {
			change: func(t *testing.T, sbSide, _ string) {
				writeFile(t, filepath.Join(sbSide, "sub", "d.txt"), "changed", 0o644)
			},
			check: func(t *testing.T, _, back string) {
				assert.Equal(t, "changed", readFile(t, filepath.Join(back, "sub", "d.txt")))
			},
			want: 1,
		},
		"a directory mode and a link target": {
			change: func(t *testing.T, sbSide, _ string) {
				require.NoError(t, os.Chmod(filepath.Join(sbSide, "sub", "deep"), 0o700))
				require.NoError(t, os.Remove(filepath.Join(sbSide, "link")))
				require.NoError(t, os.Symlink("b.txt", filepath.Join(sbSide, "link")))
			},
			check: func(t *testing.T, _, back string) {
				fi, err := os.Stat(filepath.Join(back, "sub", "deep"))
				require.NoError(t, err)
				assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm())
				l, err := os.Readlink(filepath.Join(back, "link"))
				require.NoError(t, err)
				assert.Equal(t, "b.txt", l)
			},
			want: 1,
		},
		"a host edit the sandbox did not make": {
			change: func(t *testing.T, sbSide, back string) {
				writeFile(t, filepath.Join(sbSide, "sub", "d.txt"), "changed", 0o644)
				writeFile(t, filepath.Join(back, "c.txt"), "edited on the host", 0o644)
			},
			check: func(t *testing.T, _, back string) {
				assert.Equal(t, "changed", readFile(t, filepath.Join(back, "sub", "d.txt")))
				assert.Equal(t, strings.Repeat("c", 100), readFile(t, filepath.Join(back, "c.txt")))
			},
			want: 4, // list, export script, download, scratch removal
		},
		"changes over the bound": {
			o: Options{changesMax: 99},
			change: func(t *testing.T, sbSide, _ string) {
				writeFile(t, filepath.Join(sbSide, "a.txt"), strings.Repeat("z", 100), 0o644)
			},
			check: func(t *testing.T, _, back string) {
				assert.Equal(t, strings.Repeat("z", 100), readFile(t, filepath.Join(back, "a.txt")))
			},
			want: 4,
		},
		"an archive that does not decode": {
			env: func(t *testing.T) *env {
				return newEnvWith(t, map[string]string{"PATH": fake + ":" + os.Getenv("PATH")})
			},
			change: func(t *testing.T, sbSide, _ string) {
				writeFile(t, filepath.Join(sbSide, "a.txt"), strings.Repeat("z", 100), 0o644)
			},
			check: func(t *testing.T, _, back string) {
				assert.Equal(t, strings.Repeat("z", 100), readFile(t, filepath.Join(back, "a.txt")))
			},
			want: 4,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if tc.env != nil {
				e = tc.env(t)
			}
			src, sbSide := sandboxTree(t, e, "proj")
			back := filepath.Join(t.TempDir(), "back")
			m := dirMapping(src, back)
			// Every ctime counts as settled, as a run later: the first
			// delta records the whole tree.
			o := tc.o
			o.settle = -time.Hour
			_, err := e.syncOut(t, Options{Delta: DeltaOff}, m)
			require.NoError(t, err)
			res, err := e.syncOut(t, o, m)
			require.NoError(t, err)
			require.Equal(t, WayDelta, oneReport(t, res).Way)
			tc.change(t, sbSide, back)
			full := filepath.Join(t.TempDir(), "full")
			require.NoError(t, osexec.Command("cp", "-a", "--", back, full).Run())
			e.srv.ResetRequests()
			res, err = e.syncOut(t, o, m)
			require.NoError(t, err)
			assert.Equal(t, WayDelta, oneReport(t, res).Way)
			tc.check(t, sbSide, back)
			assert.Equal(t, tc.want, e.srv.CountRequests("", ""))
			if name == "a sandbox edit" {
				// What moved is the archive: one header, a block of data,
				// the end blocks, padded to tar's record at most.
				assert.EqualValues(t, 1, res[0].FilesTransferred)
				assert.GreaterOrEqual(t, res[0].BytesTransferred, int64(2048))
				assert.LessOrEqual(t, res[0].BytesTransferred, int64(10240))
			}
			e.noScratchLeft(t, back)
			// And the host target is what a full export makes of the
			// same host tree.
			_, err = e.syncOut(t, Options{Delta: DeltaOff}, dirMapping(src, full))
			require.NoError(t, err)
			equalSnapshots(t, snapshotWith(t, full, false), snapshotWith(t, back, false))
		})
	}
}

// TestDeltaSyncOutChangesOverTheBoundAreNotCarried: files the sandbox
// changed beyond the changes archive's bound are not tarred into the
// listing at all (not tarred and cut): the listing's answer stays the
// size of a listing, and the export brings them.
func TestDeltaSyncOutChangesOverTheBoundAreNotCarried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src, sbSide := sandboxTree(t, e, "proj")
	back := filepath.Join(t.TempDir(), "back")
	m := dirMapping(src, back)
	o := Options{settle: -time.Hour, changesMax: 64 << 10, deltaAnySize: true}
	_, err := e.syncOut(t, Options{Delta: DeltaOff}, m)
	require.NoError(t, err)
	_, err = e.syncOut(t, o, m)
	require.NoError(t, err)
	big := randomBytes(t, 1<<20)
	require.NoError(t, os.WriteFile(filepath.Join(sbSide, "big.bin"), big, 0o644))
	e.srv.ResetRequests()
	res, err := e.syncOut(t, o, m)
	require.NoError(t, err)
	assert.Equal(t, WayDelta, oneReport(t, res).Way)
	assert.Equal(t, big, []byte(readFile(t, filepath.Join(back, "big.bin"))))
	reqs := e.srv.Requests()
	require.Len(t, reqs, 4, "list, export script, download, scratch removal")
	assert.Less(t, reqs[0].ReplyBytes, int64(16<<10), "the listing carried no archive")
}

// TestDeltaSyncOutChangesArchiveIsNotCountedAsListing: the changes archive
// rides on top of the listing's own bound (MaxListBytes): a listing well
// under it whose archive is over it still goes the changes way, and one
// that is itself over it still falls back.
func TestDeltaSyncOutChangesArchiveIsNotCountedAsListing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src, sbSide := sandboxTree(t, e, "proj")
	back := filepath.Join(t.TempDir(), "back")
	m := dirMapping(src, back)
	o := Options{settle: -time.Hour, MaxListBytes: 16 << 10, deltaAnySize: true}
	_, err := e.syncOut(t, Options{Delta: DeltaOff}, m)
	require.NoError(t, err)
	_, err = e.syncOut(t, o, m)
	require.NoError(t, err)
	big := randomBytes(t, 256<<10)
	require.NoError(t, os.WriteFile(filepath.Join(sbSide, "big.bin"), big, 0o644))
	e.srv.ResetRequests()
	res, err := e.syncOut(t, o, m)
	require.NoError(t, err)
	assert.Equal(t, WayDelta, oneReport(t, res).Way, oneReport(t, res).Reason)
	assert.Equal(t, big, []byte(readFile(t, filepath.Join(back, "big.bin"))))
	assert.Equal(t, 1, e.srv.CountRequests("", ""), "the listing, with the archive")

	o.MaxListBytes = 200
	writeFile(t, filepath.Join(sbSide, "a.txt"), "changed", 0o644)
	res, err = e.syncOut(t, o, m)
	require.NoError(t, err)
	assert.Equal(t, DirReport{TargetPath: back, Way: WayFull, Reason: "the listing exceeds 200 bytes"}, oneReport(t, res))
	assert.Equal(t, "changed", readFile(t, filepath.Join(back, "a.txt")))
}

// TestDeltaSyncOutChangesArchiveOnlyGivesFiles: a changes archive (here a
// hostile one, from a sandbox whose base64 prints what it likes) can only
// supply the content of a file the listing says differs: a member of that
// name that is not a regular file is passed over, so no link or directory
// lands where the listing showed a file.
func TestDeltaSyncOutChangesArchiveOnlyGivesFiles(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "./a.txt", Linkname: "b.txt", Mode: 0o777}))
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "./a.txt", Size: 7, Mode: 0o644}))
	_, err := tw.Write([]byte("archive"))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	fake := t.TempDir()
	writeFile(t, filepath.Join(fake, "base64"), "#!/bin/sh\ncat >/dev/null; printf %s '"+base64.StdEncoding.EncodeToString(buf.Bytes())+"'\n", 0o755)
	e := newEnvWith(t, map[string]string{"PATH": fake + ":" + os.Getenv("PATH")})
	src, sbSide := sandboxTree(t, e, "proj")
	back := filepath.Join(t.TempDir(), "back")
	m := dirMapping(src, back)
	o := Options{settle: -time.Hour}
	_, err = e.syncOut(t, Options{Delta: DeltaOff}, m)
	require.NoError(t, err)
	_, err = e.syncOut(t, o, m)
	require.NoError(t, err)
	writeFile(t, filepath.Join(sbSide, "a.txt"), "sandbox", 0o644)
	e.srv.ResetRequests()
	res, err := e.syncOut(t, o, m)
	require.NoError(t, err)
	assert.Equal(t, WayDelta, oneReport(t, res).Way)
	assert.Equal(t, 1, e.srv.CountRequests("", ""), "the archive held the file")
	fi, err := os.Lstat(filepath.Join(back, "a.txt"))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "a regular file, not the archive's link")
	// The sandbox could send any content for its own file; it cannot
	// change what kind of entry the host gets.
	assert.Equal(t, "archive", readFile(t, filepath.Join(back, "a.txt")))
}
