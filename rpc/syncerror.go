package rpc

import "slices"

// The diagnostic a failed environmentSyncOut carries in error.data
// (docs/host.md#sync-error-diagnostics): known codes and numbers only,
// never text, paths or names. The host re-validates every field against
// the same allowlists and keeps only what passes.

// SyncErrorSchema is error.data.schema of a sync-out failure.
const SyncErrorSchema = "paperclip/environment-sync-error/v1"

// SyncErrorData is error.data of a failed environmentSyncOut.
type SyncErrorData struct {
	Schema     string              `json:"schema"`
	Diagnostic SyncErrorDiagnostic `json:"diagnostic"`
}

// SyncErrorDiagnostic is the evidence: errorCode always ("unknown" when
// none of the allowlist), the others only when known.
type SyncErrorDiagnostic struct {
	ErrorCode           string `json:"errorCode"`
	HTTPStatus          int    `json:"httpStatus,omitempty"`
	ExitCode            int    `json:"exitCode,omitempty"`
	TransferStep        string `json:"transferStep,omitempty"`
	TransferFailureKind string `json:"transferFailureKind,omitempty"`
}

// The allowlists, the SDK's and the host's.
var (
	SyncErrorCodes = []string{
		"ENOENT", "EACCES", "EPERM", "ENOSPC", "EIO", "EXDEV", "ENOTDIR", "EISDIR",
		"ECONNRESET", "ECONNREFUSED", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EAI_AGAIN",
		"ABORT_ERR", "UND_ERR_CONNECT_TIMEOUT", "UND_ERR_SOCKET",
	}
	SyncTransferSteps = []string{
		"sandbox_access", "sandbox_guard", "file_download", "file_finalize",
		"archive_create", "archive_download", "archive_validate", "archive_extract",
	}
	SyncTransferFailureKinds = []string{
		"command_failed", "download_failed", "download_missing", "unsafe_archive",
		"listing_timeout", "listing_entry_limit", "listing_byte_limit", "listing_line_limit", "listing_stderr_limit",
	}
)

// Sanitize drops every field outside the allowlists, as the host does; it
// reports false when nothing but an unknown errorCode is left (the SDK then
// sends no data at all).
func (d SyncErrorDiagnostic) Sanitize() (SyncErrorDiagnostic, bool) {
	if !slices.Contains(SyncErrorCodes, d.ErrorCode) {
		d.ErrorCode = "unknown"
	}
	if d.HTTPStatus < 400 || d.HTTPStatus > 599 {
		d.HTTPStatus = 0
	}
	if d.ExitCode < 1 || d.ExitCode > 255 {
		d.ExitCode = 0
	}
	if !slices.Contains(SyncTransferSteps, d.TransferStep) {
		d.TransferStep = ""
	}
	if !slices.Contains(SyncTransferFailureKinds, d.TransferFailureKind) {
		d.TransferFailureKind = ""
	}
	return d, d.ErrorCode != "unknown" || d.HTTPStatus != 0 || d.ExitCode != 0 || d.TransferStep != "" || d.TransferFailureKind != ""
}
