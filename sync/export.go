package sync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/daytonaworker/daytona-worker/internal/shell"
	"github.com/daytonaworker/daytona-worker/internal/span"
)

// OmitNotice is the warning logged when a directory export is rebuilt
// without its unsafe links.
const OmitNotice = "Workspace export omitted unsafe links; retrying with confined entries."

// unsafeLinks ends the first pass of a directory export whose archive
// verified except for symlinks with absolute or escaping targets. It
// never leaves SyncOut: downloadDir answers it with one retry.
type unsafeLinks struct {
	first    *ArchiveError
	names    []string // cleaned member names, archive order
	streamed bool     // the first pass came through the terminal fallback
}

func (e *unsafeLinks) Error() string { return e.first.Error() }
func (e *unsafeLinks) Unwrap() error { return e.first }

// downloadDir is one outbound directory mapping. A sandbox tree holding
// symlinks whose targets are absolute or leave the tree (every Python
// virtualenv links bin/python to /usr/bin/python3) would make the whole
// export fail, and an agent's work could never come back. So when the
// first archive is refused for such links and nothing else, the export
// is rebuilt once by the sandbox with exactly those members left out,
// after a warning (OmitNotice). The rebuilt archive is verified as
// strictly as ever: if it still holds an unsafe link (the sandbox's tar
// ignored the excludes, or the tree changed), it is refused as before.
// Nothing of the first archive is published. The omitted links are
// returned as sandbox paths (the mapping's source joined with the member
// name), for the operation's result. A delta export (docs/sync.md#delta)
// omits the unsafe links its listing shows at once, and leaves out what
// the host target already holds.
func (t Target) downloadDir(ctx context.Context, m Mapping, o Options) (files, bytes int64, omitted []string, err error) {
	src, _ := confine(t.Root, m.SourcePath)
	// A delta export (delta_out.go) lists the source first and leaves out
	// what the host target already holds; a nil plan exports the whole
	// tree.
	x := exportRun{first: true}
	plan, listed := t.planOut(ctx, m, src, o)
	if listed {
		x.guards++
	}
	if plan != nil {
		x.omit = plan.unsafe
		if len(plan.unsafe) > 0 {
			o.logger().Warn(OmitNotice, "sourcePath", clip(src), "omittedUnsafeLinks", len(plan.unsafe))
		}
		if plan.empty {
			if m.Mode != nil {
				target, _ := hostTarget(m.TargetPath)
				if err := os.Chmod(target, fs.FileMode(*m.Mode)&fs.ModePerm); err != nil {
					return 0, 0, nil, err
				}
			}
			return 0, 0, omittedPaths(src, plan.unsafe), nil
		}
		if plan.complete {
			files, bytes, ok, err := t.applyChanges(ctx, m, plan, o)
			if err != nil {
				return 0, 0, nil, err
			}
			if ok {
				return files, bytes, omittedPaths(src, plan.unsafe), nil
			}
		}
		list := skipList(plan.skip)
		switch {
		case len(list) == 0:
		case len(list)+omitBytes(x.omit) <= o.maxInlineSkip():
			// Written by the export script itself (and removed by it): no
			// round trip of its own.
			x.skip, x.inline = scratchName(t.Root, ""), list
		default:
			if x.skip, err = t.uploadSkipList(ctx, list, o); err != nil {
				return 0, 0, nil, err
			}
			x.guards++
			x.uploaded = list
			// The export script removes the file after its tar; an export
			// that failed may not have got that far.
			defer func() {
				if err != nil {
					_ = t.removeScratch(ctx, x.skip)
				}
			}()
		}
	}
	files, bytes, err = t.exportDir(ctx, m, src, o, x)
	var ul *unsafeLinks
	if !errors.As(err, &ul) {
		if err != nil {
			return 0, 0, nil, err
		}
		return files, bytes, omittedPaths(src, x.omit), nil
	}
	if len(x.omit) == 0 {
		o.logger().Warn(OmitNotice, "sourcePath", clip(src), "omittedUnsafeLinks", len(ul.names))
	}
	x.first, x.omit = false, append(x.omit, ul.names...)
	if ul.streamed {
		// The sandbox disk was full the first time: stream again at once.
		tctx, cancel := withTimeout(ctx, o.transferTimeout())
		defer cancel()
		files, bytes, err = t.streamDir(tctx, m, src, o, x)
	} else {
		if x.uploaded != nil {
			// The first export's script removed the uploaded exclude file.
			if x.skip, err = t.uploadSkipList(ctx, x.uploaded, o); err != nil {
				return 0, 0, nil, err
			}
			x.guards++
		}
		files, bytes, err = t.exportDir(ctx, m, src, o, x)
	}
	if err != nil {
		return 0, 0, nil, err
	}
	return files, bytes, omittedPaths(src, x.omit), nil
}

