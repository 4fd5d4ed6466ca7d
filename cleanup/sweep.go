package cleanup

import (
	"context"
	"errors"
	"fmt"

	"github.com/daytonaworker/daytona-worker/daytona"
)

// Sweep deletes every sandbox that carries all of labels, for test and live
// leftovers (everything tests create is labelled, so it can be swept). The
// label set must name the provider and at least one more scoping label, so a
// sweep can never select every Daytona sandbox of an account. Each match is
// re-verified label by label before it is deleted and waited for.
func Sweep(ctx context.Context, api SandboxAPI, labels map[string]string) ([]string, error) {
	if labels[LabelProvider] != ProviderValue || len(labels) < 2 {
		return nil, errors.New("cleanup: a sweep needs paperclip-provider=daytona and at least one more label")
	}
	found, err := api.ListAll(ctx, &daytona.ListOptions{Labels: labels})
	if err != nil {
		return nil, err
	}
	var deleted []string
	var errs []error
	for i := range found {
		sb := &found[i]
		match := true
		for k, v := range labels {
			match = match && sb.Labels[k] == v
		}
		if !match {
			continue
		}
		if err := DeleteAndWait(ctx, api, sb.ID); err != nil {
			errs = append(errs, fmt.Errorf("sweep %s: %w", sb.ID, err))
			continue
		}
		deleted = append(deleted, sb.ID)
	}
	return deleted, errors.Join(errs...)
}
