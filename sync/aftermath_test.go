package sync

// What a sync leaves behind at its limits: the host reserve, the archive
// total on the streamed export, and the omitted links an operation lists.
// Written for bugs of the fresh sample of hand-planted bugs in
// docs/testing.md that no test caught.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	stdsync "sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A host write may leave exactly the reserve free; one byte more is
// refused. (Planted: <= for < on the reserve.)
func TestHostReserveAtTheLimit(t *testing.T) {
	t.Parallel()
	o := Options{HostReserve: 100, HostFreeSpace: func(string) (int64, error) { return 1000, nil }}
	check := o.reserveCheck(t.TempDir())
	require.NoError(t, check(900), "leaves exactly the reserve")
	require.ErrorIs(t, check(901), ErrHostSpace)
	require.NoError(t, check(0))
	require.Nil(t, Options{HostReserve: -1}.reserveCheck(t.TempDir()), "a negative reserve: none")
	require.Equal(t, DefaultHostReserve, Options{}.hostReserve())
}

// On the streamed (disk-full) export the archive total is the smaller of
// the configured MaxTotal and the sandbox's disk allocation: a MaxTotal
// below the allocation still holds. (Planted: the comparison flipped, so
// the allocation replaced a smaller MaxTotal.)
func TestStreamedExportKeepsTheSmallerTotal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := filepath.Join(e.root, "w")
	require.NoError(t, os.MkdirAll(src, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "f"), randomBytes(t, 80<<10), 0o644))
	e.fillSandbox(t, 8<<10) // the export streams through the terminal
	e.t.DiskAllocation = 100 << 10
	host := t.TempDir()
	_, err := e.syncOut(t, Options{HostReserve: -1, Limits: Limits{MaxTotal: 50 << 10}}, dirMapping(src, filepath.Join(host, "w")))
	var ae *ArchiveError
	require.True(t, errors.As(err, &ae), "want the total refused, got %v", err)
	assert.Equal(t, ReasonTotal, ae.Reason)
	assert.NoDirExists(t, filepath.Join(host, "w"))
	e.noScratchLeft(t, host)

	// At the configured total the same export passes.
	_, err = e.syncOut(t, Options{HostReserve: -1, Limits: Limits{MaxTotal: 80 << 10}}, dirMapping(src, filepath.Join(host, "w")))
	require.NoError(t, err)
	assert.Len(t, readFile(t, filepath.Join(host, "w", "f")), 80<<10)
}

// An operation lists at most 20 omitted links across all of its
// mappings, and counts every one: a list that reaches the limit exactly
// on a later mapping is full, one more is counted, not listed: 21 unsafe
// links, 20 listed. (Planted: the room test off by one.) (Pins a default:
// MaxOmittedListed, 20.)
func TestOmittedLinksListedUpToTheLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	links := func(dir string, n int) {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "ln -s /etc/passwd l%02d && ", i)
		}
		b.WriteString("true")
		writeFile(t, filepath.Join(dir, "ok.txt"), "ok", 0o644)
		e.sh(t, dir, b.String())
	}
	a, b := filepath.Join(e.root, "a"), filepath.Join(e.root, "b")
	links(a, 19)
	links(b, 2)
	host := t.TempDir()
	res, err := e.syncOut(t, Options{}, dirMapping(a, filepath.Join(host, "a")), dirMapping(b, filepath.Join(host, "b")))
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.EqualValues(t, 21, res[0].OmittedUnsafeLinkCount, "every omitted link counted")
	require.Len(t, res[0].OmittedUnsafeLinks, 20, "listed up to the limit, across mappings")
	assert.Equal(t, b+"/l00", res[0].OmittedUnsafeLinks[19], "the last listed is the later mapping's first")
}

// A SyncOut without HostReserve leaves 1 GiB free on the host: a
// 1000-byte file is refused with the host-space error while the
// filesystem reports 1 GiB + 999 bytes free, and nothing is left behind;
// at 1 GiB + 1000 bytes free (exactly the reserve left) it is written.
// (Pins a default: DefaultHostReserve, 1 << 30.)
func TestDefaultHostReserveIsOneGiB(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := randomBytes(t, 1000)
	require.NoError(t, os.WriteFile(filepath.Join(e.root, "f"), body, 0o644))
	host := t.TempDir()
	m := fileMapping(e.root+"/f", filepath.Join(host, "f"))
	free := func(n int64) Options {
		return Options{HostFreeSpace: func(string) (int64, error) { return n, nil }}
	}
	_, err := e.syncOut(t, free(1_073_741_824+999), m)
	require.ErrorIs(t, err, ErrHostSpace)
	assert.Contains(t, err.Error(), "a 1000-byte write would leave less than 1073741824 bytes free")
	assert.NoFileExists(t, m.TargetPath)
	e.noScratchLeft(t, host)

	_, err = e.syncOut(t, free(1_073_741_824+1000), m)
	require.NoError(t, err)
	assert.Equal(t, string(body), readFile(t, m.TargetPath))
}

