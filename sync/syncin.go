package sync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/shell"
	"github.com/daytonaworker/daytona-worker/internal/span"
)

// lazyFile opens its path on first Read and closes at EOF, so a batch of
// 10,000 mappings never holds 10,000 descriptors.
type lazyFile struct {
	path string
	f    *os.File
	done bool
}

func (l *lazyFile) Read(b []byte) (int, error) {
	if l.done {
		return 0, io.EOF
	}
	if l.f == nil {
		f, err := os.Open(l.path)
		if err != nil {
			return 0, err
		}
		l.f = f
	}
	n, err := l.f.Read(b)
	if err == io.EOF {
		l.close()
	}
	return n, err
}

func (l *lazyFile) close() {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	l.done = true
}

// uploadFiles is docs/behavior.md#sync-in-files without zstd (the Go standard library has no zstd
// encoder, i.e. "the host runtime does not support zstd": the raw path):
// one bulk upload to reserved scratch names, modes set on the scratch files,
// then one promote script that creates parents, re-checks confinement with
// canonical paths and renames each scratch file onto its target.
func (t Target) uploadFiles(ctx context.Context, ms []Mapping, o Options) (files, bytes int64, err error) {
	uploads := make([]daytona.UploadFile, len(ms))
	scratch := make([]string, len(ms))
	lazies := make([]*lazyFile, len(ms))
	for i, m := range ms {
		fi, err := os.Stat(m.SourcePath)
		if err != nil {
			return 0, 0, fmt.Errorf("Daytona syncIn cannot read source: %w", clipPaths(err))
		}
		if !fi.Mode().IsRegular() {
			return 0, 0, fmt.Errorf("%w: file mapping source %s is not a regular file", ErrInvalidOperation, clip(m.SourcePath))
		}
		bytes += fi.Size()
		scratch[i] = scratchName(t.Root, "")
		lazies[i] = &lazyFile{path: m.SourcePath}
		uploads[i] = daytona.UploadFile{Path: scratch[i], Content: lazies[i]}
	}
	defer func() {
		for _, l := range lazies {
			l.close()
		}
		if err != nil {
			// docs/behavior.md#sync-in-files: sweep every reserved name on any failure.
			_ = t.removeScratch(ctx, scratch...)
		}
	}()
	tctx, cancel := withTimeout(ctx, o.transferTimeout())
	defer cancel()
	// No sandbox round trip precedes the upload: parents are made and
	// confinement checked by the promote script.
	err = transfer(ctx, span.Inbound, 0, func() error {
		res, _, err := t.Client.Files.Upload(tctx, t.Sandbox, uploads)
		if err != nil {
			return &transferError{msg: "Daytona syncIn upload failed", err: err}
		}
		if len(res.Errors) > 0 {
			return &transferError{msg: "Daytona syncIn upload failed", err: fmt.Errorf("%s", clip(strings.Join(res.Errors, "; ")))}
		}
		for i, m := range ms {
			if m.Mode == nil {
				continue
			}
			if _, err := t.Client.Files.SetPermissions(tctx, t.Sandbox, scratch[i], daytona.Permissions{Mode: fmt.Sprintf("%o", *m.Mode&0o7777)}); err != nil {
				return &transferError{msg: "Daytona syncIn setFilePermissions failed", err: err}
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	b := t.script(o)
	for i, m := range ms {
		target, _ := confine(t.Root, m.TargetPath)
		parent := path.Dir(target)
		fmt.Fprintf(b, "p=$(mkconf %s) || exit $?\n", shell.Quote(parent))
		fmt.Fprintf(b, "mv -f -- %s \"$p\"/%s || exit 43\n", shell.Quote(scratch[i]), shell.Quote(path.Base(target)))
	}
	if err = t.runPhase(tctx, "promote", "Daytona syncIn rename command", b.String(), o); err != nil {
		return 0, 0, err
	}
	return int64(len(ms)), bytes, nil
}

// uploadDir is docs/behavior.md#sync-in-dirs: the host directory is packed into the upload body as
// it streams (io.Pipe, no host archive), uploaded to a reserved scratch
// tar, extracted by the sandbox's tar into the confined target, and the
// scratch removed on every path.
func (t Target) uploadDir(ctx context.Context, m Mapping, o Options) (files, bytes int64, _ []string, err error) {
	target, _ := confine(t.Root, m.TargetPath)
	// A delta sync (delta.go) lists the target first and sends only the
	// members that differ; a nil plan sends the whole tree. The listing
	// has its own round-trip limit, before the transfer's starts.
	plan, listed := t.planDelta(ctx, m, target, o)
	if plan != nil && len(plan.keep) == 0 {
		return 0, 0, nil, t.finishEmptyDelta(ctx, m, target, plan, o)
	}
	keep := plan.keepFn()
	scratch := scratchName(t.Root, ".tar")
	defer func() {
		if err != nil {
			_ = t.removeScratch(ctx, scratch)
		}
	}()
	tctx, cancel := withTimeout(ctx, o.transferTimeout())
	defer cancel()

	// Large regular files travel as their own parts of the same upload, to
	// scratch names, and are renamed into place after the extraction: the
	// sandbox then writes their bytes once instead of twice.
	// A read-only mapping keeps every file in the archive: the compare
	// step below needs the whole tree in one place.
	readOnly := m.Mode != nil && *m.Mode&0o222 == 0
	direct := map[string]directFile{}
	if !readOnly {
		if direct, err = planDirect(tctx, m.SourcePath, m.Exclude, m.FollowSymlinks, keep); err != nil {
			return 0, 0, nil, fmt.Errorf("Daytona syncIn pack failed%s: %w", forPath(m.SourcePath), clipPaths(err))
		}
	}
	names := make([]string, 0, len(direct))
	for name := range direct {
		names = append(names, name)
	}
	sort.Strings(names)
	directScratch := make([]string, len(names))
	uploads := make([]daytona.UploadFile, 0, 1+len(names))
	lazies := make([]*lazyFile, len(names))
	counters := make([]*countingReader, len(names))
	for i, name := range names {
		directScratch[i] = scratchName(t.Root, "")
		lazies[i] = &lazyFile{path: direct[name].abs}
		counters[i] = &countingReader{r: io.LimitReader(lazies[i], direct[name].size)}
	}
	defer func() {
		for _, l := range lazies {
			l.close()
		}
		if err != nil && len(directScratch) > 0 {
			_ = t.removeScratch(ctx, directScratch...)
		}
	}()

	pr, pw := io.Pipe()
	cw := &countingWriter{w: pw}
	type packResult struct {
		files int64
		err   error
	}
	packed := make(chan packResult, 1)
	// The archive is packed while it uploads: the pack and transfer spans
	// open together and pack ends first.
	packSpan := span.Start(tctx, "pack")
	go func() {
		n, err := pack(tctx, cw, m.SourcePath, m.Exclude, m.FollowSymlinks, direct, keep)
		// Ended before the pipe closes, so before the upload can finish.
		packSpan.SetAttr(span.AttrPackWallMs, packSpan.WallMs())
		packSpan.End(err)
		pw.CloseWithError(err)
		packed <- packResult{n, err}
	}()
	uploads = append(uploads, daytona.UploadFile{Path: scratch, Content: pr})
	for i := range names {
		uploads = append(uploads, daytona.UploadFile{Path: directScratch[i], Content: counters[i]})
	}
	guards := 0
	if listed {
		guards = 1 // the listing
	}
	uerr := transfer(tctx, span.Inbound, guards, func() error {
		res, _, err := t.Client.Files.Upload(tctx, t.Sandbox, uploads)
		if err == nil && len(res.Errors) > 0 {
			err = fmt.Errorf("%s", clip(strings.Join(res.Errors, "; ")))
		}
		return err
	})
	// Stop the packer if the upload ended early, then wait for it: no
	// goroutine outlives the call.
	pr.CloseWithError(io.ErrClosedPipe)
	pk := <-packed
	if pk.err != nil && !errors.Is(pk.err, io.ErrClosedPipe) {
		return 0, 0, nil, fmt.Errorf("Daytona syncIn pack failed%s: %w", forPath(m.SourcePath), clipPaths(pk.err))
	}
	if uerr != nil {
		return 0, 0, nil, &transferError{msg: "Daytona syncIn directory upload failed", err: uerr}
	}
	b := t.script(o)
	fmt.Fprintf(b, "t=$(mkconf %s) || exit $?\n", shell.Quote(target))
	if readOnly {
		b.WriteString(skipIfIdentical(scratch))
	} else {
		b.WriteString("skip=0\n")
	}
	// A mapping mode that lets the owner write is applied before the
	// extraction as well as after it: a target an earlier mapping left
	// read-only would otherwise refuse every later sync as a non-root
	// user, though the operator has since made the mapping writable.
	before := ""
	if m.Mode != nil && *m.Mode&0o200 != 0 {
		before = fmt.Sprintf("chmod %o \"$t\"", *m.Mode&0o7777)
	}
	b.WriteString(extractWhole(scratch, scratchName(t.Root, ""), before))
	var directBytes int64
	byMode := map[fs.FileMode][]string{}
	for i, name := range names {
		f := direct[name]
		if counters[i].n != f.size {
			// It shrank while it was read: fail rather than sync a lie.
			return 0, 0, nil, fmt.Errorf("Daytona syncIn source %s changed size while it was uploaded", clip(f.abs))
		}
		byMode[f.mode&0o7777] = append(byMode[f.mode&0o7777], shell.Quote(directScratch[i]))
		directBytes += counters[i].n
	}
	for mode, files := range byMode { // one chmod per mode, not per file
		fmt.Fprintf(b, "chmod %o %s || exit 43\n", mode, strings.Join(files, " "))
	}
	for i, name := range names {
		// The archive made every parent directory (the names come from our
		// own walk of the host tree).
		fmt.Fprintf(b, "touch -m -d @%d %s && mv -f -- %s \"$t\"/%s || exit 43\n",
			direct[name].modTime.Unix(), shell.Quote(directScratch[i]), shell.Quote(directScratch[i]), shell.Quote(name))
	}
	if m.Mode != nil {
		fmt.Fprintf(b, "chmod %o \"$t\" || exit 50\n", *m.Mode&0o7777)
	}
	if err = t.runPhase(tctx, "extractTarball", "Daytona syncIn extract command", b.String(), o); err != nil {
		return 0, 0, nil, err
	}
	return pk.files + int64(len(names)), cw.n + directBytes, nil, nil
}

// extractWhole extracts the archive at scratch into the target "$t"
// unless $skip is 1, and removes scratch. The archive is first extracted
// into a private staging directory (a reserved name) and that copy is
// removed again: only an archive that extracted in full there is extracted
// into the target, so a full disk (or a file size limit) fails the sync
// with the target untouched instead of leaving old files next to truncated
// new ones. The cost is that archive members (files under the direct-upload
// threshold) are written twice; the second write reuses the space the
// staging copy freed. before (a shell command, or nothing) runs between
// the two extractions, so only once the archive is known to fit; its
// failure fails the extraction.
func extractWhole(scratch, staging, before string) string {
	x := "tar -xf " + shell.Quote(scratch) + " --delay-directory-restore --no-same-owner -C "
	s := shell.Quote(staging)
	if before != "" {
		before += " && "
	}
	return `rc=0
if [ "$skip" -ne 1 ]; then
  mkdir -m 700 -- ` + s + ` && ` + x + s + ` || rc=$?
  chmod -R u+w -- ` + s + ` 2>/dev/null; rm -rf -- ` + s + `
  [ "$rc" -ne 0 ] || { ` + before + x + `"$t"; } || rc=$?
fi
rm -f -- ` + shell.Quote(scratch) + `
[ "$rc" -eq 0 ] || exit 43
`
}

// skipIfIdentical sets $skip to 1 when the archive at scratch would change
// nothing under the target "$t". A mapping mode without write bits leaves
// the target directory read-only, so a non-root sandbox user could not
// extract into it again: an unchanged tree must be recognised and left
// alone. The archive is extracted into a private temporary directory the
// way the real extraction would (owner and umask of the sandbox user),
// repacked from there, and compared with `tar -d` against the target; the
// repack is what makes owners and modes comparable, since the uploaded
// archive carries the host's. Top-level entries are listed one by one so
// the target directory's own mode is not compared. Any failure of the
// comparison means "extract", never an error of its own.
func skipIfIdentical(scratch string) string {
	return `skip=0
if c=$(mktemp -d 2>/dev/null); then
  if mkdir -- "$c/t" && tar -xf ` + shell.Quote(scratch) + ` --delay-directory-restore --no-same-owner -C "$c/t" >/dev/null 2>&1 &&
    (cd "$c/t" && find . -mindepth 1 -maxdepth 1 -print0 >"$c/names" && tar -cf "$c/re.tar" --no-xattrs --null -T "$c/names") >/dev/null 2>&1 &&
    tar -df "$c/re.tar" -C "$t" >/dev/null 2>&1; then skip=1; fi
  chmod -R u+w -- "$c" 2>/dev/null; rm -rf -- "$c"
fi
`
}
