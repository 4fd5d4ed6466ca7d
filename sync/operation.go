package sync

import (
	"context"
	"fmt"
	"strings"
)

// SyncIn applies operations host → sandbox (docs/behavior.md#sync-in-files, docs/behavior.md#sync-in-dirs,
// docs/behavior.md#post-upload): in order, each with its file mappings as one upload batch, then each
// directory mapping (packed on the fly into the upload body and extracted in
// the sandbox), then its post-upload commands, verbatim and fail-fast. It
// returns the results of the operations that completed, and the first error.
func SyncIn(ctx context.Context, t Target, ops []Operation, o Options) ([]OperationResult, error) {
	return t.apply(ctx, ops, o, direction{
		inbound: true,
		files:   Target.uploadFiles,
		dir:     Target.uploadDir,
	})
}

// SyncOut applies operations sandbox → host (docs/behavior.md#sync-out-files,
// docs/behavior.md#sync-out-dirs, docs/behavior.md#streaming-export, docs/behavior.md#single-file-export): in order, each with its file mappings as one guarded
// snapshot + bulk download, then each directory mapping as a sandbox-built
// archive verified and extracted while it streams, then any post-upload
// commands. Host files appear only after their whole batch or archive
// arrived and verified. A sandbox deleted under the call is
// ErrSandboxNotFound.
func SyncOut(ctx context.Context, t Target, ops []Operation, o Options) ([]OperationResult, error) {
	return t.apply(ctx, ops, o, direction{
		files: Target.downloadFiles,
		dir:   Target.downloadDir,
		fail:  Target.classifyOut,
	})
}

// direction is what differs between SyncIn and SyncOut; apply runs the
// shared operation loop. The steps are method expressions, so they run on
// the Target with its cleaned root.
type direction struct {
	inbound bool
	files   func(t Target, ctx context.Context, ms []Mapping, o Options) (int64, int64, error)
	// dir also returns the sandbox paths of the links an export omitted.
	dir func(t Target, ctx context.Context, m Mapping, o Options) (int64, int64, []string, error)
	// fail classifies an error before it is returned; nil returns it as is.
	fail func(t Target, ctx context.Context, err error) error
}

// apply validates every mapping first, then runs the operations in order:
// each one's file mappings as one batch, then its directory mappings, then
// its post-upload commands, fail-fast. It returns the results of the
// operations that completed and the first error, whose echoed paths are
// clipped.
func (t Target) apply(ctx context.Context, ops []Operation, o Options, d direction) ([]OperationResult, error) {
	o.call = &callState{}
	res, err := t.applyOps(ctx, ops, o, d)
	return res, clipPaths(err)
}

func (t Target) applyOps(ctx context.Context, ops []Operation, o Options, d direction) ([]OperationResult, error) {
	root, err := cleanRoot(t.Root)
	if err != nil {
		return nil, err
	}
	t.Root = root
	if err := validateOps(ops, t, d.inbound); err != nil {
		return nil, err
	}
	fail := func(err error) error {
		if d.fail == nil {
			return err
		}
		return d.fail(t, ctx, err)
	}
	results := make([]OperationResult, 0, len(ops))
	for _, op := range ops {
		res := OperationResult{ID: op.ID}
		add := func(n, b int64) { res.FilesTransferred += n; res.BytesTransferred += b }
		var files []Mapping
		for _, m := range op.Files {
			if m.Kind == KindFile {
				files = append(files, m)
			}
		}
		if len(files) > 0 {
			n, b, err := d.files(t, ctx, files, o)
			if err != nil {
				return results, fail(err)
			}
			add(n, b)
		}
		for _, m := range op.Files {
			if m.Kind != KindDirectory {
				continue
			}
			n, b, omitted, err := d.dir(t, ctx, m, o)
			if err != nil {
				return results, fail(err)
			}
			add(n, b)
			res.Directories = append(res.Directories, o.takeReports()...)
			res.OmittedUnsafeLinkCount += int64(len(omitted))
			if room := MaxOmittedListed - len(res.OmittedUnsafeLinks); room > 0 {
				res.OmittedUnsafeLinks = append(res.OmittedUnsafeLinks, omitted[:min(room, len(omitted))]...)
			}
		}
		if err := t.postUpload(ctx, op.PostUploadCommands, o); err != nil {
			return results, fail(err)
		}
		results = append(results, res)
	}
	return results, nil
}

// validateOps checks every mapping before anything moves, so a bad mapping
// late in the list cannot leave earlier operations half-applied.
func validateOps(ops []Operation, t Target, inbound bool) error {
	for _, op := range ops {
		for _, m := range op.Files {
			if err := m.validate(); err != nil {
				return err
			}
			sandboxPath, what := m.TargetPath, "target"
			if !inbound {
				sandboxPath, what = m.SourcePath, "source"
			}
			if _, err := confineAs(what, t.Root, sandboxPath); err != nil {
				return err
			}
		}
		for _, c := range op.PostUploadCommands {
			if strings.TrimSpace(c.Command) == "" {
				return fmt.Errorf("%w: empty post-upload command", ErrInvalidOperation)
			}
			if strings.ContainsRune(c.Command, 0) {
				// A shell drops the NUL and would run another command.
				return fmt.Errorf("%w: post-upload command contains a NUL byte", ErrInvalidOperation)
			}
			if c.Cwd != "" {
				if _, err := confineAs("command cwd", t.Root, c.Cwd); err != nil {
					return err
				}
			}
		}
		if len(op.PostUploadCommands) > 0 && t.RunCommand == nil {
			return fmt.Errorf("%w: post-upload commands need Target.RunCommand", ErrInvalidOperation)
		}
	}
	return nil
}

// postUpload runs an operation's commands verbatim, in order, fail-fast
// (docs/behavior.md#post-upload), with the configured command limit (minimumTimeoutMs does not
// apply, docs/behavior.md#transfer-timeout).
func (t Target) postUpload(ctx context.Context, cmds []Command, o Options) error {
	for _, c := range cmds {
		cwd := t.Root
		if c.Cwd != "" {
			cwd, _ = confine(t.Root, c.Cwd)
		}
		if err := traced(ctx, "postUploadCommand", func() error { return t.postUploadOne(ctx, c, cwd, o) }); err != nil {
			return err
		}
	}
	return nil
}

func (t Target) postUploadOne(ctx context.Context, c Command, cwd string, o Options) error {
	timeout := o.commandTimeout(c)
	cctx, cancel := withTimeout(ctx, timeout)
	code, stdout, stderr, err := t.RunCommand(cctx, c.Command, cwd, timeout)
	cancel()
	if err != nil {
		return fmt.Errorf("Daytona post-upload command failed: %w", err)
	}
	if code != 0 {
		d := strings.TrimSpace(stderr)
		if d == "" {
			d = strings.TrimSpace(stdout)
		}
		return &PostUploadError{Exit: code, Detail: d}
	}
	return nil
}
