package sync

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func reserved(suffix string) string { return scratchPrefix + uuid.NewString() + suffix }

// age sets p's modification time to d ago (without following a link).
func age(t testing.TB, p string, d time.Duration) {
	t.Helper()
	when := time.Now().Add(-d)
	require.NoError(t, os.Chtimes(p, when, when))
}

// lutimes sets a symlink's own modification time (utimensat with
// AT_SYMLINK_NOFOLLOW; the syscall package has no wrapper).
func lutimes(p string, when time.Time) error {
	b, err := syscall.BytePtrFromString(p)
	if err != nil {
		return err
	}
	ts := [2]syscall.Timespec{syscall.NsecToTimespec(when.UnixNano()), syscall.NsecToTimespec(when.UnixNano())}
	const atFDCWD, atSymlinkNofollow = -100, 0x100
	fd := atFDCWD
	if _, _, e := syscall.Syscall6(syscall.SYS_UTIMENSAT, uintptr(fd), uintptr(unsafe.Pointer(b)), uintptr(unsafe.Pointer(&ts[0])), atSymlinkNofollow, 0, 0); e != 0 {
		return e
	}
	return nil
}

func TestReservedName(t *testing.T) {
	t.Parallel()
	id := uuid.NewString()
	for name, want := range map[string]bool{
		scratchPrefix + id:                                     true,
		scratchPrefix + id + ".tar":                            true,
		scratchPrefix + "notes":                                false,
		scratchPrefix + id + ".bak":                            false,
		scratchPrefix + id[:35]:                                false,
		scratchPrefix + "AAAAAAAA-AAAA-AAAA-AAAA-AAAAAAAAAAAA": false, // not how we spell a UUID
		"x" + scratchPrefix + id:                               false,
		scratchPrefix + id + "/x":                              false,
	} {
		assert.Equal(t, want, reservedName(name), name)
	}
}

// TestSyncOutSweepsStaleHostLeftovers: the partial temp file and staging
// directory a killed syncOut left next to a host target are removed before
// the next syncOut writes there; a fresh one (a concurrent call's), a user
// file that merely shares the prefix and the target of a reserved-named
// symlink are kept.
func TestSyncOutSweepsStaleHostLeftovers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "a.txt"), "alpha", 0o644)
	require.NoError(t, os.MkdirAll(filepath.Join(e.root, "dir"), 0o755))
	writeFile(t, filepath.Join(e.root, "dir", "f"), "f", 0o644)
	host := t.TempDir()
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "precious"), "keep", 0o644)

	staleFile := filepath.Join(host, reserved(""))
	writeFile(t, staleFile, "partial download", 0o600)
	age(t, staleFile, 30*time.Hour)
	staleDir := filepath.Join(host, reserved(""))
	writeFile(t, filepath.Join(staleDir, "deep", "x"), "partial tree", 0o600)
	age(t, staleDir, 30*time.Hour)
	staleLink := filepath.Join(host, reserved(""))
	require.NoError(t, os.Symlink(outside, staleLink))
	when := time.Now().Add(-30 * time.Hour)
	require.NoError(t, lutimes(staleLink, when))
	fresh := filepath.Join(host, reserved(""))
	writeFile(t, fresh, "a concurrent call's", 0o600)
	user := filepath.Join(host, scratchPrefix+"notes")
	writeFile(t, user, "the user's own", 0o644)
	age(t, user, 30*time.Hour)

	_, err := SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{
		{SourcePath: e.root + "/a.txt", TargetPath: filepath.Join(host, "a.txt"), Kind: KindFile},
		{SourcePath: e.root + "/dir", TargetPath: filepath.Join(host, "dir"), Kind: KindDirectory},
	}}}, Options{})
	require.NoError(t, err)
	assert.Equal(t, "alpha", readFile(t, filepath.Join(host, "a.txt")))
	assert.NoFileExists(t, staleFile)
	assert.NoDirExists(t, staleDir)
	_, lerr := os.Lstat(staleLink)
	assert.ErrorIs(t, lerr, os.ErrNotExist)
	assert.Equal(t, "keep", readFile(t, filepath.Join(outside, "precious")), "a swept link's target is untouched")
	assert.Equal(t, "a concurrent call's", readFile(t, fresh))
	assert.Equal(t, "the user's own", readFile(t, user))
}

