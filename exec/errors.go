package exec

import (
	"errors"
	"fmt"
)

// ErrLeaseNotActive matches every error of an execute refused or ended
// because the lease was cancelled (CancelLease, i.e. releaseLease with
// cancelActiveWork). The provider maps it to the host-facing text
// "Daytona sandbox lease <id> is no longer active." (docs/behavior.md#gates).
var ErrLeaseNotActive = errors.New("lease is no longer active")

// LeaseNotActiveError is the concrete error; it matches ErrLeaseNotActive.
type LeaseNotActiveError struct {
	LeaseKey string
}

// Error implements error. The lease key may be a scope key; it carries no
// secret (scope keys hold a fingerprint, never the API key).
func (e *LeaseNotActiveError) Error() string { return "exec: lease is no longer active" }

// Is matches ErrLeaseNotActive.
func (e *LeaseNotActiveError) Is(target error) bool { return target == ErrLeaseNotActive }

// ErrInvalidEnvKey matches an env key rejected before any provider call.
var ErrInvalidEnvKey = errors.New("invalid sandbox environment variable key")

// InvalidEnvKeyError names the rejected key; its text is the reference's
// (docs/behavior.md#command-script): "Invalid sandbox environment variable key: <key>".
type InvalidEnvKeyError struct {
	Key string
}

// Error implements error.
func (e *InvalidEnvKeyError) Error() string {
	return "Invalid sandbox environment variable key: " + e.Key
}

// Is matches ErrInvalidEnvKey.
func (e *InvalidEnvKeyError) Is(target error) bool { return target == ErrInvalidEnvKey }

// ErrInvalidRequest matches a Target or Request that cannot be run
// (no client, no sandbox, empty command, session path without a lease key).
var ErrInvalidRequest = errors.New("exec: invalid request")

// ErrDispatchUncertain matches a session dispatch whose answer was lost: the
// command may or may not have started, so it is not dispatched again.
var ErrDispatchUncertain = errors.New("exec: command dispatch outcome unknown")

// Internal causes of cancelled contexts: which bound ended a wait.
var (
	errObservationBound = errors.New("session log observation bound exceeded")
	errCommandDeadline  = errors.New("command deadline exceeded")
	errFastPathBound    = errors.New("fast-path snapshot bound exceeded")
	errReadStalled      = errors.New("observation read under way at the command deadline")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
}
