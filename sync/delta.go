package sync

import (
	"archive/tar"
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/daytonaworker/daytona-worker/internal/shell"
)

// DeltaMode chooses how SyncIn and SyncOut move a directory mapping
// (docs/sync.md#delta).
type DeltaMode string

const (
	// DeltaHash (the default) lists the target, compares type, mode, size,
	// mtime, owner and link count, and lets content hashes decide every
	// regular file the cheap fields call unchanged: a file whose content
	// changed is never skipped.
	DeltaHash DeltaMode = ""
	// DeltaQuick trusts size and mtime for regular files (rsync's quick
	// check; an operator's opt-in): a file changed with its size and
	// mtime kept on purpose is not moved. No hashes are computed.
	DeltaQuick DeltaMode = "quick"
	// DeltaOff always transfers the whole tree.
	DeltaOff DeltaMode = "off"
)

// Ways a directory mapping went (DirReport.Way).
const (
	WayDelta = "delta"
	WayFull  = "full"
)

// DirReport says how one directory mapping was transferred: only what
// differed (WayDelta), or the whole tree (WayFull) and why. TargetPath is
// the mapping's target (the sandbox's for SyncIn, the host's for SyncOut).
type DirReport struct {
	TargetPath string
	Way        string
	Reason     string // why the whole tree went; "" for a delta
	Listed     int64  // sandbox entries the listing held
	Unchanged  int64  // host entries left out because the sandbox had them
}

// deltaPlan is what a delta sync sends: the member names that differ
// (directories without their trailing slash).
type deltaPlan struct {
	keep map[string]bool
	// chmodRoot is set when the target directory's mode differs from the
	// mapping's: an empty delta still needs its chmod.
	chmodRoot bool
}

func (d *deltaPlan) keepFn() func(string) bool {
	if d == nil {
		return nil
	}
	return func(name string) bool { return d.keep[name] }
}

// report records a mapping's DirReport for the operation's result.
func (o Options) report(r DirReport) {
	if o.call == nil {
		return
	}
	o.call.mu.Lock()
	o.call.reports = append(o.call.reports, r)
	o.call.mu.Unlock()
}

// amendReport changes the way and reason of the last report recorded: a
// delta that had to move the whole tree after all.
func (o Options) amendReport(way, reason string) {
	if o.call == nil {
		return
	}
	o.call.mu.Lock()
	defer o.call.mu.Unlock()
	if n := len(o.call.reports); n > 0 {
		o.call.reports[n-1].Way, o.call.reports[n-1].Reason = way, reason
	}
}

// takeReports returns and clears the reports recorded so far.
func (o Options) takeReports() []DirReport {
	if o.call == nil {
		return nil
	}
	o.call.mu.Lock()
	defer o.call.mu.Unlock()
	r := o.call.reports
	o.call.reports = nil
	return r
}

// planDelta decides how the mapping goes: a nil plan is the full transfer
// (the reason is in the report), otherwise the plan names what to send.
// listed reports whether a listing round trip was made. Nothing here fails
// the sync: whatever cannot be decided safely is sent.
func (t Target) planDelta(ctx context.Context, m Mapping, target string, o Options) (_ *deltaPlan, listed bool) {
	rep := DirReport{TargetPath: target, Way: WayFull}
	defer func() { o.report(rep) }()
	if o.Delta == DeltaOff {
		rep.Reason = "delta sync is off"
		return nil, false
	}
	l := t.listDelta(ctx, target, m, false, o, &rep)
	if l == nil {
		return nil, true
	}
	var plan *deltaPlan
	err := traced(ctx, "compare", func() (err error) {
		plan, rep.Unchanged, err = compareTree(ctx, m, l, o)
		return err
	})
	if err != nil {
		rep.Reason = clip(err.Error())
		return nil, true
	}
	rep.Way = WayDelta
	return plan, true
}

