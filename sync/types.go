package sync

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	stdsync "sync"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
)

// Kind is a mapping's kind.
type Kind string

// Mapping kinds (docs/host.md#sync).
const (
	KindFile      Kind = "file"
	KindDirectory Kind = "directory"
)

// Mapping is one PluginSyncFileMapping. For SyncIn SourcePath is a host
// path and TargetPath a sandbox path; for SyncOut the reverse. The advisory
// access/writablePath fields are the provider's business, not this package's.
type Mapping struct {
	SourcePath     string
	TargetPath     string
	Kind           Kind
	Mode           *uint32  // permission bits the target must end with (nil = default)
	Exclude        []string // globs, directories only
	FollowSymlinks bool
}

// Command is one post-upload command, run verbatim.
type Command struct {
	Command string
	Cwd     string        // "" = the sync root
	Timeout time.Duration // 0 = Options.Timeout (the configured command limit)
}

// Operation is one PluginSyncOperation.
type Operation struct {
	ID                 string
	Files              []Mapping
	PostUploadCommands []Command
}

// OperationResult is one entry of the sync result.
type OperationResult struct {
	ID               string
	FilesTransferred int64
	BytesTransferred int64
	// OmittedUnsafeLinkCount is how many sandbox symlinks this operation's
	// directory exports left out because their targets were absolute or
	// left the exported tree (SyncOut only; see downloadDir).
	OmittedUnsafeLinkCount int64
	// OmittedUnsafeLinks are the first MaxOmittedListed of them, as sandbox
	// paths (the mapping's sourcePath joined with the member name).
	OmittedUnsafeLinks []string
	// Directories says, per directory mapping in order, whether only what
	// differed moved or the whole tree, and why (docs/sync.md#delta).
	Directories []DirReport
}

// MaxOmittedListed is how many omitted link paths an OperationResult lists;
// the count covers the rest.
const MaxOmittedListed = 20

// RunCommandFunc runs a post-upload command in the sandbox (the provider
// wires the exec package's one-shot path). command is passed verbatim.
type RunCommandFunc func(ctx context.Context, command, cwd string, timeout time.Duration) (exitCode int, stdout, stderr string, err error)

// Target is the sandbox side of a sync: the client, the sandbox and the
// confinement root (the lease's remoteCwd).
type Target struct {
	Client  *daytona.Client
	Sandbox daytona.SandboxRef
	// Root is the lease's remoteCwd: every sandbox path must lie under it,
	// and scratch files are its direct children.
	Root string
	// RunCommand runs post-upload commands; required when an operation has any.
	RunCommand RunCommandFunc
	// DiskAllocation caps a terminal-streamed export, in bytes (docs/behavior.md#streaming-export).
	// 0 = read the sandbox's disk GiB from the control plane.
	DiskAllocation int64
}

// Options tunes a sync call.
type Options struct {
	// Timeout is the configured limit (config.timeoutMs) of every sync
	// round trip and of post-upload commands without their own. 0 = only
	// ctx bounds the call.
	Timeout time.Duration
	// MinimumTimeout is the host's minimumTimeoutMs (docs/behavior.md#transfer-timeout): file-transfer
	// round trips use max(MinimumTimeout, Timeout); commands keep Timeout.
	// Validate it with ValidateMinimumTimeout first.
	MinimumTimeout time.Duration
	// HostReserve is the free space every outbound host write must leave
	// (docs/behavior.md#streaming-export requires it of the terminal fallback; it is applied to every
	// SyncOut write so a hostile sandbox cannot fill the host disk).
	// 0 = DefaultHostReserve; negative = none.
	HostReserve int64
	// HostFreeSpace reports the bytes available to the worker on the
	// filesystem holding path. nil = statfs. Tests inject it.
	HostFreeSpace func(path string) (int64, error)
	// CleanupTimeout bounds terminal cleanup (docs/behavior.md#streaming-export). 0 = 5 s.
	CleanupTimeout time.Duration
	// Limits bounds sandbox-authored archives. Zero fields take defaults.
	Limits Limits
	// Logger receives operator-facing notices (e.g. an export that omitted
	// unsafe links). nil discards them.
	Logger *slog.Logger
	// StaleAfter is the age from which a reserved scratch name
	// (.paperclip-upload-<uuid>[.tar]) is a leftover of a killed sync and is
	// swept: next to a host target before SyncOut writes there, and in the
	// sandbox root at the first sandbox command of every call. It must
	// exceed the longest a sync call can run, or a concurrent call's live
	// scratch would be swept. 0 = DefaultStaleAfter.
	StaleAfter time.Duration
	// Now is the clock the host-side sweep compares modification times
	// with. nil = time.Now. (The sandbox-side sweep uses the sandbox's clock
	// through find -mmin.)
	Now func() time.Time

	// Delta chooses how directory mappings move, both ways: only what
	// differs (the default, DeltaHash), by the quick check (DeltaQuick), or
	// always the whole tree (DeltaOff). docs/sync.md#delta.
	Delta DeltaMode
	// MaxListEntries and MaxListBytes bound the sandbox listing of a delta
	// sync; a larger listing falls back to the full transfer. 0 =
	// DefaultMaxListEntries, DefaultMaxListBytes.
	MaxListEntries int
	MaxListBytes   int64

	// call is per-call state, set by apply (nil when a step runs alone).
	call *callState
	// deltaAnySize lifts the "more than half changed" fallback, so the
	// equivalence tests reach the delta path with small trees.
	deltaAnySize bool
	// changesMax overrides defaultMaxChanges (delta_record.go); negative:
	// no changes archive.
	changesMax int64
	// inlineSkip overrides maxInlineSkip (export.go); negative: always
	// upload a delta export's exclude file.
	inlineSkip int
	// settle overrides defaultRecordSettle (delta_record.go); a negative
	// value lets tests record files they just wrote.
	settle time.Duration
}

