package sync

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/daytonaworker/daytona-worker/internal/clamp"
)

// sentinel is the type of the package's sentinel errors: a string constant
// is its own message, and as a constant no caller can reassign it.
type sentinel string

func (e sentinel) Error() string { return string(e) }

// Sentinel errors. Every error SyncIn and SyncOut return for a failure of
// their own matches one of these with errors.Is; errors.As gives the typed
// details (*SandboxCommandError, *ArchiveError, *PathError, *StreamError,
// *PostUploadError).
const (
	// ErrSandboxNotFound is the stable, unrecoverable code of a sandbox
	// that was deleted under a sync (docs/behavior.md#sync). Its message is
	// exactly "daytona_sandbox_not_found": no provider detail escapes.
	ErrSandboxNotFound sentinel = "daytona_sandbox_not_found"
	// ErrInvalidMinimumTimeout is an out-of-range minimumTimeoutMs (docs/behavior.md#transfer-timeout);
	// the RPC layer answers it with -32602.
	ErrInvalidMinimumTimeout sentinel = "minimumTimeoutMs must be a positive whole number no greater than 1800000."
	// ErrNoRemoteDir is a Target without a usable Root (the lease metadata
	// lacks remoteCwd); its message is the upstream text of docs/behavior.md#sync.
	ErrNoRemoteDir sentinel = "Daytona file sync requires a workspace remote dir on the lease metadata."
	// ErrNotConfined matches a sandbox path outside the lease's remote dir,
	// lexically or after the sandbox resolved it.
	ErrNotConfined sentinel = "sync: path not confined to the workspace remote dir"
	// ErrUnsafeArchive matches a sandbox-authored archive that was refused.
	ErrUnsafeArchive sentinel = "sync: unsafe archive"
	// ErrDiskFull matches a sandbox-side write that ran out of disk space,
	// quota or file size (the trigger of the terminal fallbacks, docs/behavior.md#streaming-export/docs/behavior.md#single-file-export).
	ErrDiskFull sentinel = "sync: sandbox disk full"
	// ErrStream matches a terminal-stream protocol violation or failure.
	ErrStream sentinel = "sync: terminal stream failed"
	// ErrHostSpace matches a host write refused because it would leave less
	// than the free-space reserve (docs/behavior.md#streaming-export).
	ErrHostSpace sentinel = "sync: host free-space reserve reached"
	// ErrTransfer matches a failed upload or download.
	ErrTransfer sentinel = "sync: transfer failed"
	// ErrPostUpload matches a post-upload command that failed (docs/behavior.md#post-upload).
	ErrPostUpload sentinel = "sync: post-upload command failed"
	// ErrInvalidOperation matches a malformed operation or mapping.
	ErrInvalidOperation sentinel = "sync: invalid operation"
)

// maxEcho bounds every piece of caller input (paths, kinds) and sandbox
// output quoted in an error: a 10 MB sourcePath must not become a 10 MB
// error message on the wire, in the host's logs and in its run records.
const maxEcho = clamp.MaxEcho

// clip is clamp.Echo: the first maxEcho characters, then "…" if cut.
func clip(s string) string { return clamp.Echo(s) }

// clipPaths bounds the host paths that standard-library errors in err's
// chain echo (*fs.PathError, *os.LinkError), in place: those errors were
// made for this call and are owned by it. Every error SyncIn and SyncOut
// return passes through here; an error wrapped by fmt.Errorf must pass
// through it before, since fmt.Errorf renders its message at once.
func clipPaths(err error) error {
	var walk func(error)
	walk = func(e error) {
		for e != nil {
			switch x := e.(type) {
			case *fs.PathError:
				x.Path = clip(x.Path)
			case *os.LinkError:
				x.Old, x.New = clip(x.Old), clip(x.New)
			}
			switch u := e.(type) {
			case interface{ Unwrap() error }:
				e = u.Unwrap()
			case interface{ Unwrap() []error }:
				for _, c := range u.Unwrap() {
					walk(c)
				}
				return
			default:
				return
			}
		}
	}
	walk(err)
	return err
}

// SandboxCommandError is a sandbox-side script (guard, promote, pack,
// extract) that exited non-zero. Exit codes follow docs/behavior.md#sync:
// 40 no canonicaliser, 41 root unresolvable, 42 escape, 43 copy/rename/
// extract failed, 44 source is a symlink, 45 not a regular file/directory.
// Exit 47 (a symlink loop under a followed directory export) is reported
// as an *ArchiveError instead, since it refuses the tree's content.
type SandboxCommandError struct {
	What   string // e.g. "Daytona outbound symlink-escape guard command"
	Exit   int
	Detail string // bounded sandbox output
	Stage  Stage  // the outbound step that ran the command, if one did
}

