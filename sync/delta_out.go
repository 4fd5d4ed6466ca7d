package sync

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/daytonaworker/daytona-worker/daytona"
)

// The delta syncOut of a directory mapping (docs/sync.md#delta): the
// sandbox source is listed (the listing of delta_list.go), the host target
// is walked, and the export's tar runs as always (same confinement, same
// excludes, the same verifier and host publication) with the entries the
// host already holds left out by literal, anchored excludes. The listing
// only ever decides what is left out of an archive the sandbox builds
// from its real tree: a lying listing can withhold the sandbox's own
// data, never write anything a full export would not.

// outPlan is what a delta export leaves out.
type outPlan struct {
	// skip are the member names (relative, no "./") of regular files and
	// symlinks the host target already holds exactly as extracting them
	// would leave them. Directories are never skipped: tar would leave
	// out their whole subtree.
	skip []string
	// unsafe are the listed symlinks whose targets are absolute or leave
	// the tree: the full export omits them after a first pass; the delta
	// omits them at once.
	unsafe []string
	// empty: nothing at all differs, so no archive is needed.
	empty bool
	// sameDirs are the listed directories the host target already holds
	// as directories with the same permission bits: merging one changes
	// nothing.
	sameDirs map[string]bool
	// listing is the sandbox listing the plan was made from.
	listing *listing
	// complete: the listing holds everything the export's tar would
	// archive (changesAllowed), so what differs can be written from the
	// listing and its changes archive (applyChanges).
	complete bool
}

// hostEntry is one entry of the host target.
type hostEntry struct {
	abs string
	fi  fs.FileInfo
}

// planOut decides how an outbound directory mapping goes: nil is the full
// export (the reason is in the report); listed reports whether a listing
// round trip was made. Nothing here fails the sync.
func (t Target) planOut(ctx context.Context, m Mapping, src string, o Options) (_ *outPlan, listed bool) {
	rep := DirReport{TargetPath: m.TargetPath, Way: WayFull}
	defer func() { o.report(rep) }()
	switch {
	case o.Delta == DeltaOff:
		rep.Reason = "delta sync is off"
		return nil, false
	case m.FollowSymlinks:
		// tar -h archives what links point to; the listing describes the
		// links themselves.
		rep.Reason = "links are followed"
		return nil, false
	}
	target, err := hostTarget(m.TargetPath)
	if err != nil {
		rep.Reason = "the host target does not exist yet"
		if !errors.Is(err, fs.ErrNotExist) {
			rep.Reason = "the host target is not a directory"
		}
		return nil, false
	}
	l := t.listDelta(ctx, src, m, true, o, &rep)
	if l == nil {
		return nil, true
	}
	var plan *outPlan
	err = traced(ctx, "compare", func() (err error) {
		plan, err = compareOut(ctx, m, target, l, o)
		return err
	})
	if err != nil {
		rep.Reason = clip(err.Error())
		return nil, true
	}
	rep.Way, rep.Unchanged = WayDelta, int64(len(plan.skip))
	return plan, true
}

// hostTarget resolves the host target as newHostDir does (a target that
// is itself a symlink is the host's own choice) and requires a directory.
func hostTarget(target string) (string, error) {
	abs, err := filepath.Abs(target)
	if err != nil {
		return "", err
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", errors.New("not a directory")
	}
	return abs, nil
}

