package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/rpc"
	filesync "github.com/daytonaworker/daytona-worker/sync"
	"github.com/stretchr/testify/require"
)

// hostAccepts is the host's re-validation of a sync-out diagnostic
// (readEnvironmentSyncErrorDiagnostic): the schema, and every field from
// its allowlist.
func hostAccepts(t *testing.T, raw []byte) rpc.SyncErrorDiagnostic {
	t.Helper()
	var data struct {
		Schema     string                     `json:"schema"`
		Diagnostic map[string]json.RawMessage `json:"diagnostic"`
	}
	require.NoError(t, json.Unmarshal(raw, &data))
	require.Equal(t, "paperclip/environment-sync-error/v1", data.Schema)
	for k := range data.Diagnostic {
		require.Contains(t, []string{"errorCode", "httpStatus", "exitCode", "transferStep", "transferFailureKind"}, k)
	}
	var d rpc.SyncErrorDiagnostic
	require.NoError(t, json.Unmarshal(raw, &struct {
		D *rpc.SyncErrorDiagnostic `json:"diagnostic"`
	}{&d}))
	require.True(t, d.ErrorCode == "unknown" || slices.Contains(rpc.SyncErrorCodes, d.ErrorCode), d.ErrorCode)
	if d.HTTPStatus != 0 {
		require.True(t, d.HTTPStatus >= 400 && d.HTTPStatus <= 599)
	}
	if d.ExitCode != 0 {
		require.True(t, d.ExitCode >= 1 && d.ExitCode <= 255)
	}
	if d.TransferStep != "" {
		require.Contains(t, rpc.SyncTransferSteps, d.TransferStep)
	}
	if d.TransferFailureKind != "" {
		require.Contains(t, rpc.SyncTransferFailureKinds, d.TransferFailureKind)
	}
	return d
}

// diagnosticOf is error.data of a failed syncOut, as the host receives it.
func diagnosticOf(t *testing.T, err error) rpc.SyncErrorDiagnostic {
	t.Helper()
	require.Error(t, err)
	var dc rpc.DataCarrier
	require.True(t, errors.As(err, &dc), "no diagnostic on %v", err)
	raw, merr := json.Marshal(dc.RPCData())
	require.NoError(t, merr)
	return hostAccepts(t, raw)
}

// guardError is a refusal of the outbound guard with this exit and output.
func guardError(exit int, detail string) error {
	return &filesync.SandboxCommandError{What: "Daytona outbound symlink-escape guard command", Exit: exit, Detail: detail, Stage: filesync.StageGuard}
}

