package provider

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/provider/config"
)

// environmentValidateConfig answers an invalid config with ok false and
// every message, and nothing normalized; a config that is not an object
// (or absent) is judged like the reference judges it; a valid one comes
// back normalized with its warnings.
func TestValidateConfigAnswers(t *testing.T) {
	e := newTestEnv(t, nil)
	validate := func(cfg any) map[string]any {
		t.Helper()
		params := map[string]any{"driverKey": "daytona"}
		if cfg != nil {
			params["config"] = cfg
		}
		raw, err := e.call("environmentValidateConfig", params)
		require.NoError(t, err)
		return decode[map[string]any](t, raw)
	}
	bad := with(e.cfg, "image", " ", "snapshot", "")
	v := validate(bad)
	require.Equal(t, false, v["ok"])
	require.ElementsMatch(t, []any{config.MsgImageEmpty, config.MsgSnapshotEmpty}, v["errors"])
	require.NotContains(t, v, "normalizedConfig")

	v = validate([]any{1})
	require.Equal(t, false, v["ok"])
	require.Equal(t, []any{config.MsgConfigNotObject}, v["errors"])

	v = validate(with(e.cfg, "memory", 3, "image", "ubuntu:24.04"))
	require.Equal(t, true, v["ok"], "%v", v)
	require.Len(t, v["warnings"], 1)
	require.Contains(t, v["warnings"].([]any)[0], "memory 3")
	require.EqualValues(t, 3, v["normalizedConfig"].(map[string]any)["memory"])
	// The one result that carries the key, on purpose: the host persists
	// the normalized config (docs/decisions.md).
	require.Equal(t, e.cfg["apiKey"], v["normalizedConfig"].(map[string]any)["apiKey"])

	absent, empty := validate(nil), validate(map[string]any{})
	require.Equal(t, empty, absent, "an absent config is an empty object")
}
