package sync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/shell"
	"github.com/daytonaworker/daytona-worker/internal/span"
)

// downloadFiles is docs/behavior.md#sync-out-files: one validate-and-snapshot round trip, one bulk
// download of the snapshots into host temp siblings created with the final
// mode, then the renames, all or nothing. A snapshot that runs out of
// sandbox space switches the batch to the terminal stream (docs/behavior.md#single-file-export).
func (t Target) downloadFiles(ctx context.Context, ms []Mapping, o Options) (files, bytes int64, err error) {
	snaps := make([]string, len(ms))
	b := t.script(o)
	for i, m := range ms {
		src, _ := confine(t.Root, m.SourcePath)
		snaps[i] = scratchName(t.Root, "")
		// Resolve, confine, then refuse a symlink or non-regular file right
		// before the copy; cp -P never follows a link swapped in after the
		// check, and the snapshot itself is re-checked.
		b.WriteString(canonSource(src) + "[ -L \"$s\" ] && exit 44\n[ -f \"$s\" ] || exit 45\n")
		fmt.Fprintf(b, "cp -P -- \"$s\" %s || exit 43\n[ -L %s ] && exit 44\n[ -f %s ] || exit 45\n", shell.Quote(snaps[i]), shell.Quote(snaps[i]), shell.Quote(snaps[i]))
	}
	defer func() { _ = t.removeScratch(ctx, snaps...) }()
	tctx, cancel := withTimeout(ctx, o.transferTimeout())
	defer cancel()
	r, err := t.run(tctx, b.String(), seconds(o.transferTimeout()))
	if err != nil {
		return 0, 0, err
	}
	if r.exit == 43 && isDiskFull(r.out) {
		// docs/behavior.md#single-file-export: drop the partial copies first, then stream the sources.
		if err := t.removeScratch(ctx, snaps...); err != nil {
			return 0, 0, fmt.Errorf("Daytona syncOut could not remove partial snapshots: %w", err)
		}
		return t.streamFiles(tctx, ms, o)
	}
	if r.exit != 0 {
		return 0, 0, &SandboxCommandError{What: "Daytona outbound symlink-escape guard command", Exit: r.exit, Detail: r.out, Stage: StageGuard}
	}

	var hosts hostBatch
	defer hosts.discard()
	// One guard round trip (the validate-and-snapshot script) came first.
	err = transfer(tctx, span.Outbound, 1, func() error {
		bd, _, err := t.Client.Files.DownloadFiles(tctx, t.Sandbox, snaps)
		if err != nil {
			return &transferError{msg: "Daytona syncOut download failed", err: err}
		}
		defer bd.Close()
		buf := make([]byte, 64<<10)
		for i, m := range ms {
			part, err := bd.Next()
			if err == nil && part.Path != snaps[i] {
				err = fmt.Errorf("%w: unexpected part", daytona.ErrMalformedResponse)
			}
			if err == nil {
				err = part.Err
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return &transferError{msg: "Daytona syncOut download failed" + forPath(m.SourcePath), err: err}
			}
			h, err := hosts.add(m.TargetPath, m.Mode, o)
			if err != nil {
				return err
			}
			n, err := writeSparse(h.f, part, buf, o.reserveCheck(filepath.Dir(h.tmp)))
			if err == nil {
				err = h.finish()
			}
			if err != nil {
				return &transferError{msg: "Daytona syncOut download failed" + forPath(m.SourcePath), err: err}
			}
			bytes += n
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	if err := hosts.publish(); err != nil {
		return 0, 0, err
	}
	return int64(len(ms)), bytes, nil
}

// streamFiles is the docs/behavior.md#single-file-export fallback: each source is streamed through a
// terminal (no sandbox copy), opened with dd iflag=nofollow after the
// canonical confinement and regular-file checks, with its device:inode
// compared before and after. Host files are published only when every
// stream ended with a matching receipt.
func (t Target) streamFiles(ctx context.Context, ms []Mapping, o Options) (files, bytes int64, err error) {
	limit := t.diskAllocation(ctx)
	var hosts hostBatch
	defer hosts.discard()
	for _, m := range ms {
		src, _ := confine(t.Root, m.SourcePath)
		h, err := hosts.add(m.TargetPath, m.Mode, o)
		if err != nil {
			return 0, 0, err
		}
		sink := &sparseSink{f: h.f, reserve: o.reserveCheck(dirOf(h.tmp))}
		var closeErr error
		ts := &termStream{
			t: t, o: o, limit: limit, sink: sink.write,
			done: func(ok bool) {
				if !ok {
					h.discard() // closed and removed before terminal cleanup
					return
				}
				closeErr = sink.close()
				if closeErr == nil {
					closeErr = h.finish()
				}
			},
			script: fileStreamScript(t.Root, src),
		}
		n, rc, err := ts.run(ctx)
		if err == nil {
			err = closeErr
		}
		if err != nil {
			return 0, 0, err
		}
		if rc != 0 {
			return 0, 0, &SandboxCommandError{What: "Daytona syncOut streamed export of " + clip(m.SourcePath), Exit: rc, Stage: StageStream}
		}
		bytes += n
	}
	if err := hosts.publish(); err != nil {
		return 0, 0, err
	}
	return int64(len(ms)), bytes, nil
}

// fileStreamScript streams one sandbox file (docs/behavior.md#single-file-export): canonical
// confinement and regular-file checks, the open refuses a symlink
// (iflag=nofollow), and the device:inode must be the same after the
// transfer and the path still confined, else the end frame carries 46/42.
func fileStreamScript(root, src string) string {
	pre := termCanonPrelude(root) + termCanonSource(src) + "[ -L \"$s\" ] && fail 44\n[ -f \"$s\" ] || fail 45\nid0=$(stat -c %d:%i -- \"$s\") || fail 45\n"
	post := "if [ \"$rc\" -eq 0 ]; then id1=$(stat -c %d:%i -- \"$s\") || rc=45\n[ \"$id0\" = \"${id1:-}\" ] || rc=46\ns2=$(canon " + shell.Quote(src) + ") && inroot \"$s2\" || rc=42\nfi\n"
	return termSender(pre, `dd if="$s" iflag=nofollow bs=65536 2>/dev/null`, post)
}

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "/"
}