// listDelta makes a delta's listing of dir (syncIn's target, syncOut's
// source, out) and returns it; nil when the mapping goes the full way,
// with the reason in rep. rep.Listed counts what was listed.
func (t Target) listDelta(ctx context.Context, dir string, m Mapping, out bool, o Options, rep *DirReport) *listing {
	var l *listing
	err := traced(ctx, "list", func() (err error) {
		lctx, cancel := withTimeout(ctx, o.transferTimeout())
		defer cancel()
		l, err = t.list(lctx, dir, m, out, o)
		return err
	})
	what, absent := "target", "the target does not exist yet"
	if out {
		what, absent = "source", "the source does not exist" // the full export reports it
	}
	switch {
	case err != nil:
		rep.Reason = clip(err.Error())
	case l.state == 'A':
		rep.Reason = absent
	case l.state == 'N':
		rep.Reason = "the " + what + " is not a directory"
	case l.state == 'T':
		rep.Reason = "the sandbox has no GNU find"
	default:
		rep.Listed = int64(len(l.entries))
		if o.Delta != DeltaQuick && !l.hashed {
			rep.Reason = "the sandbox has no sha256sum -z"
			return nil
		}
		return l
	}
	return nil
}

// deltaRefused is a comparison that found the delta unsafe or pointless.
type deltaRefused string

func (e deltaRefused) Error() string { return string(e) }

// compareTree walks the host tree exactly as pack does and keeps every
// member whose sandbox entry would not already be what extracting it
// leaves behind.
func compareTree(ctx context.Context, m Mapping, l *listing, o Options) (*deltaPlan, int64, error) {
	p, err := newPacker(ctx, m.SourcePath, m.Exclude, m.FollowSymlinks)
	if err != nil {
		return nil, 0, err
	}
	readOnly := m.Mode != nil && *m.Mode&0o222 == 0
	keep := map[string]bool{}
	var members int64
	var bytesAll, bytesSent int64
	var pending []hashJob // unchanged by the cheap fields: the hashes decide
	p.visit = func(h *tar.Header, abs string, fi fs.FileInfo) error {
		name := strings.TrimSuffix(h.Name, "/")
		members++
		bytesAll += h.Size
		if endsInSpace(name) {
			// A name component that ends in white space: the sandbox's
			// tools may not keep it apart from the name without it (tar
			// strips trailing blanks from the lines it reads), and an
			// equivalence run found such a tree's directory times
			// differing; the whole archive is sure.
			return deltaRefused("a name ends in white space")
		}
		e := l.entries[name]
		if h.Typeflag == tar.TypeDir && e != nil && e.typ == 'l' {
			// tar follows a link standing where a directory member goes
			// and writes the directory's members wherever it points,
			// possibly over other parts of the tree: only replaying the
			// whole archive is sure to end where the full sync would.
			return deltaRefused("a sandbox symlink stands where the host has a directory")
		}
		switch sameEntry(name, h, e, l, o, readOnly) {
		case verdictSame:
		case verdictHash:
			pending = append(pending, hashJob{name: name, abs: abs, size: h.Size, want: e.hash, fi: fi})
		default:
			keep[name] = true
			bytesSent += h.Size
		}
		return nil
	}
	if err := p.dir(m.SourcePath, ""); err != nil {
		return nil, 0, err
	}
	differ, err := hashAll(ctx, pending, o.settleTime())
	if err != nil {
		return nil, 0, err
	}
	for _, j := range differ {
		keep[j.name] = true
		bytesSent += j.size
	}
	// Writing an entry changes its directory's mtime; the full archive
	// would restore it afterwards (--delay-directory-restore), so the
	// directory's member travels along.
	var parents []string
	for name := range keep {
		if dir := path.Dir(name); dir != "." && !keep[dir] {
			parents = append(parents, dir)
		}
	}
	for _, dir := range parents {
		keep[dir] = true
	}
	if len(keep) > 0 && !o.deltaAnySize && (int64(len(keep))*2 > members || bytesSent*2 > bytesAll) {
		return nil, 0, deltaRefused("more than half of the tree changed")
	}
	plan := &deltaPlan{keep: keep}
	if root := l.entries[""]; m.Mode != nil && (root == nil || root.mode != *m.Mode&0o7777) {
		plan.chmodRoot = true
	}
	return plan, members - int64(len(keep)), nil
}

