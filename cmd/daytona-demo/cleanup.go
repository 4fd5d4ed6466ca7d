package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Bounds of finishing a failed creation's cleanup: the attempts (one
// records the observed sandbox, one deletes it, the rest wait for a create
// that is not visible yet) and the pause between two of them.
const (
	cleanupTries = 6
	cleanupPause = 2 * time.Second
	cleanupBound = 5 * time.Minute
)

// finishFailedCreate does what the host does with an acquire that failed
// after Daytona may have created a sandbox: destroy with the cleanup
// envelope in the lease metadata, persist the observed sandbox id the
// first answer reports, and call again until the sandbox is confirmed
// gone. When it cannot confirm that, it names the sandbox and the command
// that removes it.
func (d *demo) finishFailedCreate(ctx context.Context, base map[string]any, env map[string]any) error {
	name := fmt.Sprint(env["providerLeaseId"])
	fmt.Fprintf(d.out, "       the create is uncertain: finishing the host's cleanup of %s\n", name)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupBound)
	defer cancel()
	var err error
	for try := range cleanupTries {
		if try > 0 {
			select {
			case <-ctx.Done():
				return d.leftover(name, env, ctx.Err())
			case <-time.After(cleanupPause):
			}
		}
		var raw json.RawMessage
		raw, err = d.step(ctx, "cleanup failed create", "environmentDestroyLease",
			with(base, "providerLeaseId", name, "leaseMetadata", map[string]any{"failedCreateCleanup": env}), cleanupBound, field("state"))
		var re *rpcError
		switch {
		case err == nil:
			var r struct{ State string }
			if json.Unmarshal(raw, &r) == nil && r.State == "destroyed" {
				return nil
			}
			err = fmt.Errorf("unexpected receipt %s", raw)
		case errors.As(err, &re) && re.envelope() != nil:
			env = re.envelope() // the observed id: persist it, call again
		}
	}
	return d.leftover(name, env, err)
}

// leftover reports a sandbox the demo could not confirm gone.
func (d *demo) leftover(name string, env map[string]any, err error) error {
	fmt.Fprintf(d.out, "  FAIL sandbox %s may still exist; remove it with:\n"+
		"         daytona-worker sweep --company %v --run %v --delete\n", name, env["companyId"], env["runId"])
	return fmt.Errorf("cleanup of %s not confirmed: %w", name, err)
}
