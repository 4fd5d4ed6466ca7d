package daytona

import (
	"context"
	"errors"
	"slices"

	"github.com/cenkalti/backoff/v4"
)

// WaitForState polls GET /sandbox/{id} until the sandbox is in one of the
// target states, with the client's poll back-off (docs/daytona.md#waiting)
// under ctx: the caller's deadline is the only budget.
//
// It fails with a [*SandboxStateError] when the sandbox reaches error or
// build_failed (unless that is a target) — that error matches
// ErrContainerMissing for the lost-container reason — and, when ctx ends,
// with a [*SandboxStateError] wrapping ctx.Err() (matching ErrTimeout for a
// deadline). A 404 is returned as is (ErrNotFound). Transient read errors
// (network, 5xx, 429) are retried by the GET itself.
func (s *SandboxesService) WaitForState(ctx context.Context, idOrName string, targets ...SandboxState) (*Sandbox, error) {
	return s.waitFor(ctx, idOrName, targets, false)
}

// WaitUntilStarted waits for state started; it fails on error/build_failed.
func (s *SandboxesService) WaitUntilStarted(ctx context.Context, idOrName string) (*Sandbox, error) {
	return s.waitFor(ctx, idOrName, []SandboxState{StateStarted}, false)
}

// WaitUntilStopped waits for state stopped. An ephemeral sandbox is deleted
// by stop: a 404 or state destroyed then ends the wait with (nil, nil).
func (s *SandboxesService) WaitUntilStopped(ctx context.Context, idOrName string) (*Sandbox, error) {
	return s.waitFor(ctx, idOrName, []SandboxState{StateStopped}, true)
}

// WaitUntilGone waits until GET by ID answers 404 or state destroyed.
// Errors other than 404 end the wait.
func (s *SandboxesService) WaitUntilGone(ctx context.Context, sandboxID string) error {
	_, err := s.waitFor(ctx, sandboxID, []SandboxState{StateDestroyed}, true)
	return err
}

// waitFor is the polling loop. goneOK: a 404 or destroyed is success.
func (s *SandboxesService) waitFor(ctx context.Context, id string, targets []SandboxState, goneOK bool) (*Sandbox, error) {
	var bo backoff.BackOff
	var last SandboxState
	for {
		sb, _, err := s.Get(ctx, id)
		switch {
		case err == nil:
			last = sb.State
			if slices.Contains(targets, sb.State) {
				return sb, nil
			}
			if goneOK && sb.State == StateDestroyed {
				return nil, nil
			}
			if (sb.State == StateError || sb.State == StateBuildFailed) && !slices.Contains(targets, sb.State) &&
				!(goneOK && sb.DesiredState == StateDestroyed) {
				return sb, &SandboxStateError{SandboxID: sb.ID, State: sb.State, ErrorReason: sb.ErrorReason,
					Recoverable: sb.Recoverable, Waiting: targets}
			}
		case goneOK && errors.Is(err, ErrNotFound):
			return nil, nil
		case ctx.Err() != nil:
			return nil, &SandboxStateError{SandboxID: id, State: last, Waiting: targets, Err: ctx.Err()}
		default:
			return nil, err
		}
		if bo == nil {
			bo = s.client.poll()
			bo.Reset()
		}
		d := bo.NextBackOff()
		if d == backoff.Stop {
			return nil, &SandboxStateError{SandboxID: id, State: last, Waiting: targets, Err: context.DeadlineExceeded}
		}
		if err := s.client.retry.Sleep(ctx, d); err != nil {
			return nil, &SandboxStateError{SandboxID: id, State: last, Waiting: targets, Err: err}
		}
	}
}
