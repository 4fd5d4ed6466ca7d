package provider

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/clamp"
	"github.com/daytonaworker/daytona-worker/rpc"
	filesync "github.com/daytonaworker/daytona-worker/sync"
)

func (d *Driver) syncIn(ctx context.Context, p rpc.SyncParams) (rpc.SyncResult, error) {
	res, err := d.syncOp(ctx, p, syncDirection{name: "syncIn", run: filesync.SyncIn})
	if err == nil {
		d.recordWritable(p)
	}
	return res, err
}

func (d *Driver) syncOut(ctx context.Context, p rpc.SyncParams) (rpc.SyncResult, error) {
	res, err := d.syncOp(ctx, p, syncDirection{name: "syncOut", run: filesync.SyncOut, classifyNotFound: true})
	return res, withSyncDiagnostic(err)
}

type syncFunc func(context.Context, filesync.Target, []filesync.Operation, filesync.Options) ([]filesync.OperationResult, error)

// syncDirection is what differs between the two sync methods at the RPC
// edge: the name their messages carry, and whether a deleted sandbox
// becomes the stable daytona_sandbox_not_found code. Only syncOut
// classifies it; the host treats a syncIn failure as retryable and gets
// the provider's own not-found error, as the reference plugin does.
type syncDirection struct {
	name             string
	run              syncFunc
	classifyNotFound bool
}

// syncOp serves environmentSyncIn/Out: validate everything before any
// provider call, then run the operations inside the lease's activity gate.
func (d *Driver) syncOp(ctx context.Context, p rpc.SyncParams, dir syncDirection) (rpc.SyncResult, error) {
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
		return rpc.SyncResult{}, rpc.InvalidParams("Daytona %s requires a provider lease ID.", dir.name)
	}
	root, _ := p.Lease.Metadata["remoteCwd"].(string)
	if strings.ContainsRune(root, 0) {
		return rpc.SyncResult{}, nulParam("lease.metadata.remoteCwd")
	}
	if root = strings.TrimSpace(root); !strings.HasPrefix(root, "/") {
		return rpc.SyncResult{}, rpc.InvalidParams("%s", filesync.ErrNoRemoteDir)
	}
	c, err := d.resolveAccount(p.Config)
	if err != nil {
		return rpc.SyncResult{}, err
	}
	k := c.scope(p.EnvironmentBase, leaseID)
	ctx, cancel := context.WithTimeout(ctx, max(c.cfg.Timeout(), minimum)+answerMargin)
	defer cancel()
	var results []filesync.OperationResult
	err = d.scopes.withActivity(ctx, k, leaseID, false, func(ctx context.Context) error {
		sb, _, err := d.sandbox(ctx, c, k, leaseID)
		if dir.classifyNotFound && errors.Is(err, daytona.ErrNotFound) {
			return filesync.ErrSandboxNotFound
		}
		if err != nil {
			return err
		}
		if sb, err = d.ensureStarted(ctx, c, sb); err != nil {
			return err
		}
		t := filesync.Target{Client: c.client, Sandbox: sb.Ref(), Root: root,
			RunCommand: postUploadRunner(c, sb), DiskAllocation: int64(math.Round(sb.Disk)) << 30}
		results, err = dir.run(ctx, t, ops, filesync.Options{Timeout: c.cfg.Timeout(), MinimumTimeout: minimum, Logger: d.log})
		if dir.classifyNotFound && errors.Is(err, daytona.ErrNotFound) {
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
		if len(r.Directories) > 0 {
			// Which way each directory mapping went, in either direction
			// (only what differed, or the whole tree) and why
			// (docs/sync.md#delta).
			if res.Metadata == nil {
				res.Metadata = map[string]any{}
			}
			res.Metadata["directorySync"] = directorySync(r.Directories)
		}
		out.Operations = append(out.Operations, res)
	}
	return out, nil
}

// directorySync is the metadata.directorySync list of an operation.
func directorySync(reps []filesync.DirReport) []map[string]any {
	out := make([]map[string]any, len(reps))
	for i, r := range reps {
		d := map[string]any{"targetPath": r.TargetPath, "way": r.Way,
			"listedEntries": r.Listed, "unchangedEntries": r.Unchanged}
		if r.Reason != "" {
			d["reason"] = r.Reason
		}
		out[i] = d
	}
	return out
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

// postUploadRunner runs a post-upload command exactly as the reference
// plugin's SDK call sends it: one POST /process/execute whose command is
// sdkOneShot(command), with the cwd and the timeout in whole seconds. No
// login-shell profile, no git environment, no session: the host's command
// runs as it wrote it, and does not wait behind a long session command.
// The daemon answers stdout and stderr interleaved, reported as stdout.
func postUploadRunner(c *account, sb *daytona.Sandbox) filesync.RunCommandFunc {
	return func(ctx context.Context, command, cwd string, timeout time.Duration) (int, string, string, error) {
		sec := int((timeout + time.Second - 1) / time.Second)
		res, _, err := c.client.Toolbox.Execute(ctx, sb.Ref(), &daytona.ExecuteRequest{Command: sdkOneShot(command), Cwd: cwd, Timeout: sec})
		if errors.Is(err, daytona.ErrTimeout) || (err != nil && ctx.Err() != nil) {
			return -1, "", "", fmt.Errorf("post-upload command timed out after %s", timeout)
		}
		if err != nil {
			return -1, "", "", err
		}
		return res.ExitCode, res.Result, "", nil
	}
}

// sdkOneShot is the command text the Daytona TypeScript SDK's
// executeCommand sends for a command: the command base64-encoded (so no
// character of it needs quoting) and decoded into a plain sh. The base64
// alphabet holds no quote, so the single quotes cannot be broken out of.
func sdkOneShot(command string) string {
	return `sh -c "echo '` + base64.StdEncoding.EncodeToString([]byte(command)) + `' | base64 -d | sh"`
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