// A SyncOut to host targets whose parent directories do not exist makes
// them with mode 0755, for a file target and for a directory target, and
// fills the directory target in a private staging directory of mode 0700
// next to it (seen from the free-space hook, which runs before each write
// into it). The umask is 0 meanwhile, so the modes are the worker's own:
// under the usual 022, 0777 would pass for 0755. (Pins a default: the
// 0o755 of newHostFile's and newHostDir's MkdirAll and the 0o700 of the
// staging directory, sync/host.go.)
func TestMissingHostParentsAre0755AndStagingIs0700(t *testing.T) {
	// Not parallel: the umask is the whole process's.
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "w", "a"), "payload", 0o644)
	host := t.TempDir()
	var mu stdsync.Mutex
	var staging []os.FileMode
	o := Options{HostFreeSpace: func(dir string) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		ents, err := os.ReadDir(dir)
		if err != nil {
			return 0, err
		}
		for _, en := range ents {
			if en.IsDir() && strings.HasPrefix(en.Name(), scratchPrefix) {
				fi, err := en.Info()
				if err != nil {
					return 0, err
				}
				staging = append(staging, fi.Mode().Perm())
			}
		}
		return 1 << 40, nil
	}}
	_, err := func() ([]OperationResult, error) {
		defer syscall.Umask(syscall.Umask(0))
		return e.syncOut(t, o,
			fileMapping(e.root+"/w/a", filepath.Join(host, "f1", "f2", "a")),
			dirMapping(e.root+"/w", filepath.Join(host, "d1", "d2", "w")))
	}()
	require.NoError(t, err)
	assert.Equal(t, "payload", readFile(t, filepath.Join(host, "f1", "f2", "a")))
	assert.Equal(t, "payload", readFile(t, filepath.Join(host, "d1", "d2", "w", "a")))
	for _, d := range []string{"f1", "f1/f2", "d1", "d1/d2"} {
		assert.Equal(t, "0755", fmt.Sprintf("%#o", permOf(t, filepath.Join(host, d))), d)
	}
	require.NotEmpty(t, staging, "the directory target was written through its staging directory")
	for _, m := range staging {
		assert.Equal(t, "0700", fmt.Sprintf("%#o", m), "the staging directory")
	}
	e.noScratchLeft(t, host)
}

// dirOf is the parent of a sandbox path; a file directly under / has /.
// (Planted: i >= 0 for i > 0, which gave "" for /f.)
func TestDirOf(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]string{"/f": "/", "/a/f": "/a", "/a/b/f": "/a/b", "f": "/", "": "/"} {
		assert.Equal(t, want, dirOf(p), p)
	}
}

// newEnvWithExitingTar is an env whose sandbox tar is planted: writing to
// a sandbox file it reports a full disk, so the export streams through the
// terminal; writing to stdout it sends a valid archive of one file and then
// exits with rc.
func newEnvWithExitingTar(t *testing.T, rc int) (e *env, src string) {
	t.Helper()
	bin := t.TempDir()
	planted := filepath.Join(bin, "planted.tar")
	require.NoError(t, os.WriteFile(planted, buildTar(t, member{name: "f", typ: '0', body: "payload"}), 0o644))
	script := fmt.Sprintf("#!/bin/bash\nout=-\nwhile [ $# -gt 0 ]; do case \"$1\" in -f) out=$2; shift;; esac; shift; done\n"+
		"if [ \"$out\" != - ]; then echo 'tar: write error: No space left on device' >&2; exit 2; fi\ncat %s\nexit %d\n", planted, rc)
	writeFile(t, filepath.Join(bin, "tar"), script, 0o755)
	e = newEnvWith(t, map[string]string{"PATH": bin + ":" + os.Getenv("PATH")})
	// The terminal is a login shell, whose profile resets PATH.
	writeFile(t, filepath.Join(e.info.HomeDir, ".bash_profile"), "PATH="+bin+":$PATH\n", 0o644)
	src = filepath.Join(e.root, "ws")
	require.NoError(t, os.MkdirAll(src, 0o755))
	return e, src
}