// Stage names the outbound step a failed sandbox command belongs to, for
// callers that report it (the host's sync diagnostics): typed, so they
// need not read it from What, which can hold a path.
type Stage string

// The outbound stages.
const (
	StageGuard  Stage = "guard"  // the validate-and-snapshot guard
	StageExport Stage = "export" // the directory export to a scratch archive
	StageStream Stage = "stream" // a terminal-streamed export
	// StageArchiveDownload is the download of a directory's archive (a
	// transfer, not a command).
	StageArchiveDownload Stage = "archive download"
)

// StageOf is the stage named by the first sandbox command error or
// transfer error in err's chain ("" = none named).
func StageOf(err error) Stage {
	var sce *SandboxCommandError
	if errors.As(err, &sce) {
		return sce.Stage
	}
	var te *transferError
	if errors.As(err, &te) {
		return te.stage
	}
	return ""
}

func (e *SandboxCommandError) Error() string {
	return withDetail(fmt.Sprintf("%s failed (exit %d)", e.What, e.Exit), e.Detail)
}

// withDetail appends bounded sandbox output, if any, to msg.
func withDetail(msg, detail string) string {
	if detail == "" {
		return msg
	}
	return msg + ": " + clip(detail)
}

// Is matches ErrNotConfined for the escape exits and ErrDiskFull when the
// output carries a disk-full signature.
func (e *SandboxCommandError) Is(target error) bool {
	switch target {
	case ErrNotConfined:
		return e.Exit == 41 || e.Exit == 42
	case ErrDiskFull:
		return isDiskFull(e.Detail)
	}
	return false
}

// PathError is a mapping path that failed the lexical confinement check.
type PathError struct {
	Msg  string
	Path string
}

func (e *PathError) Error() string { return e.Msg + ": " + clip(e.Path) }

// Unwrap makes errors.Is(err, ErrNotConfined) true.
func (e *PathError) Unwrap() error { return ErrNotConfined }

// ArchiveError is a refused entry of a sandbox-authored archive. Reason
// is one of the docs/behavior.md#sync-out-dirs texts ("tarball member that escapes the extraction dir",
// ...); Name is the member (bounded, quoted).
type ArchiveError struct {
	Reason string
	Name   string
}

func (e *ArchiveError) Error() string {
	return fmt.Sprintf("Daytona syncOut refusing %s: %q", e.Reason, clip(e.Name))
}

// Unwrap makes errors.Is(err, ErrUnsafeArchive) true.
func (e *ArchiveError) Unwrap() error { return ErrUnsafeArchive }

// StreamError is a failure of the terminal-streamed export (docs/behavior.md#streaming-export/docs/behavior.md#single-file-export).
type StreamError struct {
	Msg string
	Err error // optional cause
}

func (e *StreamError) Error() string {
	if e.Err != nil {
		return "Daytona syncOut terminal stream: " + e.Msg + ": " + e.Err.Error()
	}
	return "Daytona syncOut terminal stream: " + e.Msg
}

// Is matches ErrStream.
func (e *StreamError) Is(target error) bool { return target == ErrStream }

// Unwrap returns the cause.
func (e *StreamError) Unwrap() error { return e.Err }

// PostUploadError is a post-upload command with a non-zero exit (docs/behavior.md#post-upload).
type PostUploadError struct {
	Exit   int
	Detail string
}

func (e *PostUploadError) Error() string {
	return withDetail(fmt.Sprintf("Daytona post-upload command failed (exit %d)", e.Exit), e.Detail)
}

// Unwrap makes errors.Is(err, ErrPostUpload) true.
func (e *PostUploadError) Unwrap() error { return ErrPostUpload }

// transferError wraps a client error of an upload/download with a stable
// prefix; the daytona client already keeps secrets out of its errors.
type transferError struct {
	msg   string
	err   error
	stage Stage
}

func (e *transferError) Error() string { return e.msg + ": " + e.err.Error() }

func (e *transferError) Unwrap() []error {
	return []error{ErrTransfer, e.err}
}

// forPath is the suffix naming a mapping path in a message, clipped.
func forPath(p string) string { return " for " + clip(p) }