// callState is what one SyncIn/SyncOut call remembers across its steps:
// the sweeps it already did, so each directory is swept once per call.
type callState struct {
	mu           stdsync.Mutex
	sandboxSwept bool
	hostSwept    map[string]bool
	reports      []DirReport // directory mappings, see Options.report
}

// DefaultStaleAfter is 25 hours: the provider bounds a whole sync call by
// the configured timeoutMs (at most 24 hours) plus a 15 s answer margin,
// and scratch cleanup runs for at most 30 s more; the extra ~hour is slack
// for clock differences. A reserved name older than this cannot belong to
// a call that is still running.
const DefaultStaleAfter = 25 * time.Hour

func (o Options) staleAfter() time.Duration {
	if o.StaleAfter > 0 {
		return o.StaleAfter
	}
	return DefaultStaleAfter
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// DefaultHostReserve is the docs/behavior.md#streaming-export host free-space reserve.
const DefaultHostReserve int64 = 1 << 30

// MaxMinimumTimeout is the largest accepted minimumTimeoutMs (30 minutes).
const MaxMinimumTimeout = 30 * time.Minute

// ValidateMinimumTimeout checks a host-supplied minimumTimeoutMs value
// (a JSON number) per docs/behavior.md#transfer-timeout and returns it as a duration. A nil value means
// the field was absent (0, nil). Anything but a positive whole number
// ≤ 1,800,000 is ErrInvalidMinimumTimeout, whose message is the exact
// -32602 text.
func ValidateMinimumTimeout(ms *float64) (time.Duration, error) {
	if ms == nil {
		return 0, nil
	}
	v := *ms
	if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 || v != math.Trunc(v) || v > float64(MaxMinimumTimeout/time.Millisecond) {
		return 0, ErrInvalidMinimumTimeout
	}
	return time.Duration(v) * time.Millisecond, nil
}

// transferTimeout is the limit of a file-transfer round trip.
func (o Options) transferTimeout() time.Duration {
	if o.Timeout <= 0 {
		// Without a configured limit the minimum does not impose one either:
		// it may only raise a limit, never create a shorter one.
		return 0
	}
	return max(o.Timeout, o.MinimumTimeout)
}

// commandTimeout is the limit of a post-upload command.
func (o Options) commandTimeout(c Command) time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return o.Timeout
}

func (o Options) cleanupTimeout() time.Duration {
	if o.CleanupTimeout > 0 {
		return o.CleanupTimeout
	}
	return 5 * time.Second
}

func (o Options) hostReserve() int64 {
	switch {
	case o.HostReserve == 0:
		return DefaultHostReserve
	case o.HostReserve < 0:
		return 0
	}
	return o.HostReserve
}

// withTimeout derives a round-trip context.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// seconds converts a timeout to the toolbox's whole seconds (ceil), as
// toTimeoutSeconds does; 0 stays 0 (none).
func seconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int((d + time.Second - 1) / time.Second)
}

func (m Mapping) validate() error {
	if m.SourcePath == "" || m.TargetPath == "" {
		return fmt.Errorf("%w: mapping needs sourcePath and targetPath", ErrInvalidOperation)
	}
	// A NUL byte cannot be part of a path (the kernel would see a shorter
	// one, a shell would drop it): refuse it rather than sync another path.
	for _, f := range []struct{ name, v string }{{"sourcePath", m.SourcePath}, {"targetPath", m.TargetPath}} {
		if strings.ContainsRune(f.v, 0) {
			return fmt.Errorf("%w: mapping %s contains a NUL byte", ErrInvalidOperation, f.name)
		}
	}
	for _, e := range m.Exclude {
		if strings.ContainsRune(e, 0) {
			return fmt.Errorf("%w: mapping exclude pattern contains a NUL byte", ErrInvalidOperation)
		}
	}
	if m.Kind != KindFile && m.Kind != KindDirectory {
		return fmt.Errorf("%w: mapping kind %q", ErrInvalidOperation, clip(string(m.Kind)))
	}
	if m.Mode != nil && *m.Mode > 0o7777 {
		return fmt.Errorf("%w: mapping mode %o", ErrInvalidOperation, *m.Mode)
	}
	return nil
}
