package sync

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"github.com/google/uuid"
)

// hostDir is a host directory target being filled through a private
// staging directory: a sibling named .paperclip-upload-<uuid>, mode 0700,
// on the same filesystem, so publishing is a rename.
type hostDir struct {
	parent  *os.Root // the target's (resolved) parent
	dir     string   // parent path, for free-space checks
	base    string   // target name inside parent
	staging string   // staging name inside parent
	stage   *os.Root // root at the staging directory
}

func newHostDir(target string, o Options) (*hostDir, error) {
	abs, err := filepath.Abs(target)
	if err != nil {
		return nil, err
	}
	// A target that is itself a symlink (e.g. a project dir on another
	// volume) is the host's own choice: resolve it once, here.
	if fi, err := os.Lstat(abs); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if abs, err = filepath.EvalSymlinks(abs); err != nil {
			return nil, err
		}
	}
	parentPath := filepath.Dir(abs)
	if err := os.MkdirAll(parentPath, 0o755); err != nil {
		return nil, err
	}
	o.sweepHost(parentPath)
	parent, err := os.OpenRoot(parentPath)
	if err != nil {
		return nil, err
	}
	h := &hostDir{parent: parent, dir: parentPath, base: filepath.Base(abs), staging: scratchPrefix + uuid.NewString()}
	if err := parent.Mkdir(h.staging, 0o700); err != nil {
		parent.Close()
		return nil, err
	}
	if h.stage, err = parent.OpenRoot(h.staging); err != nil {
		_ = parent.Remove(h.staging)
		parent.Close()
		return nil, err
	}
	return h, nil
}

// discard removes the staging directory (every failure path).
func (h *hostDir) discard() {
	if h.stage != nil {
		h.stage.Close()
		h.stage = nil
	}
	_ = h.parent.RemoveAll(h.staging)
	h.parent.Close()
}

// publish moves the verified staging tree into place. A missing target
// becomes the staging directory by one rename; an existing directory is
// merged entry by entry (what `tar -x` into it would do: new names are
// added, files replaced, directories merged), never following a symlink of
// the target tree. mode, if set, is the target directory's final mode.
func (h *hostDir) publish(dirModes []dirMode, mode *uint32) error {
	defer h.discard()
	h.stage.Close()
	h.stage = nil
	fi, err := h.parent.Lstat(h.base)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		final := fs.FileMode(0o755)
		if mode != nil {
			final = fs.FileMode(*mode) & fs.ModePerm
		}
		// Fill in directory modes while the tree is still private, then
		// give the root its final mode and rename it into place.
		if err := applyDirModes(h.parent, h.staging, dirModes); err != nil {
			return err
		}
		if err := h.parent.Chmod(h.staging, final); err != nil {
			return err
		}
		return h.parent.Rename(h.staging, h.base)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%w: host target %s is not a directory", ErrInvalidOperation, clip(h.base))
	}
	if err := h.merge(""); err != nil {
		return err
	}
	if err := applyDirModes(h.parent, h.base, dirModes); err != nil {
		return err
	}
	if mode != nil {
		return h.parent.Chmod(h.base, fs.FileMode(*mode)&fs.ModePerm)
	}
	return nil
}

func (h *hostDir) merge(rel string) error {
	d, err := h.parent.Open(path.Join(h.staging, rel))
	if err != nil {
		return err
	}
	for {
		ents, rerr := d.ReadDir(256)
		for _, e := range ents {
			src := path.Join(h.staging, rel, e.Name())
			dst := path.Join(h.base, rel, e.Name())
			di, err := h.parent.Lstat(dst)
			switch {
			case errors.Is(err, fs.ErrNotExist):
			case err != nil:
				d.Close()
				return err
			case di.IsDir() && e.IsDir():
				if err := h.merge(path.Join(rel, e.Name())); err != nil {
					d.Close()
					return err
				}
				continue
			case di.IsDir() || e.IsDir():
				// A type change: tar -x replaces the old entry.
				if err := h.parent.RemoveAll(dst); err != nil {
					d.Close()
					return err
				}
			}
			if err := h.parent.Rename(src, dst); err != nil {
				d.Close()
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			d.Close()
			return rerr
		}
	}
	return d.Close()
}

// hostFile is a host file target being written to a temp sibling
// (.paperclip-upload-<uuid>) created with the final mode, so it never exists
// with broader permissions, and renamed onto the target only after a
// complete transfer.
type hostFile struct {
	target string
	tmp    string
	f      *os.File
	mode   fs.FileMode
}

func newHostFile(target string, mode *uint32, o Options) (*hostFile, error) {
	abs, err := filepath.Abs(target)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, err
	}
	o.sweepHost(filepath.Dir(abs))
	m := fs.FileMode(0o600)
	if mode != nil {
		m = fs.FileMode(*mode) & fs.ModePerm
	}
	tmp := filepath.Join(filepath.Dir(abs), scratchPrefix+uuid.NewString())
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, m)
	if err != nil {
		return nil, err
	}
	return &hostFile{target: abs, tmp: tmp, f: f, mode: m}, nil
}

// finish closes the temp file with its exact mode (the umask may have
// narrowed it); it is not yet published.
func (h *hostFile) finish() error {
	err := h.f.Chmod(h.mode)
	if cerr := h.f.Close(); err == nil {
		err = cerr
	}
	h.f = nil
	return err
}

func (h *hostFile) publish() error { return os.Rename(h.tmp, h.target) }

func (h *hostFile) discard() {
	if h.f != nil {
		h.f.Close()
		h.f = nil
	}
	_ = os.Remove(h.tmp)
}

// hostBatch is the host file targets of one batch, published together:
// none is renamed into place before every transfer of the batch completed.
type hostBatch []*hostFile

// add starts a host file target of the batch.
func (hb *hostBatch) add(target string, mode *uint32, o Options) (*hostFile, error) {
	h, err := newHostFile(target, mode, o)
	if err != nil {
		return nil, err
	}
	*hb = append(*hb, h)
	return h, nil
}

// publish renames every file of the batch into place; the batch is then
// empty, so a deferred discard removes nothing.
func (hb *hostBatch) publish() error {
	for _, h := range *hb {
		if err := h.publish(); err != nil {
			return err
		}
	}
	*hb = nil
	return nil
}

// discard removes the temp files of a batch that was not published.
func (hb *hostBatch) discard() {
	for _, h := range *hb {
		h.discard()
	}
}

// statfsFree is the default Options.HostFreeSpace.
func statfsFree(p string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(p, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// reserveCheck returns a beforeWrite hook enforcing the host free-space
// reserve for writes under dir.
func (o Options) reserveCheck(dir string) func(int) error {
	reserve := o.hostReserve()
	if reserve == 0 {
		return nil
	}
	free := o.HostFreeSpace
	if free == nil {
		free = statfsFree
	}
	return func(n int) error {
		avail, err := free(dir)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrHostSpace, err)
		}
		if avail-int64(n) < reserve {
			return fmt.Errorf("%w: a %d-byte write would leave less than %d bytes free", ErrHostSpace, n, reserve)
		}
		return nil
	}
}
