package sync

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

// packer writes a host directory as a tar stream (what `tar -c [-h]
// --exclude ._* --exclude … -C src ./<names>` would produce, docs/behavior.md#sync-in-dirs), never
// holding more than one 64 KiB buffer of file data.
type packer struct {
	ctx      context.Context
	tw       *tar.Writer // nil: walk only (planning which files go direct)
	excludes []string
	follow   bool
	files    int64
	buf      []byte
	stack    []fileID // directories on the current path (symlink loops)
	// direct are the regular files (by tar name) that travel as their own
	// upload parts instead of inside the archive; a walk-only packer
	// collects the files of at least directMin bytes into it.
	direct    map[string]directFile
	directMin int64
	// keep, when set, limits the members written (or planned) to those it
	// accepts; directories it refuses are still walked. A delta sync sets
	// it to the members that differ in the sandbox (delta.go).
	keep func(name string) bool
	// visit, when set on a walk-only packer, sees every member's header,
	// host path and the file information it was made from (the delta's
	// comparison).
	visit func(h *tar.Header, abs string, fi fs.FileInfo) error
}

// directFile is a large regular file uploaded straight to a scratch name
// and renamed into place, so the sandbox writes its bytes once (inside the
// archive they are written twice: scratch archive, then extraction).
type directFile struct {
	abs     string
	name    string // tar name, relative to the mapping's target
	mode    fs.FileMode
	modTime time.Time
	size    int64
}

// directMinSize is the size from which a file goes direct: large enough
// that its rename and timestamp (two sandbox processes) cost less than the
// second write of its bytes saves.
const directMinSize = 4 << 20

// planDirect walks src like pack and returns the files that go direct.
func planDirect(ctx context.Context, src string, excludes []string, follow bool, keep func(string) bool) (map[string]directFile, error) {
	p, err := newPacker(ctx, src, excludes, follow)
	if err != nil {
		return nil, err
	}
	p.direct, p.directMin, p.keep = map[string]directFile{}, directMinSize, keep
	if err := p.dir(src, ""); err != nil {
		return nil, err
	}
	return p.direct, nil
}

// newPacker checks that src is a directory and returns a walk-only packer
// for it; pack gives it a tar writer.
func newPacker(ctx context.Context, src string, excludes []string, follow bool) (*packer, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: directory mapping source %s is not a directory", ErrInvalidOperation, clip(src))
	}
	return &packer{ctx: ctx, excludes: append(slices.Clone(alwaysExcluded), excludes...), follow: follow, stack: []fileID{idOf(fi)}}, nil
}

type fileID struct{ dev, ino uint64 }

// alwaysExcluded are never packed: AppleDouble files (the original packs
// with COPYFILE_DISABLE=1 and --exclude ._*), and the reserved temp names
// (a syncOut killed mid-write leaves them next to its host target; they
// must not travel back into the sandbox, where the name is reserved too).
var alwaysExcluded = []string{"._*", scratchPrefix + "*"}

// excluded applies tar-like exclude globs: a pattern without "/" matches
// any name component's base name; one with "/" matches the path relative
// to the source (a leading "./" ignored). A bad pattern matches nothing.
func excluded(rel string, patterns []string) bool {
	base := path.Base(rel)
	for _, p := range patterns {
		p = strings.TrimPrefix(p, "./")
		p = strings.TrimSuffix(p, "/")
		if p == "" {
			continue
		}
		if strings.Contains(p, "/") {
			if ok, _ := path.Match(p, rel); ok {
				return true
			}
			continue
		}
		if ok, _ := path.Match(p, base); ok {
			return true
		}
	}
	return false
}

// pack streams src into w and returns the number of non-directory entries.
// Files named in direct are left out (they travel separately).
func pack(ctx context.Context, w io.Writer, src string, excludes []string, follow bool, direct map[string]directFile, keep func(string) bool) (int64, error) {
	p, err := newPacker(ctx, src, excludes, follow)
	if err != nil {
		return 0, err
	}
	p.tw, p.buf, p.direct, p.keep = tar.NewWriter(w), make([]byte, 64<<10), direct, keep
	if err := p.dir(src, ""); err != nil {
		return p.files, err
	}
	return p.files, p.tw.Close()
}