// omittedPaths are the sandbox paths of omitted links (nil for none).
func omittedPaths(src string, names []string) []string {
	if len(names) == 0 {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = path.Join(src, n)
	}
	return out
}

// maxInlineSkip bounds a delta's exclude file written by the export
// script itself; a larger one is uploaded first, a round trip more. The
// daemon pipes a one-shot command into its shell, and bash reads a pipe a
// byte per system call: a 75 KiB exclude file made the export script
// 96 ms slower on the emulator, which does the same (docs/sync.md#delta).
// 16 KiB so costs about 20 ms, less than a round trip at internet
// distances; a list a few times larger costs more than the round trip of
// its upload. (The script also travels as one argv string, which Linux
// caps at 128 KiB.)
const maxInlineSkip = 16 << 10

func (o Options) maxInlineSkip() int {
	if o.inlineSkip != 0 {
		return o.inlineSkip
	}
	return maxInlineSkip
}

// omitBytes is what omitted links add to an export script.
func omitBytes(names []string) (n int) {
	for _, name := range names {
		n += len(excludeArg(name))
	}
	return n
}

// writeSkip is the script step that writes a delta's exclude file; a
// failure (a full disk, say) ends the script as tar's would (exit 43 with
// the error), so the disk-full fallback streams the whole tree.
func writeSkip(name string, content []byte) string {
	q := shell.Quote(name)
	return "sk=$( (cat >" + q + " <<'" + skipEOF + "'\n" + string(content) + skipEOF + "\n) 2>&1 ) || { rm -f -- " + q + "; printf '%s\\n' \"$sk\"; exit 43; }\n"
}

// skipEOF ends the here-document of writeSkip: every line of an exclude
// file starts with "./", so no line equals it.
const skipEOF = "PAPERCLIP_SKIP_END"

// exportRun is what one export attempt leaves out of the archive.
type exportRun struct {
	// first: unsafe links are reported as *unsafeLinks (the caller then
	// retries without them) instead of failing the export.
	first bool
	// omit are member names left out as unsafe links (literal excludes).
	omit []string
	// skip is the sandbox path of a delta export's exclude file: the
	// entries the host already holds ("" = none).
	skip string
	// inline, when set, is the exclude file's content: the export script
	// writes it to skip first. The script removes skip after its tar
	// either way.
	inline []byte
	// uploaded, when set, is the content of an exclude file uploaded to
	// skip before the script: a second export uploads it again.
	uploaded []byte
	// guards are the round trips made before the export's own script
	// (a delta's listing and exclude-file upload).
	guards int
}

