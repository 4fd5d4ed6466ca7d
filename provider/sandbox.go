package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/clamp"
	"github.com/daytonaworker/daytona-worker/provider/config"
)

// Bounds of starting a sandbox (docs/behavior.md#ensure-started): startMargin
// is added to the acquire budget for a start's own wait, and a start Daytona
// refuses while the sandbox is changing state is retried maxStartRetries
// times (docs/behavior.md#refused-resume).
const (
	startMargin     = 5 * time.Second
	maxStartRetries = 2
)

// ensureStarted starts or recovers a sandbox and waits until it runs
// (docs/behavior.md#ensure-started), retrying a start Daytona refuses while the
// sandbox is still stopping (docs/behavior.md#refused-resume).
func (d *Driver) ensureStarted(ctx context.Context, c *account, sb *daytona.Sandbox) (*daytona.Sandbox, error) {
	if sb.State == daytona.StateStarted {
		return sb, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.AcquireBudget()+startMargin)
	defer cancel()
	if sb.State == daytona.StateError {
		if !sb.Recoverable {
			return nil, unrecoverable(sb)
		}
		if _, _, err := c.client.Sandboxes.Recover(ctx, sb.ID, false); err != nil {
			return nil, err
		}
		return c.client.Sandboxes.WaitUntilStarted(ctx, sb.ID)
	}
	for attempt := 0; ; attempt++ {
		if sb.State == daytona.StateStopping || sb.State == daytona.StateStarting || sb.State == daytona.StateRestoring {
			settled, err := d.settle(ctx, c, sb.ID)
			if err != nil {
				return nil, err
			}
			if settled.State == daytona.StateStarted {
				return settled, nil
			}
			sb = settled
		}
		_, _, err := c.client.Sandboxes.Start(ctx, sb.ID)
		if err == nil {
			return c.client.Sandboxes.WaitUntilStarted(ctx, sb.ID)
		}
		if !startRefused(err) {
			return nil, err
		}
		if attempt >= maxStartRetries {
			//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
			return nil, fmt.Errorf("Daytona refused to start sandbox %s while it was changing state (service unavailable); the lease was preserved: %w", sb.ID, err)
		}
		sb = &daytona.Sandbox{ID: sb.ID, State: daytona.StateStopping}
	}
}

// settle waits, bounded, until a transitioning sandbox is stopped or started.
func (d *Driver) settle(ctx context.Context, c *account, id string) (*daytona.Sandbox, error) {
	ctx, cancel := context.WithTimeout(ctx, d.retryW)
	defer cancel()
	return c.client.Sandboxes.WaitForState(ctx, id, daytona.StateStopped, daytona.StateStarted, daytona.StateArchived)
}

// startRefused: 409 "state change in progress" or 400 "not in valid state".
func startRefused(err error) bool {
	var er *daytona.ErrorResponse
	if !errors.As(err, &er) {
		return false
	}
	msg := strings.ToLower(er.Message + " " + er.Reason)
	return er.StatusCode == 409 || (er.StatusCode == 400 && strings.Contains(msg, "state"))
}

func unrecoverable(sb *daytona.Sandbox) error {
	reason := sb.ErrorReason
	if reason == "" {
		reason = "unknown error"
	}
	//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
	return fmt.Errorf("Daytona sandbox %s is in an unrecoverable error state: %s", sb.ID, clamp.Echo(reason))
}

// sandbox returns the lease's record from the cache (single flight on a
// miss), refreshing an entry idle past half the auto-stop interval
// (docs/behavior.md#handle-cache, docs/behavior.md#stale-handle). A failed refresh evicts and fails closed.
func (d *Driver) sandbox(ctx context.Context, c *account, k scopeKey, leaseID string) (*daytona.Sandbox, bool, error) {
	fetch := func(ctx context.Context) (*daytona.Sandbox, error) {
		sb, _, err := c.client.Sandboxes.Get(ctx, leaseID)
		return sb, err
	}
	sb, hit, err := d.handles.get(ctx, k, leaseID, fetch)
	if err == nil {
		d.remember(c, k, sb, "")
	}
	if err != nil || !hit {
		return sb, hit, err
	}
	if threshold, ok := config.StaleHandleThreshold(c.cfg); ok && d.handles.stale(k, threshold) {
		var fresh *daytona.Sandbox
		err := c.boundCall(ctx, "sandbox.refreshData", 0, func(ctx context.Context) error {
			var err error
			fresh, err = fetch(ctx)
			return err
		})
		if err == nil && fresh.ID != leaseID {
			err = &HandleMismatchError{Got: fresh.ID, Want: leaseID}
		}
		if err != nil {
			d.handles.evict(k)
			return nil, hit, err
		}
		d.handles.seed(k, fresh)
		return fresh, hit, nil
	}
	return sb, hit, nil
}
