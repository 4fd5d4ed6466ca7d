package sync

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/daytonaworker/daytona-worker/internal/shell"
)

// Limits bounds a sandbox-authored archive (docs/behavior.md#sync-out-dirs, the host-side listing check). Zero fields take
// the defaults below.
type Limits struct {
	// MaxEntries is the most members an archive may hold.
	MaxEntries int64
	// MaxEntrySize is the largest regular-file member, in bytes.
	MaxEntrySize int64
	// MaxTotal caps the sum of regular-file sizes (0 = no cap; the terminal
	// fallback sets the sandbox disk allocation).
	MaxTotal int64
	// MaxNameLen bounds member names and link targets, in bytes.
	MaxNameLen int
	// MaxDepth bounds the number of path components of a member.
	MaxDepth int
}

// Default archive limits.
const (
	DefaultMaxEntries   = 5_000_000
	DefaultMaxEntrySize = 1 << 40
	DefaultMaxNameLen   = 4096
	DefaultMaxDepth     = 256
)

func (l Limits) withDefaults() Limits {
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxEntrySize <= 0 {
		l.MaxEntrySize = DefaultMaxEntrySize
	}
	if l.MaxNameLen <= 0 {
		l.MaxNameLen = DefaultMaxNameLen
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// Refusal reasons (the wording of docs/behavior.md#sync-out-dirs). The
// limits' reasons are exported: callers tell a limit from an unsafe entry
// by them (the host's sync diagnostics do).
const (
	reasonEscape     = "tarball member that escapes the extraction dir"
	reasonLinkEscape = "tarball link whose target escapes the extraction dir"
	reasonHardlink   = "hardlink entry"
	reasonSpecial    = "device or special file entry"
	reasonDuplicate  = "duplicate tarball member"
	ReasonOversized  = "oversized tarball member"
	ReasonTooMany    = "tarball with too many entries"
	reasonNotDir     = "tarball member below a non-directory"
	reasonUnknown    = "tarball entry of an unsupported type"
	ReasonTotal      = "tarball larger than the allowed total"
)

// typeRegV7 is the pre-POSIX regular-file flag ('\x00', the deprecated
// tar.TypeRegA) that old tar writers still emit.
const typeRegV7 = '\x00'

// extractStats counts what an extraction wrote.
type extractStats struct {
	Files int64 // non-directory members (files and symlinks)
	Bytes int64 // regular-file payload bytes
}

// extractor writes verified members of one archive under a private staging
// root. Every member is checked before anything is written for it; names are
// canonicalised so duplicates cannot hide behind "./" or "a/./b"; parents
// must be directories this extractor created (so no member is ever written
// through a symlink, even one inside the tree); and os.Root confines every
// filesystem call to the staging directory regardless.
type extractor struct {
	root     *os.Root
	lim      Limits
	dirs     map[string]bool // created dirs; true = explicit member
	dirModes []dirMode
	entries  int64
	stats    extractStats
	buf      []byte
	// beforeWrite, if set, is called before each payload write (host
	// free-space reserve).
	beforeWrite func(n int) error

	// omitLinks is the first pass of a directory export: a symlink whose
	// target is refused (absolute, escaping, inner "..") is recorded and
	// skipped instead of ending the extraction, so the caller learns
	// whether unsafe links are the archive's only fault and which ones to
	// leave out of a rebuilt archive. Every other check is unchanged, a
	// later member named like an omitted link is a duplicate, and one
	// below it is refused as below a non-directory, so a hostile tree gains
	// nothing: the staging tree is discarded either way.
	omitLinks bool
	omitted   map[string]bool
	omitNames []string      // cleaned member names, archive order
	omitBytes int           // their cost as tar exclude arguments
	omitFirst *ArchiveError // the refusal the first omitted link earned
	// dry: payloads are read and discarded (names, types and sizes still
	// checked). Set at the first omitted link: that staging tree will be
	// thrown away, so writing the rest of it would be wasted host I/O.
	dry bool
}

// maxOmitBytes bounds the exclude arguments an export retry may add to its
// sandbox script. The script travels as one argv string, which Linux caps
// at 128 KiB (MAX_ARG_STRLEN); half of that leaves room for the rest. An
// archive with more unsafe links than fit is refused as before.
const maxOmitBytes = 64 << 10

// excludeArg is the tar option that leaves one member out of a rebuilt
// export, literal and anchored (see tarCreate).
func excludeArg(name string) string { return " --exclude=" + shell.Quote("./"+name) }

// omit records an unsafe link in the first pass, or returns its refusal
// when the retry budget is spent.
func (x *extractor) omit(name string, refusal error) error {
	cost := len(excludeArg(name))
	var ae *ArchiveError
	if !errors.As(refusal, &ae) || x.omitBytes+cost > maxOmitBytes {
		return refusal
	}
	if x.omitted == nil {
		x.omitted = map[string]bool{}
	}
	x.omitted[name] = true
	x.omitNames = append(x.omitNames, name)
	x.omitBytes += cost
	if x.omitFirst == nil {
		x.omitFirst = ae
	}
	x.dry = true
	return nil
}

type dirMode struct {
	name string
	mode fs.FileMode
}

func newExtractor(root *os.Root, lim Limits) *extractor {
	return &extractor{root: root, lim: lim.withDefaults(), dirs: map[string]bool{}, buf: make([]byte, 64<<10)}
}

// extract reads a whole tar stream. It returns on the first refused member;
// the caller discards the staging directory then.
func (x *extractor) extract(ctx context.Context, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: reading archive: %w", ErrUnsafeArchive, err)
		}
		if err := x.member(hdr, tr); err != nil {
			return err
		}
	}
}

