package sync

import (
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/daytonaworker/daytona-worker/internal/shell"
)

// Reserved names. Every temporary name this package creates, on either
// side, is scratchPrefix + a lowercase UUID, optionally + ".tar":
//
//   - host: the temp sibling of a file target and the staging directory of
//     a directory target (host.go), both next to the target;
//   - sandbox: upload scratch files and export archives, direct children
//     of the sync root (sandbox.go).
//
// A worker killed mid-sync (SIGKILL, OOM, host crash) cannot remove them.
// They are swept once they are older than Options.StaleAfter, never
// packed by SyncIn and never exported by SyncOut (the sandbox tar excludes
// the prefix).
const reservedTarSuffix = ".tar"

// reservedName reports whether name is exactly a name this package
// creates: the prefix, a canonical lowercase UUID, and optionally ".tar".
// Anything else that merely starts with the prefix is the user's and is
// never swept.
func reservedName(name string) bool {
	rest, ok := strings.CutPrefix(name, scratchPrefix)
	if !ok {
		return false
	}
	rest = strings.TrimSuffix(rest, reservedTarSuffix)
	if len(rest) != 36 {
		return false
	}
	u, err := uuid.Parse(rest)
	return err == nil && u.String() == rest
}

// sweepHost removes stale reserved names directly inside the host
// directory dir, once per call per directory, before the call writes its
// own temp there. It is best effort: a leftover that cannot be removed
// must not fail a sync that would otherwise work. Removal goes through
// os.Root, so a reserved name that is a symlink is removed itself and
// nothing outside dir is touched. Staleness is the entry's modification
// time against Options.Now: this package never sets the time of the names
// themselves (only of files inside a staging directory), so a live name's
// time is when it was created or last written.
func (o Options) sweepHost(dir string) {
	if o.call != nil {
		o.call.mu.Lock()
		done := o.call.hostSwept[dir]
		if o.call.hostSwept == nil {
			o.call.hostSwept = map[string]bool{}
		}
		o.call.hostSwept[dir] = true
		o.call.mu.Unlock()
		if done {
			return
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return
	}
	defer root.Close()
	d, err := root.Open(".")
	if err != nil {
		return
	}
	defer d.Close()
	cutoff := o.now().Add(-o.staleAfter())
	for {
		// Batches: a directory with a million entries is read, never held.
		names, rerr := d.Readdirnames(256)
		for _, n := range names {
			if !reservedName(n) {
				continue
			}
			fi, err := root.Lstat(n)
			if err != nil || !fi.ModTime().Before(cutoff) {
				continue // gone already, or fresh: maybe a concurrent call's
			}
			if fi.IsDir() {
				_ = root.RemoveAll(n)
			} else {
				_ = root.Remove(n)
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				return
			}
			break
		}
	}
}

// uuidGlob matches a lowercase UUID in a shell/find pattern.
var uuidGlob = func() string {
	hex := "[0-9a-f]"
	var b strings.Builder
	for i, n := range []int{8, 4, 4, 4, 12} {
		if i > 0 {
			b.WriteByte('-')
		}
		b.WriteString(strings.Repeat(hex, n))
	}
	return b.String()
}()

// sandboxSweep returns, the first time it is called in a call, a script
// line removing stale reserved scratch files directly under the canonical
// root ($root, set by canonPrelude); "" afterwards. It rides along with the
// call's first guard/promote/extract script, so it costs no round trip.
// Only regular files are matched (find does not follow links, so a
// reserved name that is a symlink is left alone) and failures are ignored:
// the sweep must never change a script's exit status. -mmin is in minutes,
// rounded up, so a name is never swept earlier than StaleAfter.
func (o Options) sandboxSweep() string {
	if o.call != nil {
		o.call.mu.Lock()
		done := o.call.sandboxSwept
		o.call.sandboxSwept = true
		o.call.mu.Unlock()
		if done {
			return ""
		}
	}
	minutes := int64((o.staleAfter() + time.Minute - 1) / time.Minute) // rounded up
	name := shell.Quote(scratchPrefix + uuidGlob)
	// The find runs only when the glob (the shell's own: no process)
	// matched some reserved name; unmatched, it stays the pattern.
	glob := `"$root"/` + scratchPrefix + "*"
	return "set -- " + glob + "\ncase $1 in \"$root/" + scratchPrefix + "*\") ;; *) find \"$root\" -mindepth 1 -maxdepth 1 -type f \\( -name " + name + " -o -name " + shell.Quote(scratchPrefix+uuidGlob+reservedTarSuffix) +
		" \\) -mmin +" + strconv.FormatInt(minutes, 10) + " -exec rm -f -- {} + >/dev/null 2>&1;; esac\n"
}
