package provider

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	cmdexec "github.com/daytonaworker/daytona-worker/exec"
	"github.com/daytonaworker/daytona-worker/internal/clamp"
	"github.com/daytonaworker/daytona-worker/rpc"
	filesync "github.com/daytonaworker/daytona-worker/sync"
)

func (d *Driver) syncIn(ctx context.Context, p rpc.SyncParams) (rpc.SyncResult, error) {
	res, err := d.syncOp(ctx, p, filesync.SyncIn)
	if err == nil {
		d.recordWritable(p)
	}
	return res, err
}

func (d *Driver) syncOut(ctx context.Context, p rpc.SyncParams) (rpc.SyncResult, error) {
	return d.syncOp(ctx, p, filesync.SyncOut)
}

type syncFunc func(context.Context, filesync.Target, []filesync.Operation, filesync.Options) ([]filesync.OperationResult, error)

// syncOp serves environmentSyncIn/Out: validate everything before any
// provider call, then run the operations inside the lease's activity gate.
func (d *Driver) syncOp(ctx context.Context, p rpc.SyncParams, run syncFunc) (rpc.SyncResult, error) {
	minimum, err := filesync.ValidateMinimumTimeout(p.MinimumTimeoutMs)
	if err != nil {
		return rpc.SyncResult{}, rpc.InvalidParams("%v", err)
	}
	ops, err := syncOperations(p.Operations)
	if err != nil {
		return rpc.SyncResult{}, err
	}
	leaseID := deref(p.Lease.ProviderLeaseID)
	if leaseID == "" {
		return rpc.SyncResult{}, rpc.InvalidParams("Daytona file sync requires a sandbox lease id")
	}
	root, _ := p.Lease.Metadata["remoteCwd"].(string)
	if strings.ContainsRune(root, 0) {
		return rpc.SyncResult{}, nulParam("lease.metadata.remoteCwd")
	}
	if root = strings.TrimSpace(root); !strings.HasPrefix(root, "/") {
		return rpc.SyncResult{}, rpc.InvalidParams("Daytona file sync requires the lease's remote working directory")
	}
	c, err := d.resolveAccount(p.Config)
	if err != nil {
		return rpc.SyncResult{}, err
	}
	k := c.scope(p.EnvironmentBase, leaseID)
	ctx, cancel := context.WithTimeout(ctx, max(c.cfg.Timeout(), minimum)+answerMargin)
	defer cancel()
	shell := shellOf(p.Lease.Metadata)
	var results []filesync.OperationResult
	err = d.scopes.withActivity(ctx, k, leaseID, false, func(ctx context.Context) error {
		sb, _, err := d.sandbox(ctx, c, k, leaseID)
		if errors.Is(err, daytona.ErrNotFound) {
			return filesync.ErrSandboxNotFound
		}
		if err != nil {
			return err
		}
		if sb, err = d.ensureStarted(ctx, c, sb); err != nil {
			return err
		}
		t := filesync.Target{Client: c.client, Sandbox: sb.Ref(), Root: root,
			RunCommand: d.postUploadRunner(c, sb, k, shell), DiskAllocation: int64(math.Round(sb.Disk)) << 30}
		results, err = run(ctx, t, ops, filesync.Options{Timeout: c.cfg.Timeout(), MinimumTimeout: minimum, Logger: d.log})
		if errors.Is(err, daytona.ErrNotFound) {
			return errors.Join(filesync.ErrSandboxNotFound, err)
		}
		if err == nil {
			d.handles.markFresh(k)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, filesync.ErrSandboxNotFound) {
			return rpc.SyncResult{}, filesync.ErrSandboxNotFound // a stable code, no provider detail
		}
		return rpc.SyncResult{}, err
	}
	out := rpc.SyncResult{Operations: make([]rpc.SyncOperationResult, 0, len(results))}
	for _, r := range results {
		res := rpc.SyncOperationResult{OperationID: r.ID,
			FilesTransferred: r.FilesTransferred, BytesTransferred: r.BytesTransferred}
		if r.OmittedUnsafeLinkCount > 0 {
			// Symlinks a directory export left out (absolute or escaping
			// targets): the count, and the first paths so an operator can
			// tell a venv's interpreter link from something that matters.
			res.Metadata = map[string]any{"omittedUnsafeLinks": map[string]any{
				"count": r.OmittedUnsafeLinkCount, "paths": r.OmittedUnsafeLinks}}
		}
		out.Operations = append(out.Operations, res)
	}
	return out, nil
}

// nulField names the first field of a file mapping that holds a NUL byte
// ("" if none). A NUL cannot be part of a path: the kernel would read a
// shorter one and a shell silently drops it, so the sync would touch a
// path the host never named.
func nulField(f rpc.SyncFileMapping) string {
	switch {
	case strings.ContainsRune(f.SourcePath, 0):
		return "sourcePath"
	case strings.ContainsRune(f.TargetPath, 0):
		return "targetPath"
	case f.WritablePath != nil && strings.ContainsRune(*f.WritablePath, 0):
		return "writablePath"
	}
	for k, e := range f.Exclude {
		if strings.ContainsRune(e, 0) {
			return fmt.Sprintf("exclude[%d]", k)
		}
	}
	return ""
}

// postUploadRunner runs a post-upload command verbatim with the lease's
// shell, one-shot (it must not wait behind a long session command).
func (d *Driver) postUploadRunner(c *account, sb *daytona.Sandbox, k scopeKey, shell string) filesync.RunCommandFunc {
	return func(ctx context.Context, command, cwd string, timeout time.Duration) (int, string, string, error) {
		res, err := d.runner.Execute(ctx, cmdexec.Target{Client: c.client, Sandbox: sb.Ref(), LeaseKey: string(k)},
			cmdexec.Request{Command: shell, Args: []string{"-c", command}, Cwd: cwd, Timeout: timeout, BypassSession: true}, nil)
		if err != nil {
			return -1, res.Stdout, res.Stderr, err
		}
		if res.TimedOut || res.ExitCode == nil {
			return -1, res.Stdout, res.Stderr, fmt.Errorf("post-upload command timed out after %s", timeout)
		}
		return *res.ExitCode, res.Stdout, res.Stderr, nil
	}
}

// syncOperations converts and validates the wire operations.
func syncOperations(in []rpc.SyncOperation) ([]filesync.Operation, error) {
	out := make([]filesync.Operation, 0, len(in))
	for i, op := range in {
		o := filesync.Operation{ID: op.OperationID}
		for j, f := range op.Files {
			m := filesync.Mapping{SourcePath: f.SourcePath, TargetPath: f.TargetPath, Kind: filesync.Kind(f.Kind),
				Exclude: f.Exclude, FollowSymlinks: f.FollowSymlinks}
			if m.Kind != filesync.KindFile && m.Kind != filesync.KindDirectory {
				return nil, rpc.InvalidParams("invalid params: operations[%d].files[%d].kind must be \"file\" or \"directory\"", i, j)
			}
			if f.SourcePath == "" || f.TargetPath == "" {
				return nil, rpc.InvalidParams("invalid params: operations[%d].files[%d] needs sourcePath and targetPath", i, j)
			}
			if name := nulField(f); name != "" {
				return nil, nulParam(fmt.Sprintf("operations[%d].files[%d].%s", i, j, name))
			}
			if f.Mode != nil {
				mode := *f.Mode
				if mode != math.Trunc(mode) || mode < 0 || mode > 0o7777 {
					return nil, rpc.InvalidParams("invalid params: operations[%d].files[%d].mode must be a permission number from 0 to 0o7777", i, j)
				}
				u := uint32(mode)
				m.Mode = &u
			}
			o.Files = append(o.Files, m)
		}
		for j, cmd := range op.PostUploadCommands {
			if strings.TrimSpace(cmd.Command) == "" {
				return nil, rpc.InvalidParams("invalid params: operations[%d].postUploadCommands[%d].command is empty", i, j)
			}
			if strings.ContainsRune(cmd.Command, 0) {
				return nil, nulParam(fmt.Sprintf("operations[%d].postUploadCommands[%d].command", i, j))
			}
			if cmd.Cwd != nil && strings.ContainsRune(*cmd.Cwd, 0) {
				return nil, nulParam(fmt.Sprintf("operations[%d].postUploadCommands[%d].cwd", i, j))
			}
			pc := filesync.Command{Command: cmd.Command, Cwd: deref(cmd.Cwd)}
			if cmd.TimeoutMs != nil && *cmd.TimeoutMs > 0 {
				pc.Timeout = clamp.Millis(*cmd.TimeoutMs)
			}
			o.PostUploadCommands = append(o.PostUploadCommands, pc)
		}
		out = append(out, o)
	}
	return out, nil
}