// cleanMember canonicalises a member name, refusing absolute names, ".."
// components, NUL bytes and oversized names. "" means the archive root
// ("./").
func (x *extractor) cleanMember(name string) (string, error) {
	if len(name) > x.lim.MaxNameLen {
		return "", &ArchiveError{Reason: ReasonOversized, Name: name}
	}
	if name == "" || strings.ContainsRune(name, 0) || strings.HasPrefix(name, "/") {
		return "", &ArchiveError{Reason: reasonEscape, Name: name}
	}
	var parts []string
	for _, seg := range strings.Split(name, "/") {
		switch seg {
		case "", ".":
			continue
		case "..":
			return "", &ArchiveError{Reason: reasonEscape, Name: name}
		}
		parts = append(parts, seg)
	}
	if len(parts) > x.lim.MaxDepth {
		return "", &ArchiveError{Reason: ReasonOversized, Name: name}
	}
	return strings.Join(parts, "/"), nil
}

// checkLink accepts a symlink target only if it is relative, its ".."
// components all lead (so lexical resolution cannot be fooled by a symlink
// followed by ".."), and it stays inside the tree from the link's directory.
// Parents are real directories (see ensureParents), so walking up is sound;
// the downward part may cross other links, each confined the same way.
func (x *extractor) checkLink(name, target string) error {
	if target == "" || len(target) > x.lim.MaxNameLen || strings.ContainsRune(target, 0) || strings.HasPrefix(target, "/") {
		return &ArchiveError{Reason: reasonLinkEscape, Name: name + " -> " + target}
	}
	depth := strings.Count(name, "/") // components of the link's directory
	ups, down := 0, false
	for _, seg := range strings.Split(target, "/") {
		switch seg {
		case "", ".":
		case "..":
			if down {
				return &ArchiveError{Reason: reasonLinkEscape, Name: name + " -> " + target}
			}
			ups++
		default:
			down = true
		}
	}
	if ups > depth {
		return &ArchiveError{Reason: reasonLinkEscape, Name: name + " -> " + target}
	}
	return nil
}

// ensureParents creates the missing parent directories of name; an
// existing parent must be a directory this extraction created.
func (x *extractor) ensureParents(name string) error {
	dir := path.Dir(name)
	if dir == "." {
		return nil
	}
	if _, ok := x.dirs[dir]; ok {
		return nil
	}
	if x.omitted[dir] {
		return &ArchiveError{Reason: reasonNotDir, Name: name}
	}
	if err := x.ensureParents(dir); err != nil {
		return err
	}
	if err := x.root.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return &ArchiveError{Reason: reasonNotDir, Name: name}
		}
		return err
	}
	x.dirs[dir] = false
	return nil
}