// TestHostSweepUsesTheInjectedClock: staleness is measured with
// Options.Now against Options.StaleAfter, not the machine's clock; with
// none set, a leftover is stale at 25 h. (Pins a default: DefaultStaleAfter.)
func TestHostSweepUsesTheInjectedClock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	left := filepath.Join(dir, reserved(""))
	writeFile(t, left, "x", 0o600)
	base := time.Now()
	o := Options{Now: func() time.Time { return base.Add(25*time.Hour - time.Minute) }}
	o.sweepHost(dir)
	assert.FileExists(t, left, "younger than StaleAfter by the injected clock")
	o.Now = func() time.Time { return base.Add(25*time.Hour + time.Minute) }
	o.sweepHost(dir)
	assert.NoFileExists(t, left)

	left = filepath.Join(dir, reserved(""))
	writeFile(t, left, "x", 0o600)
	o = Options{StaleAfter: time.Hour, Now: func() time.Time { return base.Add(2 * time.Hour) }}
	o.sweepHost(dir)
	assert.NoFileExists(t, left, "StaleAfter is honoured")
}

func TestDefaultStaleAfterOutlastsACall(t *testing.T) {
	t.Parallel()
	// The provider caps timeoutMs at 24 h and adds a 15 s answer margin;
	// scratch cleanup then has up to cleanupBudget.
	assert.Greater(t, DefaultStaleAfter, 24*time.Hour+15*time.Second+cleanupBudget)
}

// TestSyncInNeverPacksReservedNames: leftovers in a host directory never
// travel into the sandbox, whatever their age.
func TestSyncInNeverPacksReservedNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "keep.txt"), "keep", 0o644)
	writeFile(t, filepath.Join(src, reserved("")), "partial", 0o600)
	writeFile(t, filepath.Join(src, "sub", reserved(".tar")), "partial", 0o600)
	writeFile(t, filepath.Join(src, reserved(""), "staged"), "partial tree", 0o600)
	writeFile(t, filepath.Join(src, "sub", scratchPrefix+"anything"), "reserved prefix", 0o600)
	big := filepath.Join(src, reserved(""))
	require.NoError(t, os.WriteFile(big, make([]byte, directMinSize), 0o600)) // would go direct
	_, err := e.syncIn(t, Options{}, dirMapping(src, e.root+"/x"))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"keep.txt": "file 644 keep", "sub": "dir 755"}, snapshotTree(t, filepath.Join(e.root, "x")))
}

// TestSandboxSweepAtTheStartOfEachSync: stale scratch files a killed call
// left in the sandbox root are removed by the first script of the next
// call, in both directions, with no extra round trip; fresh ones and
// non-reserved names stay.
func TestSandboxSweepAtTheStartOfEachSync(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"in", "out"} {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			stale := []string{filepath.Join(e.root, reserved("")), filepath.Join(e.root, reserved(".tar"))}
			for _, p := range stale {
				writeFile(t, p, "leftover", 0o600)
				age(t, p, 30*time.Hour)
			}
			fresh := filepath.Join(e.root, reserved(".tar"))
			writeFile(t, fresh, "a concurrent call's", 0o600)
			user := filepath.Join(e.root, scratchPrefix+"notes")
			writeFile(t, user, "the user's", 0o600)
			age(t, user, 30*time.Hour)
			staleDir := filepath.Join(e.root, reserved(""))
			require.NoError(t, os.Mkdir(staleDir, 0o755))
			age(t, staleDir, 30*time.Hour)
			host := t.TempDir()
			writeFile(t, filepath.Join(host, "a.txt"), "alpha", 0o644)
			writeFile(t, filepath.Join(e.root, "b.txt"), "beta", 0o644)
			e.srv.ResetRequests()
			var err error
			if dir == "in" {
				_, err = e.syncIn(t, Options{}, fileMapping(filepath.Join(host, "a.txt"), e.root+"/a.txt"))
				assert.Equal(t, 1, e.srv.CountRequests("POST", "/process/execute"), "the sweep rides on the promote script")
			} else {
				_, err = e.syncOut(t, Options{}, fileMapping(e.root+"/b.txt", filepath.Join(host, "b.txt")))
				assert.Equal(t, 2, e.srv.CountRequests("POST", "/process/execute"), "guard script and snapshot removal, as before")
			}
			require.NoError(t, err)
			for _, p := range stale {
				assert.NoFileExists(t, p)
			}
			assert.FileExists(t, fresh)
			assert.FileExists(t, user)
			assert.DirExists(t, staleDir, "only regular files are swept in the sandbox")
			assert.Equal(t, 1, e.srv.CountDispatches("-mmin +1500"), "swept once per call")
		})
	}
}
