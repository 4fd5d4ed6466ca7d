package provider

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLiveLeaseLifecycle is test tier 3: the lease lifecycle against real
// Daytona. It is skipped unless DAYTONA_API_KEY is set (DAYTONA_API_URL,
// DAYTONA_TARGET and DAYTONA_TEST_SNAPSHOT are honoured). Every sandbox it
// creates carries paperclip-environment-id=live-<uuid>, and a sweep by that
// label (cleanup.Sweep, which re-verifies the labels) removes anything left
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
		left, err := cleanup.Sweep(ctx, c.Sandboxes, map[string]string{
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
