package sync

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"path"
	"sort"

	"github.com/daytonaworker/daytona-worker/internal/span"
)

// applyChanges writes what a delta export found different from the
// listing and its changes archive alone (delta_record.go, "The changes
// archive"): directories and links as the listing describes them (the
// export's merge keeps only a directory's permission bits and a link's
// target of theirs; a directory the host holds with the same bits is left
// to the merge), files from the archive. ok is false, with nothing
// written, when the archive does not hold every file that differs (or does
// not read to its end); the export then runs as always. Members are
// verified by the export's extractor and published by its host merge, so
// the host target ends exactly as after the export of the same entries.
func (t Target) applyChanges(ctx context.Context, m Mapping, plan *outPlan, o Options) (files, n int64, ok bool, err error) {
	l := plan.listing
	left := map[string]bool{}
	for _, name := range plan.skip {
		left[name] = true
	}
	for _, name := range plan.unsafe {
		left[name] = true
	}
	need := map[string]bool{}
	var dirs, links []string
	for name, e := range l.entries {
		if name == "" || left[name] {
			continue
		}
		switch e.typ {
		case 'd':
			// A directory the host holds as it is needs no member (the
			// export's merge would change nothing); one below it is
			// staged in a parent the merge then walks into.
			if !plan.sameDirs[name] {
				dirs = append(dirs, name)
			}
		case 'l':
			links = append(links, name)
		case 'f':
			need[name] = true
		}
	}
	if len(need) > 0 && !archiveHolds(l.changes, need) {
		return 0, 0, false, nil
	}
	if len(need) > 0 {
		n = int64(len(l.changes))
	}
	// A parent sorts before what it holds.
	sort.Strings(dirs)
	sort.Strings(links)
	var h *hostDir
	var ex *extractor
	err = transfer(ctx, span.Outbound, 1, func() error {
		var err error
		if h, err = newHostDir(m.TargetPath, o); err != nil {
			return err
		}
		ex = newExtractor(h.stage, o.Limits)
		ex.beforeWrite = o.reserveCheck(h.dir)
		for _, d := range dirs {
			if err := ex.member(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: int64(l.entries[d].mode)}, nil); err != nil {
				return err
			}
		}
		for _, k := range links {
			if err := ex.member(&tar.Header{Typeflag: tar.TypeSymlink, Name: k, Linkname: l.entries[k].link}, nil); err != nil {
				return err
			}
		}
		if len(need) == 0 {
			return nil
		}
		tr := tar.NewReader(bytes.NewReader(l.changes))
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			name := path.Clean(hdr.Name)
			if !need[name] || !isRegular(hdr) {
				continue // a file the host already holds
			}
			delete(need, name) // a second member of the name is not used
			if err := ex.member(hdr, tr); err != nil {
				return err
			}
		}
	})
	if err != nil {
		if h != nil {
			h.discard()
		}
		return 0, 0, false, wrapDownload(m, err)
	}
	if err := h.publish(ex.dirModes, m.Mode); err != nil {
		return 0, 0, false, err
	}
	return ex.stats.Files, n, true, nil
}

// archiveHolds reports whether archive reads to its end and holds a
// regular file of every name in need.
func archiveHolds(archive []byte, need map[string]bool) bool {
	tr := tar.NewReader(bytes.NewReader(archive))
	found := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return len(found) == len(need)
		}
		if err != nil {
			return false
		}
		if name := path.Clean(hdr.Name); need[name] && isRegular(hdr) {
			found[name] = true
		}
	}
}

func isRegular(hdr *tar.Header) bool {
	return hdr.Typeflag == tar.TypeReg || hdr.Typeflag == typeRegV7
}