// The failures of a sync-out, each mapped to what the first-party plugin's
// SDK would report, from the sync package's typed errors.
func TestSyncDiagnosticMapsTypedErrors(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want rpc.SyncErrorDiagnostic
	}{
		{"missing source", guardError(42, "MISSING\n"),
			rpc.SyncErrorDiagnostic{ErrorCode: "ENOENT", ExitCode: 42, TransferStep: "sandbox_guard", TransferFailureKind: "command_failed"}},
		{"escape", guardError(42, "ESCAPE"),
			rpc.SyncErrorDiagnostic{ErrorCode: "unknown", ExitCode: 42, TransferStep: "sandbox_guard", TransferFailureKind: "command_failed"}},
		{"disk full in the sandbox", &filesync.SandboxCommandError{What: "Daytona outbound directory export command", Exit: 43, Detail: "tar: Wrote only 512 of 10240 bytes", Stage: filesync.StageExport},
			rpc.SyncErrorDiagnostic{ErrorCode: "ENOSPC", ExitCode: 43, TransferStep: "archive_create", TransferFailureKind: "command_failed"}},
		{"host disk full", fmt.Errorf("%w: a 10-byte write would leave less than 1 bytes free", filesync.ErrHostSpace),
			rpc.SyncErrorDiagnostic{ErrorCode: "ENOSPC", TransferStep: "archive_extract"}},
		{"unsafe archive", &filesync.ArchiveError{Reason: "tarball member that escapes the extraction dir", Name: "../x"},
			rpc.SyncErrorDiagnostic{ErrorCode: "unknown", TransferStep: "archive_validate", TransferFailureKind: "unsafe_archive"}},
		{"listing entry limit", &filesync.ArchiveError{Reason: filesync.ReasonTooMany, Name: "x"},
			rpc.SyncErrorDiagnostic{ErrorCode: "unknown", TransferStep: "archive_validate", TransferFailureKind: "listing_entry_limit"}},
		{"listing byte limit", &filesync.ArchiveError{Reason: filesync.ReasonTotal, Name: "x"},
			rpc.SyncErrorDiagnostic{ErrorCode: "unknown", TransferStep: "archive_validate", TransferFailureKind: "listing_byte_limit"}},
		{"deleted sandbox", filesync.ErrSandboxNotFound,
			rpc.SyncErrorDiagnostic{ErrorCode: "unknown", HTTPStatus: 404, TransferStep: "sandbox_access"}},
		{"deleted sandbox, the status known", errors.Join(filesync.ErrSandboxNotFound, &daytona.ErrorResponse{StatusCode: 410}),
			rpc.SyncErrorDiagnostic{ErrorCode: "unknown", HTTPStatus: 410, TransferStep: "sandbox_access"}},
		{"a missing source's word, another exit", guardError(41, "MISSING"),
			rpc.SyncErrorDiagnostic{ErrorCode: "unknown", ExitCode: 41, TransferStep: "sandbox_guard", TransferFailureKind: "command_failed"}},
		{"a missing source after the canonicaliser's complaint", guardError(42, "realpath: x: No such file\nMISSING\n"),
			rpc.SyncErrorDiagnostic{ErrorCode: "ENOENT", ExitCode: 42, TransferStep: "sandbox_guard", TransferFailureKind: "command_failed"}},
		{"MISSING not on the last line", guardError(42, "MISSING\nESCAPE"),
			rpc.SyncErrorDiagnostic{ErrorCode: "unknown", ExitCode: 42, TransferStep: "sandbox_guard", TransferFailureKind: "command_failed"}},
		{"streamed export of a path that says guard", &filesync.SandboxCommandError{What: "Daytona syncOut streamed export of /w/guard", Exit: 2, Stage: filesync.StageStream},
			rpc.SyncErrorDiagnostic{ErrorCode: "unknown", ExitCode: 2, TransferStep: "archive_download", TransferFailureKind: "command_failed"}},
		{"oversized member", &filesync.ArchiveError{Reason: filesync.ReasonOversized, Name: "x"},
			rpc.SyncErrorDiagnostic{ErrorCode: "unknown", TransferStep: "archive_validate", TransferFailureKind: "listing_byte_limit"}},
		{"terminal stream", &filesync.StreamError{Msg: "the stream ended early"},
			rpc.SyncErrorDiagnostic{ErrorCode: "unknown", TransferStep: "archive_download", TransferFailureKind: "download_failed"}},
		{"file download", fmt.Errorf("Daytona syncOut file download failed: %w", errors.Join(filesync.ErrTransfer, errors.New("reset"))),
			rpc.SyncErrorDiagnostic{ErrorCode: "unknown", TransferStep: "file_download", TransferFailureKind: "download_failed"}},
		{"a download cut short, the words of a directory's in its path", fmt.Errorf("Daytona syncOut download failed for /w/directory download failed: %w", errors.Join(filesync.ErrTransfer, io.ErrUnexpectedEOF)),
			rpc.SyncErrorDiagnostic{ErrorCode: "unknown", TransferStep: "file_download", TransferFailureKind: "download_missing"}},
		{"a provider answer", &daytona.ErrorResponse{StatusCode: 500},
			rpc.SyncErrorDiagnostic{ErrorCode: "unknown", HTTPStatus: 500, TransferStep: "sandbox_access"}},
		{"not found without a status", fmt.Errorf("get: %w", daytona.ErrNotFound),
			rpc.SyncErrorDiagnostic{ErrorCode: "unknown", TransferStep: "sandbox_access"}},
		{"a provider timeout", fmt.Errorf("get: %w", daytona.ErrTimeout),
			rpc.SyncErrorDiagnostic{ErrorCode: "ETIMEDOUT"}},
	}
	for _, c := range cases {
		require.Equal(t, c.want, diagnosticOf(t, withSyncDiagnostic(c.err)), c.name)
		require.Equal(t, c.err.Error(), withSyncDiagnostic(c.err).Error(), "%s: the message is the error's own", c.name)
	}
	// Nothing known: no data at all, as the SDK sends none.
	plain := errors.New("something else")
	require.Same(t, plain, withSyncDiagnostic(plain))
	invalid := rpc.InvalidParams("invalid params: x")
	require.ErrorIs(t, withSyncDiagnostic(invalid), rpc.ErrInvalidParams)
}