// exportDir is one export attempt (docs/behavior.md#sync-out-dirs): confinement check and archive
// creation in one round trip, then the archive is verified entry by entry
// while it downloads, extracted into a private host staging directory and
// published only when the whole archive verified. An archive that runs out
// of sandbox space switches to the terminal stream (docs/behavior.md#streaming-export). x.first is
// the first pass, which reports unsafe links as *unsafeLinks (publishing
// nothing) when they are the archive's only fault; otherwise every unsafe
// link is refused. x.omit and x.skip are left out of the archive.
func (t Target) exportDir(ctx context.Context, m Mapping, src string, o Options, x exportRun) (files, bytes int64, err error) {
	scratch := scratchName(t.Root, ".tar")
	defer func() { _ = t.removeScratch(ctx, scratch) }()
	tctx, cancel := withTimeout(ctx, o.transferTimeout())
	defer cancel()

	b := t.script(o)
	b.WriteString(canonSource(src) + "[ -d \"$s\" ] || exit 45\n")
	if m.FollowSymlinks {
		b.WriteString(loopCheck(m, fmt.Sprintf(`{ printf '%%s\n' "$lp"; exit %d; }`, exitLoop)))
	}
	if x.inline != nil {
		b.WriteString(writeSkip(x.skip, x.inline))
	}
	b.WriteString("out=$( (" + tarCreate(m, shell.Quote(scratch), x) + ") 2>&1 ); rc=$?\n")
	if x.skip != "" {
		b.WriteString("rm -f -- " + shell.Quote(x.skip) + "\n")
	}
	b.WriteString("if [ \"$rc\" -gt 1 ]; then rm -f -- " + shell.Quote(scratch) + "; printf '%s\\n' \"$out\"; exit 43; fi\n")
	r, err := t.run(tctx, b.String(), seconds(o.transferTimeout()))
	if err != nil {
		return 0, 0, err
	}
	if r.exit == 43 && isDiskFull(r.out) {
		if err := t.removeScratch(ctx, scratch); err != nil {
			return 0, 0, fmt.Errorf("Daytona syncOut could not remove the partial archive: %w", err)
		}
		return t.streamDir(tctx, m, src, o, x)
	}
	if r.exit == exitLoop && m.FollowSymlinks {
		return 0, 0, loopError(src, r.out)
	}
	if r.exit != 0 {
		return 0, 0, &SandboxCommandError{What: "Daytona outbound directory export command", Exit: r.exit, Detail: r.out, Stage: StageExport}
	}

	// One guard round trip (the confinement check and tar, in one script)
	// came first.
	var h *hostDir
	cr := &countingReader{}
	var ex *extractor
	// The guard round trips: the confinement check and tar in one script,
	// and before it a delta's listing and exclude-file upload.
	guards := 1 + x.guards
	err = transfer(tctx, span.Outbound, guards, func() error {
		body, _, err := t.Client.Files.Download(tctx, t.Sandbox, scratch)
		if err != nil {
			return wrapDownload(m, err)
		}
		defer body.Close()
		if h, err = newHostDir(m.TargetPath, o); err != nil {
			return err
		}
		cr.r = body
		ex = newExtractor(h.stage, o.Limits)
		ex.omitLinks = x.first
		// The reserve (docs/behavior.md#streaming-export) guards every outbound host write, not only the
		// fallback's: a hostile sandbox must not be able to fill the host disk.
		ex.beforeWrite = o.reserveCheck(h.dir)
		if err := ex.extract(tctx, cr); err != nil {
			h.discard()
			return wrapDownload(m, err)
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	if len(ex.omitNames) > 0 {
		h.discard()
		return 0, 0, &unsafeLinks{first: ex.omitFirst, names: ex.omitNames}
	}
	if err := h.publish(ex.dirModes, m.Mode); err != nil {
		return 0, 0, err
	}
	return ex.stats.Files, cr.n, nil
}

// wrapDownload names a failed directory download (a transfer error of the
// archive-download stage); an archive refusal passes through as it is.
func wrapDownload(m Mapping, err error) error {
	var ae *ArchiveError
	if errors.As(err, &ae) {
		return err
	}
	return &transferError{msg: "Daytona syncOut directory download failed" + forPath(m.SourcePath), err: err, stage: StageArchiveDownload}
}

// streamDir is the docs/behavior.md#streaming-export fallback: the same archive, produced into the
// terminal instead of a sandbox file, verified and extracted as it arrives,
// published only after the end frame matched and tar succeeded. x is
// exportDir's: the unsafe-link rule is the same on this path.
func (t Target) streamDir(ctx context.Context, m Mapping, src string, o Options, xr exportRun) (files, bytes int64, err error) {
	// A full sandbox disk holds no exclude file: the stream carries the
	// whole tree (merged into the host target, it ends as a delta would).
	if xr.skip != "" {
		o.amendReport(WayFull, "the sandbox disk is full")
	}
	xr.skip, xr.inline = "", nil
	limit := t.diskAllocation(ctx)
	h, err := newHostDir(m.TargetPath, o)
	if err != nil {
		return 0, 0, err
	}
	published := false
	defer func() {
		if !published {
			h.discard()
		}
	}()
	lim := o.Limits
	if limit > 0 && (lim.MaxTotal == 0 || lim.MaxTotal > limit) {
		lim.MaxTotal = limit
	}
	x := newExtractor(h.stage, lim)
	x.omitLinks = xr.first
	x.beforeWrite = o.reserveCheck(h.dir)
	pr, pw := io.Pipe()
	xerr := make(chan error, 1)
	go func() {
		err := x.extract(ctx, pr)
		if err == nil {
			// Trailing bytes after the end-of-archive marker are drained.
			_, err = io.Copy(io.Discard, pr)
		}
		pr.CloseWithError(err)
		xerr <- err
	}()
	reserve := o.reserveCheck(h.dir)
	pre := termCanonPrelude(t.Root) + termCanonSource(src) + "[ -d \"$s\" ] || fail 45\n"
	if m.FollowSymlinks {
		// The first pass already refused a loop; this guards a tree that
		// changed since. The end frame carries only the code.
		pre += loopCheck(m, fmt.Sprintf("fail %d", exitLoop))
	}
	ts := &termStream{
		t: t, o: o, limit: limit,
		sink: func(b []byte) error {
			if reserve != nil {
				if err := reserve(len(b)); err != nil {
					return err
				}
			}
			_, err := pw.Write(b)
			return err
		},
		done: func(ok bool) {
			if ok {
				pw.Close()
			} else {
				pw.CloseWithError(&StreamError{Msg: "stream ended early"})
			}
		},
		script: termSender(pre, tarCreate(m, "-", xr), ""),
	}
	n, rc, serr := ts.run(ctx)
	pw.CloseWithError(&StreamError{Msg: "stream ended early"}) // no-op after a clean close
	eerr := <-xerr
	if serr != nil {
		return 0, 0, serr
	}
	if eerr != nil {
		return 0, 0, wrapDownload(m, eerr)
	}
	if rc == exitLoop && m.FollowSymlinks {
		return 0, 0, loopError(src, "")
	}
	if rc > 1 {
		return 0, 0, &SandboxCommandError{What: "Daytona syncOut streamed directory export", Exit: rc, Stage: StageStream}
	}
	if len(x.omitNames) > 0 {
		return 0, 0, &unsafeLinks{first: x.omitFirst, names: x.omitNames, streamed: true}
	}
	published = true
	if err := h.publish(x.dirModes, m.Mode); err != nil {
		return 0, 0, err
	}
	return x.stats.Files, n, nil
}

// tarCreate is the sandbox-side archive command for a directory export,
// run with the canonical source in $s. Hardlinks are stored as copies
// (--hard-dereference), because the host refuses hardlink members. omit
// are member names (relative, cleaned) the archive must leave out: they
// follow --anchored --no-wildcards, so each matches exactly the member
// "./<name>" (tar's own spelling of the names find lists), whatever
// characters it holds, and the mapping's own glob excludes before them
// keep their meaning (the two options apply to later excludes only). A
// delta's exclude file (x.skip) is read the same way, one name a line.
// The GNU format (tar's own default) stores whole-second mtimes, which the
// delta's comparison relies on.
func tarCreate(m Mapping, out string, x exportRun) string {
	var b strings.Builder
	b.WriteString(`cd -- "$s" && find . -mindepth 1 -maxdepth 1 -print0 | tar -c --format=gnu --no-xattrs --hard-dereference`)
	if m.FollowSymlinks {
		b.WriteString(" -h")
	}
	b.WriteString(" --exclude=" + shell.Quote(scratchPrefix+"*"))
	for _, e := range m.Exclude {
		b.WriteString(" --exclude=" + shell.Quote(e))
	}
	if len(x.omit) > 0 || x.skip != "" {
		b.WriteString(" --anchored --no-wildcards")
		for _, n := range x.omit {
			b.WriteString(excludeArg(n))
		}
		if x.skip != "" {
			b.WriteString(" -X " + shell.Quote(x.skip))
		}
	}
	b.WriteString(" -f " + out + " --null -T -")
	return b.String()
}

// exitLoop is the sandbox exit (and terminal end-frame) code of a
// followed directory export whose tree holds a symlink loop.
const exitLoop = 47

// loopMarker is GNU find's diagnostic for a directory reached again
// through a followed link. The check runs under LC_ALL=C so the text is
// not translated.
const loopMarker = "File system loop detected"

// loopCheck is the sandbox-side guard run before tar when links are
// followed: tar -h has no loop detection of its own, so a link such as
// up -> .. or a -> . makes it recurse until the disk or the timeout gives
// out. GNU find -L walks the same tree (honouring the mapping's excludes,
// so a loop tar would never enter is not refused) and reports every loop
// on stderr; only the first such line is kept in $lp, and grep -m1 ends
// the walk there. This relies on GNU findutils and grep, which the
// Debian-based sandbox image carries; a BusyBox find would not report
// loops, and the export would then behave as before this check.
// onLoop is the shell action taken when a loop was found.
func loopCheck(m Mapping, onLoop string) string {
	var b strings.Builder
	b.WriteString(`lp=$(cd -- "$s" && LC_ALL=C find -L . -mindepth 1`)
	if len(m.Exclude) > 0 {
		b.WriteString(` \(`)
		for i, e := range m.Exclude {
			if i > 0 {
				b.WriteString(" -o")
			}
			// tar matches an unanchored exclude against the member's
			// trailing components: a bare name is find's -name, a
			// pattern with a slash is a -path ending in it.
			if strings.Contains(e, "/") {
				b.WriteString(" -path " + shell.Quote("./"+e) + " -o -path " + shell.Quote("*/"+e))
			} else {
				b.WriteString(" -name " + shell.Quote(e))
			}
		}
		b.WriteString(` \) -prune -o -print`)
	}
	b.WriteString(" 2>&1 >/dev/null | grep -m1 -F " + shell.Quote(loopMarker) + ")\n")
	b.WriteString(`[ -z "$lp" ] || ` + onLoop + "\n")
	return b.String()
}

// loopError is the refusal of a followed export whose tree loops; out is
// the sandbox's report (GNU find's first loop line), from which the looping
// path is taken, relative to src.
func loopError(src, out string) error {
	name := out
	if i := strings.Index(out, loopMarker+"; "); i >= 0 {
		rest := out[i+len(loopMarker)+2:]
		if j := strings.Index(rest, " is part of"); j >= 0 {
			rest = rest[:j]
		}
		// find quotes a plain name as 'name'; a name that needed other
		// quoting is shown as find printed it.
		if len(rest) >= 2 && rest[0] == '\'' && rest[len(rest)-1] == '\'' && !strings.Contains(rest[1:len(rest)-1], "'") {
			rest = path.Join(src, rest[1:len(rest)-1])
		}
		name = rest
	}
	if name == "" {
		name = src
	}
	return &ArchiveError{Reason: "to follow a symlink loop under " + clip(src), Name: name}
}