// Verdicts of sameEntry.
const (
	verdictDiffers = iota
	verdictSame
	verdictHash // the cheap fields agree; the content hash decides
)

// sameEntry decides whether the sandbox entry e at name already is what
// extracting the member h leaves behind, so the member can be left out:
// same type, mode, mtime to the second (tar never writes a fraction),
// owner (createdGID), and for a regular file size, a single link
// (extraction would cut a hard link) and content; for a symlink the same
// target.
func sameEntry(name string, h *tar.Header, e *sbEntry, l *listing, o Options, readOnly bool) int {
	if e == nil || e.mtimeSub || e.mtime != h.ModTime.Unix() || e.uid != l.uid || e.gid != l.createdGID(name) {
		return verdictDiffers
	}
	same := func(ok bool) int {
		if ok {
			return verdictSame
		}
		return verdictDiffers
	}
	switch h.Typeflag {
	case tar.TypeSymlink:
		return same(e.typ == 'l' && e.link == h.Linkname)
	case tar.TypeDir:
		return same(e.typ == 'd' && e.mode == l.extractMode(h.Mode))
	case tar.TypeReg:
	default:
		return verdictDiffers
	}
	want := l.extractMode(h.Mode)
	if !readOnly && h.Size >= directMinSize {
		want = uint32(h.Mode) & 0o7777 // placed by chmod, not by tar
	}
	switch {
	case e.typ != 'f' || e.mode != want || e.size != h.Size || e.nlink != 1:
		return verdictDiffers
	case o.Delta == DeltaQuick:
		return verdictSame
	case e.hash == "":
		return verdictDiffers // unreadable in the sandbox, say
	}
	return verdictHash
}

// createdGID is the group an entry tar writes at name ends with: its
// directory's when that directory is setgid (the kernel's rule for a new
// file), else the extracting user's. tar sets directory modes last
// (--delay-directory-restore), so the directory as listed, before the
// sync, decides. An equivalence run found the delta leaving a file of a
// setgid directory in the user's group where the full sync, which
// recreates it, gave it the directory's.
func (l *listing) createdGID(name string) int64 {
	dir := path.Dir(name)
	if dir == "." {
		dir = ""
	}
	if d := l.entries[dir]; d != nil && d.typ == 'd' && d.mode&0o2000 != 0 {
		return d.gid
	}
	return l.gid
}

// extractMode is the mode the sandbox's tar gives a member: the archive's
// bits as root (tar's --same-permissions default), less the umask for
// anyone else.
func (l *listing) extractMode(mode int64) uint32 {
	m := uint32(mode) & 0o7777
	if l.uid != 0 {
		m &^= l.umask
	}
	return m
}

// finishEmptyDelta ends a delta that sends nothing: only a mapping mode the
// target lacks is applied, in a round trip of its own; otherwise nothing
// more goes to the sandbox.
func (t Target) finishEmptyDelta(ctx context.Context, m Mapping, target string, plan *deltaPlan, o Options) error {
	if !plan.chmodRoot {
		return nil
	}
	tctx, cancel := withTimeout(ctx, o.transferTimeout())
	defer cancel()
	b := t.script(o)
	fmt.Fprintf(b, "t=$(mkconf %s) || exit $?\nchmod %o \"$t\" || exit 50\n", shell.Quote(target), *m.Mode&0o7777)
	return t.runPhase(tctx, "extractTarball", "Daytona syncIn extract command", b.String(), o)
}

// endsInSpace reports whether a component of the slash-separated name
// ends in a space or a tab.
func endsInSpace(name string) bool {
	for _, c := range strings.Split(name, "/") {
		if strings.HasSuffix(c, " ") || strings.HasSuffix(c, "\t") {
			return true
		}
	}
	return false
}