// Through the worker's own method, on the emulator: a missing source, an
// archive the host refuses, and an HTTP failure of the download.
func TestSyncOutFailuresCarryDiagnostics(t *testing.T) {
	e, l, _ := leased(t, nil)
	remote := l.Metadata["remoteCwd"].(string)
	syncOut := func(src, kind string) error {
		op := map[string]any{"operationId": "out", "files": []any{map[string]any{"sourcePath": src,
			"targetPath": filepath.Join(t.TempDir(), "out"), "kind": kind}}}
		_, err := e.call("environmentSyncOut", with(e.base(nil), "lease", l, "operations", []any{op}))
		return err
	}
	d := diagnosticOf(t, syncOut(remote+"/no-such-file", "file"))
	require.Equal(t, rpc.SyncErrorDiagnostic{ErrorCode: "ENOENT", ExitCode: 42, TransferStep: "sandbox_guard", TransferFailureKind: "command_failed"}, d)

	r, err := e.execute(l, "sh", []string{"-c", "mkdir -p hl && echo x > hl/a && mkfifo hl/p && echo y > f"})
	require.NoError(t, err)
	require.Zero(t, *r.ExitCode, r.Stderr)
	d = diagnosticOf(t, syncOut(remote+"/hl", "directory"))
	require.Equal(t, "archive_validate", d.TransferStep)
	require.Equal(t, "unsafe_archive", d.TransferFailureKind)

	e.srv.Inject(daytonatest.Fault{Method: "POST", Route: "/files/bulk-download", Status: 503, Times: 10})
	d = diagnosticOf(t, syncOut(remote+"/f", "file"))
	require.Equal(t, rpc.SyncErrorDiagnostic{ErrorCode: "unknown", HTTPStatus: 503, TransferStep: "file_download", TransferFailureKind: "download_failed"}, d)
	e.srv.ClearFaults()

	r, err = e.execute(l, "sh", []string{"-c", "rm hl/p"})
	require.NoError(t, err)
	require.Zero(t, *r.ExitCode, r.Stderr)
	e.srv.Inject(daytonatest.Fault{Method: "GET", Route: "/files/download", Status: 503})
	d = diagnosticOf(t, syncOut(remote+"/hl", "directory"))
	require.Equal(t, rpc.SyncErrorDiagnostic{ErrorCode: "unknown", HTTPStatus: 503, TransferStep: "archive_download", TransferFailureKind: "download_failed"}, d)
}

// TestSyncErrorCodeOfEachCause: the errorCode each cause in an error's
// chain maps to, as the SDK would name it, wrapped as the transport
// wraps it: a name that does not resolve is ENOTFOUND, a resolver that
// failed for now EAI_AGAIN, each errno its own name, a deadline ETIMEDOUT,
// a cancel ABORT_ERR, anything else "unknown".
func TestSyncErrorCodeOfEachCause(t *testing.T) {
	op := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: err} }
	for _, c := range []struct {
		err  error
		want string
	}{
		{op(&net.DNSError{Err: "no such host", Name: "daytona.invalid", IsNotFound: true}), "ENOTFOUND"},
		{op(&net.DNSError{Err: "server misbehaving", Name: "daytona.example", IsTemporary: true}), "EAI_AGAIN"},
		{op(os.NewSyscallError("connect", syscall.ECONNREFUSED)), "ECONNREFUSED"},
		{op(os.NewSyscallError("read", syscall.ECONNRESET)), "ECONNRESET"},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, "ENOENT"},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, "EACCES"},
		{&fs.PathError{Op: "chmod", Path: "/x", Err: syscall.EPERM}, "EPERM"},
		{&fs.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, "ENOSPC"},
		{&fs.PathError{Op: "read", Path: "/x", Err: syscall.EIO}, "EIO"},
		{&fs.PathError{Op: "rename", Path: "/x", Err: syscall.EXDEV}, "EXDEV"},
		{&fs.PathError{Op: "open", Path: "/x/y", Err: syscall.ENOTDIR}, "ENOTDIR"},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.EISDIR}, "EISDIR"},
		{op(os.NewSyscallError("connect", syscall.ETIMEDOUT)), "ETIMEDOUT"},
		{op(os.NewSyscallError("write", syscall.EPIPE)), "EPIPE"},
		{fmt.Errorf("%w: 10 bytes short", filesync.ErrDiskFull), "ENOSPC"},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.ELOOP}, "unknown"},
		{fmt.Errorf("download: %w", context.DeadlineExceeded), "ETIMEDOUT"},
		{fmt.Errorf("download: %w", context.Canceled), "ABORT_ERR"},
		{errors.New("something else"), "unknown"},
	} {
		require.Equal(t, c.want, errorCode(fmt.Errorf("sync: %w", c.err)), "%v", c.err)
	}
}
