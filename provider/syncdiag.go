package provider

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/rpc"
	filesync "github.com/daytonaworker/daytona-worker/sync"
)

// Sync-out error diagnostics (docs/host.md#sync-error-diagnostics): a
// failed environmentSyncOut carries, in error.data, what the first-party
// plugin's SDK attaches: an error code, HTTP status, exit code, transfer
// step and failure kind, each from the host's allowlist, derived here from
// the sync package's typed errors and the daytona client's, never from
// text the sandbox or the provider wrote.

// syncOutError is a syncOut failure with its diagnostic: the message, the
// code and errors.Is/As are the wrapped error's.
type syncOutError struct {
	err  error
	data rpc.SyncErrorData
}

func (e *syncOutError) Error() string { return e.err.Error() }
func (e *syncOutError) Unwrap() error { return e.err }
func (e *syncOutError) RPCData() any  { return e.data }

// withSyncDiagnostic attaches the diagnostic of err, when one is known.
func withSyncDiagnostic(err error) error {
	if err == nil {
		return nil
	}
	d, ok := syncDiagnostic(err).Sanitize()
	if !ok {
		return err
	}
	return &syncOutError{err: err, data: rpc.SyncErrorData{Schema: rpc.SyncErrorSchema, Diagnostic: d}}
}

// exitEscape is the guard's exit for a source it refuses to resolve: an
// escape, or (detail MissingSource) a source that does not exist.
const exitEscape = 42

// syncDiagnostic maps a syncOut error to its diagnostic.
func syncDiagnostic(err error) rpc.SyncErrorDiagnostic {
	d := rpc.SyncErrorDiagnostic{ErrorCode: errorCode(err)}
	var resp *daytona.ErrorResponse
	if errors.As(err, &resp) {
		d.HTTPStatus = resp.StatusCode
	}
	var sce *filesync.SandboxCommandError
	var ae *filesync.ArchiveError
	var se *filesync.StreamError
	switch {
	case errors.Is(err, filesync.ErrSandboxNotFound):
		d.TransferStep = "sandbox_access"
		if d.HTTPStatus == 0 {
			d.HTTPStatus = 404
		}
	case errors.As(err, &ae):
		d.TransferStep, d.TransferFailureKind = "archive_validate", archiveFailureKind(ae.Reason)
	case errors.As(err, &sce):
		d.ExitCode, d.TransferFailureKind = sce.Exit, "command_failed"
		switch sce.Stage {
		case filesync.StageGuard:
			d.TransferStep = "sandbox_guard"
		case filesync.StageStream:
			d.TransferStep = "archive_download"
		default:
			d.TransferStep = "archive_create"
		}
		// The detail's last line: the canonicaliser's own complaint may
		// come first.
		lines := strings.Split(strings.TrimSpace(sce.Detail), "\n")
		if sce.Exit == exitEscape && strings.TrimSpace(lines[len(lines)-1]) == filesync.MissingSource {
			d.ErrorCode = "ENOENT" // the source does not exist
		}
	case errors.As(err, &se):
		d.TransferStep, d.TransferFailureKind = "archive_download", "download_failed"
	case errors.Is(err, filesync.ErrTransfer):
		d.TransferStep, d.TransferFailureKind = "file_download", "download_failed"
		if filesync.StageOf(err) == filesync.StageArchiveDownload {
			d.TransferStep = "archive_download"
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			d.TransferFailureKind = "download_missing"
		}
	case errors.Is(err, filesync.ErrHostSpace):
		d.TransferStep = "archive_extract"
	case errors.Is(err, daytona.ErrNotFound), resp != nil:
		d.TransferStep = "sandbox_access"
	}
	return d
}

// archiveFailureKind tells the host-side listing limits from the other
// refusals of a sandbox-authored archive.
func archiveFailureKind(reason string) string {
	switch reason {
	case filesync.ReasonTooMany:
		return "listing_entry_limit"
	case filesync.ReasonOversized, filesync.ReasonTotal:
		return "listing_byte_limit"
	}
	return "unsafe_archive"
}

// errorCode is the allowlisted code of err's chain, or "unknown".
func errorCode(err error) string {
	var errno syscall.Errno
	var dns *net.DNSError
	switch {
	case errors.Is(err, filesync.ErrDiskFull), errors.Is(err, filesync.ErrHostSpace):
		return "ENOSPC"
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return "ENOTFOUND"
		}
		return "EAI_AGAIN"
	case errors.As(err, &errno):
		for _, c := range []struct {
			errno syscall.Errno
			code  string
		}{
			{syscall.ENOENT, "ENOENT"}, {syscall.EACCES, "EACCES"}, {syscall.EPERM, "EPERM"},
			{syscall.ENOSPC, "ENOSPC"}, {syscall.EIO, "EIO"}, {syscall.EXDEV, "EXDEV"},
			{syscall.ENOTDIR, "ENOTDIR"}, {syscall.EISDIR, "EISDIR"}, {syscall.ECONNRESET, "ECONNRESET"},
			{syscall.ECONNREFUSED, "ECONNREFUSED"}, {syscall.ETIMEDOUT, "ETIMEDOUT"}, {syscall.EPIPE, "EPIPE"},
		} {
			if errno == c.errno {
				return c.code
			}
		}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, daytona.ErrTimeout):
		return "ETIMEDOUT"
	case errors.Is(err, context.Canceled):
		return "ABORT_ERR"
	}
	return "unknown"
}