func idOf(fi fs.FileInfo) fileID {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fileID{uint64(st.Dev), uint64(st.Ino)}
	}
	return fileID{}
}

func (p *packer) dir(abs, rel string) error {
	ents, err := os.ReadDir(abs)
	if err != nil {
		return err
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		if err := p.ctx.Err(); err != nil {
			return err
		}
		name := path.Join(rel, e.Name())
		if excluded(name, p.excludes) {
			continue
		}
		if err := p.entry(filepath.Join(abs, e.Name()), name); err != nil {
			return err
		}
	}
	return nil
}

func (p *packer) header(fi fs.FileInfo, name string) *tar.Header {
	return &tar.Header{
		Name:    name,
		Mode:    int64(fi.Mode().Perm()),
		ModTime: fi.ModTime().Truncate(time.Second),
	}
}

func (p *packer) entry(abs, name string) error {
	fi, err := os.Lstat(abs)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if p.follow {
			if tfi, err := os.Stat(abs); err == nil {
				fi = tfi // dereference (tar -h); a dangling link stays a link
			}
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(abs)
			if err != nil {
				return err
			}
			h := p.header(fi, name)
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, target, 0o777
			if skip, err := p.skip(h, abs, fi); skip || err != nil {
				return err
			}
			p.files++
			if p.tw == nil {
				return nil
			}
			return p.tw.WriteHeader(h)
		}
	}
	switch {
	case fi.IsDir():
		id := idOf(fi)
		for _, s := range p.stack {
			if s == id {
				return fmt.Errorf("%w: symlink loop at %s", ErrInvalidOperation, clip(name))
			}
		}
		h := p.header(fi, name+"/")
		h.Typeflag = tar.TypeDir
		skip, err := p.skip(h, abs, fi)
		if err != nil {
			return err
		}
		if p.tw != nil && !skip {
			if err := p.tw.WriteHeader(h); err != nil {
				return err
			}
		}
		p.stack = append(p.stack, id)
		err = p.dir(abs, name)
		p.stack = p.stack[:len(p.stack)-1]
		return err
	case fi.Mode().IsRegular():
		h := p.header(fi, name)
		h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		if skip, err := p.skip(h, abs, fi); skip || err != nil {
			return err
		}
		if p.tw == nil { // planning
			if p.directMin > 0 && fi.Size() >= p.directMin {
				p.direct[name] = directFile{abs: abs, name: name, mode: fi.Mode().Perm(),
					modTime: fi.ModTime().Truncate(time.Second), size: fi.Size()}
			}
			p.files++
			return nil
		}
		if _, ok := p.direct[name]; ok {
			return nil // uploaded as its own part
		}
		f, err := os.Open(abs)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := p.tw.WriteHeader(h); err != nil {
			return err
		}
		// Exactly Size bytes: a file that grew is cut at its stat size,
		// one that shrank fails the sync rather than packing a lie.
		if _, err := io.CopyBuffer(p.tw, io.LimitReader(f, fi.Size()), p.buf); err != nil {
			return err
		}
		p.files++
		return nil
	default:
		// Sockets, devices and FIFOs have no content to sync.
		return nil
	}
}

// skip reports whether the member h (host path abs) is left out: a
// visiting walk sees every member and writes none; otherwise keep decides.
// Names are the tar names without a directory's trailing slash.
func (p *packer) skip(h *tar.Header, abs string, fi fs.FileInfo) (bool, error) {
	if p.visit != nil {
		return true, p.visit(h, abs, fi)
	}
	return p.keep != nil && !p.keep(strings.TrimSuffix(h.Name, "/")), nil
}

// counter counts the bytes that pass through a Read or a Write.
type counter struct{ n int64 }

func (c *counter) add(n int, err error) (int, error) {
	c.n += int64(n)
	return n, err
}

// countingWriter counts bytes on their way to w.
type countingWriter struct {
	counter
	w io.Writer
}

func (c *countingWriter) Write(b []byte) (int, error) { return c.add(c.w.Write(b)) }

// countingReader counts bytes read from r.
type countingReader struct {
	counter
	r io.Reader
}

func (c *countingReader) Read(b []byte) (int, error) { return c.add(c.r.Read(b)) }