func (x *extractor) member(hdr *tar.Header, r io.Reader) error {
	x.entries++
	if x.entries > x.lim.MaxEntries {
		return &ArchiveError{Reason: ReasonTooMany, Name: hdr.Name}
	}
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		return nil // PAX global defaults: nothing to write
	case tar.TypeLink:
		return &ArchiveError{Reason: reasonHardlink, Name: hdr.Name + " link to " + hdr.Linkname}
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return &ArchiveError{Reason: reasonSpecial, Name: hdr.Name}
	case tar.TypeReg, typeRegV7, tar.TypeGNUSparse, tar.TypeCont, tar.TypeDir, tar.TypeSymlink:
	default:
		return &ArchiveError{Reason: reasonUnknown, Name: hdr.Name}
	}
	name, err := x.cleanMember(hdr.Name)
	if err != nil {
		return err
	}
	if x.omitted[name] {
		return &ArchiveError{Reason: reasonDuplicate, Name: hdr.Name}
	}
	perm := fs.FileMode(hdr.Mode) & fs.ModePerm // never setuid/setgid/sticky from a sandbox
	if hdr.Typeflag == tar.TypeDir {
		if name == "" {
			return nil // "./": the target itself keeps its own mode
		}
		if explicit, ok := x.dirs[name]; ok {
			if explicit {
				return &ArchiveError{Reason: reasonDuplicate, Name: hdr.Name}
			}
		} else {
			if err := x.ensureParents(name); err != nil {
				return err
			}
			if err := x.root.Mkdir(name, 0o700); err != nil {
				if errors.Is(err, fs.ErrExist) {
					return &ArchiveError{Reason: reasonDuplicate, Name: hdr.Name}
				}
				return err
			}
		}
		x.dirs[name] = true
		x.dirModes = append(x.dirModes, dirMode{name, perm})
		return nil
	}
	if name == "" {
		return &ArchiveError{Reason: reasonEscape, Name: hdr.Name}
	}
	if _, ok := x.dirs[name]; ok {
		return &ArchiveError{Reason: reasonDuplicate, Name: hdr.Name}
	}
	if err := x.ensureParents(name); err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeSymlink {
		if err := x.checkLink(name, hdr.Linkname); err != nil {
			if x.omitLinks {
				return x.omit(name, err)
			}
			return err
		}
		if err := x.root.Symlink(hdr.Linkname, name); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return &ArchiveError{Reason: reasonDuplicate, Name: hdr.Name}
			}
			return err
		}
		x.stats.Files++
		return nil
	}
	if hdr.Size < 0 || hdr.Size > x.lim.MaxEntrySize {
		return &ArchiveError{Reason: ReasonOversized, Name: hdr.Name}
	}
	if x.lim.MaxTotal > 0 && x.stats.Bytes+hdr.Size > x.lim.MaxTotal {
		return &ArchiveError{Reason: ReasonTotal, Name: hdr.Name}
	}
	// O_EXCL: a second member with this name is a duplicate, never an
	// overwrite; O_NOFOLLOW on top of os.Root's own confinement.
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return &ArchiveError{Reason: reasonDuplicate, Name: hdr.Name}
		}
		return err
	}
	var n int64
	if x.dry {
		// The file exists (empty) so duplicates are still caught.
		n, err = io.CopyBuffer(io.Discard, r, x.buf)
		cerr := f.Close()
		if err == nil && n != hdr.Size {
			err = fmt.Errorf("%w: short member %q", ErrUnsafeArchive, clip(hdr.Name))
		}
		if err == nil {
			err = cerr
		}
		return err
	}
	n, err = writeSparse(f, r, x.buf, x.beforeWrite)
	if err == nil && n != hdr.Size {
		err = fmt.Errorf("%w: short member %q", ErrUnsafeArchive, clip(hdr.Name))
	}
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && !hdr.ModTime.IsZero() {
		// Through the descriptor: no second path walk.
		tv := []syscall.Timeval{syscall.NsecToTimeval(time.Now().UnixNano()), syscall.NsecToTimeval(hdr.ModTime.UnixNano())}
		_ = syscall.Futimes(int(f.Fd()), tv)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	x.stats.Files++
	x.stats.Bytes += n
	return nil
}

// finish applies directory modes deepest first, under dst (a path in
// root) where the extracted tree now lives. Modes are applied after the
// tree is complete so a read-only directory can still be filled.
func applyDirModes(root *os.Root, dst string, modes []dirMode) error {
	sort.SliceStable(modes, func(i, j int) bool {
		return strings.Count(modes[i].name, "/") > strings.Count(modes[j].name, "/")
	})
	for _, m := range modes {
		p := path.Join(dst, m.name)
		fi, err := root.Lstat(p)
		if err != nil || !fi.IsDir() {
			continue // replaced by a later merge decision; nothing to do
		}
		if err := root.Chmod(p, m.mode); err != nil {
			return err
		}
	}
	return nil
}

// writeSparse copies r to f, seeking over all-zero blocks so a sparse
// source stays sparse on the host. before, if set, may veto each write.
func writeSparse(f *os.File, r io.Reader, buf []byte, before func(int) error) (int64, error) {
	var total int64
	hole := false
	for {
		// Fill buf (short reads are common on network bodies) but keep
		// io.EOF distinct from io.ErrUnexpectedEOF: a cut stream is an error.
		n := 0
		var rerr error
		for n < len(buf) && rerr == nil {
			var m int
			m, rerr = r.Read(buf[n:])
			n += m
		}
		if n > 0 {
			if before != nil {
				if err := before(n); err != nil {
					return total, err
				}
			}
			if allZero(buf[:n]) {
				if _, err := f.Seek(int64(n), io.SeekCurrent); err != nil {
					return total, err
				}
				hole = true
			} else {
				if _, err := f.Write(buf[:n]); err != nil {
					return total, err
				}
				hole = false
			}
			total += int64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return total, rerr
		}
	}
	if hole {
		if err := f.Truncate(total); err != nil {
			return total, err
		}
	}
	return total, nil
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