// On the streamed export tar's exit 1 ("some files changed") is a warning
// and the archive is published; 2 and above is a failure and nothing is.
// (Planted: rc > 2 for rc > 1.)
func TestStreamedExportTarExitCodes(t *testing.T) {
	t.Parallel()
	for _, rc := range []int{0, 1, 2, 3} {
		t.Run(fmt.Sprint(rc), func(t *testing.T) {
			t.Parallel()
			e, src := newEnvWithExitingTar(t, rc)
			host := t.TempDir()
			dst := filepath.Join(host, "out")
			_, err := e.syncOut(t, Options{HostReserve: -1}, dirMapping(src, dst))
			assert.Positive(t, e.srv.CountRequests("POST", "/process/pty"), "streamed through the terminal")
			if rc <= 1 {
				require.NoError(t, err)
				assert.Equal(t, "payload", readFile(t, filepath.Join(dst, "f")))
				return
			}
			var ce *SandboxCommandError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, rc, ce.Exit)
			assert.Equal(t, StageStream, ce.Stage)
			assert.NoDirExists(t, dst, "nothing published")
			e.noScratchLeft(t, host)
		})
	}
}

// A directory export whose tar fails for another reason than a full disk
// fails the sync with exit 43, tar's words and the export stage, and
// streams nothing.
func TestDirectoryExportFailureNamesItsStage(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	writeFile(t, filepath.Join(bin, "tar"), "#!/bin/sh\necho 'tar: ./x: Cannot stat: Input/output error' >&2\nexit 2\n", 0o755)
	e := newEnvWith(t, map[string]string{"PATH": bin + ":" + os.Getenv("PATH")})
	src := filepath.Join(e.root, "ws")
	require.NoError(t, os.MkdirAll(src, 0o755))
	host := t.TempDir()
	_, err := e.syncOut(t, Options{Delta: DeltaOff}, dirMapping(src, filepath.Join(host, "out")))
	var ce *SandboxCommandError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 43, ce.Exit)
	assert.Equal(t, StageExport, ce.Stage)
	assert.Contains(t, ce.Detail, "Input/output error")
	assert.Zero(t, e.srv.CountRequests("POST", "/process/pty"), "nothing streamed")
	e.noScratchLeft(t, host)
}

// The looping path of a followed export is taken from find's report:
// a quoted name relative to the source, the quotes of the shortest
// quoted name (”) included; anything else as printed. (Planted: > 2 for
// >= 2 on the quoted name's length.)
func TestLoopErrorNamesThePath(t *testing.T) {
	t.Parallel()
	const src = "/w/src"
	for out, want := range map[string]string{
		"find: " + loopMarker + "; 'a/b' is part of the same file system loop as '.'.": "/w/src/a/b",
		"find: " + loopMarker + "; '' is part of the same file system loop as '.'.":    "/w/src",
		"find: " + loopMarker + "; 'x is part of the loop":                             "'x",
		"no marker": "no marker",
		"":          "/w/src",
	} {
		var ae *ArchiveError
		require.ErrorAs(t, loopError(src, out), &ae, out)
		assert.Equal(t, want, ae.Name, out)
	}
}

// A target without RunCommand can still sync an operation that has no
// post-upload commands; only one that has them is refused, before any
// transfer. (Planted: the command count dropped from the check.)
func TestRunCommandNeededOnlyForPostUploadCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.t.RunCommand = nil
	src := filepath.Join(t.TempDir(), "src")
	writeFile(t, filepath.Join(src, "a.txt"), "a", 0o644)
	res, err := e.syncIn(t, Options{}, dirMapping(src, e.root+"/in"))
	require.NoError(t, err)
	assert.EqualValues(t, 1, res[0].FilesTransferred)
	assert.Equal(t, "a", readFile(t, filepath.Join(e.root, "in", "a.txt")))

	_, err = SyncIn(t.Context(), e.t, []Operation{{ID: "c", Files: []Mapping{dirMapping(src, e.root+"/in2")},
		PostUploadCommands: []Command{{Command: "true"}}}}, Options{})
	require.ErrorIs(t, err, ErrInvalidOperation)
	assert.NoDirExists(t, filepath.Join(e.root, "in2"), "refused before any transfer")
}