// walkHost lists the host target's entries whose names the sandbox listed,
// descending only into real directories the sandbox also has: an entry
// below a host symlink or file is not where the export's merge would find
// it, so it counts as missing.
func walkHost(ctx context.Context, abs, rel string, l *listing, out map[string]hostEntry) error {
	ents, err := os.ReadDir(abs)
	if err != nil {
		return err
	}
	for _, d := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := path.Join(rel, d.Name())
		e := l.entries[name]
		if e == nil {
			continue
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		p := filepath.Join(abs, d.Name())
		out[name] = hostEntry{abs: p, fi: fi}
		if fi.IsDir() && e.typ == 'd' {
			if err := walkHost(ctx, p, name, l, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// compareOut compares the listing of the sandbox source with the host
// target and returns what the export may leave out.
func compareOut(ctx context.Context, m Mapping, target string, l *listing, o Options) (*outPlan, error) {
	host := map[string]hostEntry{}
	if err := walkHost(ctx, target, "", l, host); err != nil {
		return nil, err
	}
	// What a file the export writes ends up owned by: the worker, and the
	// group a new file gets in the staging directory (made in the
	// target's parent, so a setgid parent decides).
	uid, gid := uint32(os.Geteuid()), uint32(os.Getegid())
	if pfi, err := os.Stat(filepath.Dir(target)); err == nil && pfi.Mode()&fs.ModeSetgid != 0 {
		if st, ok := pfi.Sys().(*syscall.Stat_t); ok {
			gid = st.Gid
		}
	}
	x := newExtractor(nil, o.Limits)
	plan := &outPlan{sameDirs: map[string]bool{}}
	var files, differ, bytesAll, bytesDiffer int64
	var pending []hashJob
	var omitCost int
	dirsSame := true
	for name, e := range l.entries {
		if name == "" {
			continue
		}
		h, onHost := host[name]
		switch e.typ {
		case 'd':
			// Directories always travel (as bare headers); they only
			// decide whether an archive is needed at all.
			if !onHost || !h.fi.IsDir() || h.fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != fs.FileMode(e.mode&0o777) {
				dirsSame = false
			} else {
				plan.sameDirs[name] = true
			}
			continue
		case 's':
			continue // tar archives no sockets
		case 'f', 'l':
		default:
			// FIFOs and devices make the full export fail; so must this.
			return nil, deltaRefused("the sandbox tree holds a special file")
		}
		files++
		bytesAll += e.size
		if e.typ == 'l' {
			if x.checkLink(name, e.link) != nil {
				omitCost += len(excludeArg(name))
				if omitCost > maxOmitBytes {
					return nil, deltaRefused("too many unsafe links")
				}
				plan.unsafe = append(plan.unsafe, name)
				continue
			}
		}
		same := onHost && skippable(name) && ownedAs(h.fi, uid, gid)
		if same && e.typ == 'l' {
			link, err := os.Readlink(h.abs)
			same = err == nil && h.fi.Mode()&fs.ModeSymlink != 0 && link == e.link
		} else if same {
			// What extraction leaves: the permission bits alone, the
			// mtime in whole seconds (a GNU-format header), one link.
			st, _ := h.fi.Sys().(*syscall.Stat_t)
			same = h.fi.Mode().IsRegular() && st != nil && st.Nlink == 1 &&
				h.fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) == fs.FileMode(e.mode&0o777) &&
				h.fi.Size() == e.size && e.mtime >= 0 && h.fi.ModTime().UnixNano() == e.mtime*1e9
			switch {
			case !same || o.Delta == DeltaQuick:
			case e.hash == "":
				same = false // unreadable in the sandbox, say
			default:
				pending = append(pending, hashJob{name: name, abs: h.abs, size: e.size, want: e.hash, fi: h.fi})
				continue
			}
		}
		if same {
			plan.skip = append(plan.skip, name)
		} else {
			differ++
			bytesDiffer += e.size
		}
	}
	differs, err := hashAll(ctx, pending, o.settleTime())
	if err != nil {
		return nil, err
	}
	gone := map[string]bool{}
	for _, j := range differs {
		gone[j.name] = true
		differ++
		bytesDiffer += j.size
	}
	for _, j := range pending {
		if !gone[j.name] {
			plan.skip = append(plan.skip, j.name)
		}
	}
	if differ > 0 && !o.deltaAnySize && (differ*2 > files || bytesDiffer*2 > bytesAll) {
		return nil, deltaRefused("more than half of the tree changed")
	}
	// Nothing to download at all only when the listing holds everything
	// the export's tar would archive: find prunes an exclude without a
	// slash exactly where tar does; other patterns may differ, and then
	// the archive (of directories and what the listing missed) still runs.
	plan.listing, plan.complete = l, changesAllowed(m)
	plan.empty = differ == 0 && dirsSame && plan.complete
	return plan, nil
}

// ownedAs reports whether a host entry has the owner and group a freshly
// extracted one would.
func ownedAs(fi fs.FileInfo, uid, gid uint32) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == uid && st.Gid == gid
}

// skippable reports whether name can be a line of tar's exclude file: tar
// reads it line by line and drops a line's trailing white space, so a name
// with a newline, or ending in white space, would exclude another name or
// none. Such names are never skipped: they are downloaded again.
func skippable(name string) bool {
	if strings.IndexByte(name, '\n') >= 0 {
		return false
	}
	switch name[len(name)-1] {
	case ' ', '\t', '\v', '\f', '\r':
		return false
	}
	return true
}

// skipList is the tar exclude file (-X, one literal name per line) of a
// delta export; its names are skippable.
func skipList(skip []string) []byte {
	var b strings.Builder
	for _, n := range skip {
		b.WriteString("./" + n + "\n")
	}
	return []byte(b.String())
}

// uploadSkipList puts the exclude file of a delta export at a reserved
// scratch name in the sandbox.
func (t Target) uploadSkipList(ctx context.Context, list []byte, o Options) (string, error) {
	name := scratchName(t.Root, "")
	tctx, cancel := withTimeout(ctx, o.transferTimeout())
	defer cancel()
	res, _, err := t.Client.Files.Upload(tctx, t.Sandbox, []daytona.UploadFile{{Path: name, Content: bytes.NewReader(list)}})
	if err == nil && len(res.Errors) > 0 {
		err = errors.New(clip(strings.Join(res.Errors, "; ")))
	}
	if err != nil {
		_ = t.removeScratch(ctx, name)
		return "", &transferError{msg: "Daytona syncOut upload of the delta's exclude list failed", err: err}
	}
	return name, nil
}
