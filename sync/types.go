package sync

import (
	"context"
	"fmt"
	"math"
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
}

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
	if m.Kind != KindFile && m.Kind != KindDirectory {
		return fmt.Errorf("%w: mapping kind %q", ErrInvalidOperation, m.Kind)
	}
	if m.Mode != nil && *m.Mode > 0o7777 {
		return fmt.Errorf("%w: mapping mode %o", ErrInvalidOperation, *m.Mode)
	}
	return nil
}
