package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLiveLeaseLifecycle is test tier 3: the lease lifecycle against real
// Daytona. It is skipped unless DAYTONA_API_KEY is set (DAYTONA_API_URL,
// DAYTONA_TARGET and DAYTONA_TEST_SNAPSHOT are honoured). Every sandbox it
// creates carries paperclip-environment-id=live-<uuid>, and a sweep by that
// label (sweep, which re-verifies the labels) removes anything left
// behind, whatever failed.
func TestLiveLeaseLifecycle(t *testing.T) {
	key := os.Getenv("DAYTONA_API_KEY")
	if key == "" {
		t.Skip("live Daytona tier: set DAYTONA_API_KEY to run it")
	}
	env := "live-" + uuid.NewString()
	cfg := map[string]any{"apiKey": key, "timeoutMs": 300000, "reuseLease": true}
	if u := os.Getenv("DAYTONA_API_URL"); u != "" {
		cfg["apiUrl"] = u
	}
	if tg := os.Getenv("DAYTONA_TARGET"); tg != "" {
		cfg["target"] = tg
	}
	if s := os.Getenv("DAYTONA_TEST_SNAPSHOT"); s != "" {
		cfg["snapshot"] = s
	}
	t.Cleanup(func() {
		opts := []daytona.Option{daytona.WithAPIKey(key)}
		if u, ok := cfg["apiUrl"].(string); ok {
			opts = append(opts, daytona.WithAPIURL(u))
		}
		c, err := daytona.NewClient(opts...)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		left, err := sweep(ctx, c.Sandboxes, map[string]string{
			cleanup.LabelProvider: cleanup.ProviderValue, cleanup.LabelEnvironmentID: env})
		assert.NoError(t, err)
		assert.Empty(t, left, "the live test left sandboxes behind (now swept)")
	})

	reg := rpc.NewRegistry()
	New(Options{}).Register(reg)
	call := func(method string, params any) json.RawMessage {
		t.Helper()
		raw, err := callOn(t, reg, method, params)
		require.NoError(t, err, method)
		return raw
	}
	base := func(c map[string]any) map[string]any {
		return map[string]any{"driverKey": "daytona", "companyId": "live-company", "environmentId": env, "config": c}
	}
	l := decode[lease](t, call("environmentAcquireLease", with(base(cfg), "runId", "live-run", "agentId", "live-agent",
		"executionWorkspaceId", "live-ws", "adapterType", "claude_local")))
	leaseCfg := maps2(cfg, l.Metadata)
	r := decode[execResult](t, call("environmentExecute", with(base(leaseCfg), "lease", l, "command", "sh", "args", []string{"-c", "echo live-ok"})))
	require.Equal(t, 0, *r.ExitCode)
	require.Equal(t, "live-ok\n", r.Stdout)
	require.Contains(t, string(call("environmentReleaseLease", with(base(leaseCfg), "providerLeaseId", *l.ProviderLeaseID,
		"leaseMetadata", l.Metadata))), `"state":"stopped"`)
	res := decode[lease](t, call("environmentResumeLease", with(base(cfg), "providerLeaseId", *l.ProviderLeaseID, "leaseMetadata", l.Metadata)))
	require.NotNil(t, res.ProviderLeaseID)
	require.Contains(t, string(call("environmentDestroyLease", with(base(maps2(cfg, res.Metadata)), "providerLeaseId", *l.ProviderLeaseID,
		"leaseMetadata", res.Metadata))), `"state":"destroyed"`)
}

// sweep deletes every sandbox that carries all of labels: the live test's
// leftovers (everything it creates is labelled, so it can be swept). The
// label set must name the provider and at least one more scoping label, so a
// sweep can never select every Daytona sandbox of an account. Each match is
// re-verified label by label before it is deleted and waited for.
func sweep(ctx context.Context, api cleanup.SandboxAPI, labels map[string]string) ([]string, error) {
	if labels[cleanup.LabelProvider] != cleanup.ProviderValue || len(labels) < 2 {
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
		if err := cleanup.DeleteAndWait(ctx, api, sb.ID); err != nil {
			errs = append(errs, fmt.Errorf("sweep %s: %w", sb.ID, err))
			continue
		}
		deleted = append(deleted, sb.ID)
	}
	return deleted, errors.Join(errs...)
}

func TestSweepNeedsAScopeAndVerifiesLabels(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	create := func(envID string) *daytona.Sandbox {
		labels, err := cleanup.OwnershipLabels("company-1", envID, "run-1", uuid.NewString(), false)
		require.NoError(t, err)
		sb, _, err := env.Client.Sandboxes.Create(ctx, &daytona.CreateSandboxRequest{Name: uuid.NewString(), Labels: labels})
		require.NoError(t, err)
		return sb
	}
	a, b := create("env-1"), create("env-2")
	// The listing returns every sandbox whatever the filter, as a real list
	// can: only sweep's own label re-check keeps env-2's sandbox alive.
	env.Server.Inject(daytonatest.Fault{Method: "GET", Route: "/sandbox", ListIgnoresLabels: true})
	_, err := sweep(ctx, env.Client.Sandboxes, map[string]string{cleanup.LabelProvider: cleanup.ProviderValue})
	require.Error(t, err, "a sweep of every Daytona sandbox is refused")
	deleted, err := sweep(ctx, env.Client.Sandboxes, map[string]string{cleanup.LabelProvider: cleanup.ProviderValue, cleanup.LabelEnvironmentID: "env-1"})
	require.NoError(t, err)
	require.Equal(t, []string{a.ID}, deleted)
	info, _ := env.Server.Sandbox(b.ID)
	require.Equal(t, "started", info.State)
}
