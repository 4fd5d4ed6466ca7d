package config

import (
	"encoding/json"
	"testing"

	"github.com/daytonaworker/daytona-worker/internal/jsvalue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// normalizes config and validates the API key fallback — exact normalizedConfig (test 8).
func TestValidateConfigNormalizesExactly(t *testing.T) {
	raw := `{
		"apiKey": "  explicit-key  ", "apiUrl": "https://app.daytona.io/api", "target": "us",
		"snapshot": " base-snapshot ", "language": "typescript", "timeoutMs": "450000.9",
		"autoDeleteInterval": -1, "reuseLease": true,
		"runnerLifecycleMode": "warm", "runnerIdleTimeoutMs": 900000, "warmRunnerIdleTimeoutMs": 900000,
		"streamRunLogs": true, "agentId": "agent-1", "workspaceSentinel": {"token": "x"}
	}`
	n, err := ValidateAndNormalize(json.RawMessage(raw), nil)
	require.NoError(t, err)
	got, err := json.Marshal(n)
	require.NoError(t, err)
	// Byte-exact, in the reference's key order (docs/behavior.md#validation).
	want := `{"apiKey":"explicit-key","apiUrl":"https://app.daytona.io/api","target":"us",` +
		`"snapshot":"base-snapshot","image":null,"language":"typescript",` +
		`"timeoutMs":450000,"livenessTimeoutMs":30000,` +
		`"cpu":null,"memory":null,"disk":null,"gpu":null,` +
		`"autoStopInterval":15,"autoArchiveInterval":60,"autoDeleteInterval":-1,` +
		`"reuseLease":true,"archiveOnRelease":false}`
	assert.Equal(t, want, string(got))
	// Host-owned keys are read but never echoed.
	for _, k := range []string{"runnerLifecycleMode", "runnerIdleTimeoutMs", "warmRunnerIdleTimeoutMs", "streamRunLogs", "agentId"} {
		assert.NotContains(t, string(got), k)
	}
	assert.Len(t, wireMap(t, n), 17)

	// The API key fallback: no key in config, DAYTONA_API_KEY set.
	n, err = ValidateAndNormalize(map[string]any{"image": "node:20"}, withEnvKey)
	require.NoError(t, err)
	assert.Nil(t, n.APIKey, "the env key is never echoed into the saved config")
	// ... and a blank DAYTONA_API_KEY does not count.
	_, err = ValidateAndNormalize(map[string]any{}, envWith(map[string]string{EnvAPIKey: " \t "}))
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	assert.Equal(t, []string{MsgAPIKeyRequired}, verr.Errors)
	assert.ErrorIs(t, err, ErrInvalid)
}

func TestNormalize(t *testing.T) {
	t.Run("ttlMinutes echoed only when set", func(t *testing.T) {
		n, err := ValidateAndNormalize(`{"ttlMinutes":"45"}`, withEnvKey)
		require.NoError(t, err)
		b, _ := json.Marshal(n)
		assert.Contains(t, string(b), `"archiveOnRelease":false,"ttlMinutes":45}`)
		assert.Len(t, wireMap(t, n), 18)
		n = Normalize(mustParse(t, `{}`))
		b, _ = json.Marshal(n)
		assert.NotContains(t, string(b), "ttlMinutes")
	})
	t.Run("resources echoed as numbers, archiveOnRelease kept", func(t *testing.T) {
		n, err := ValidateAndNormalize(`{"image":"node:20","cpu":"4","memory":8,"disk":"10.5","archiveOnRelease":true}`, withEnvKey)
		require.NoError(t, err)
		b, _ := json.Marshal(n)
		assert.Contains(t, string(b), `"image":"node:20"`)
		assert.Contains(t, string(b), `"cpu":4,"memory":8,"disk":10.5,"gpu":null`)
		assert.Contains(t, string(b), `"archiveOnRelease":true`)
	})
	t.Run("normalization is idempotent (reuse matching stays stable)", func(t *testing.T) {
		raws := []string{
			`{"apiKey":"k","image":" node:20 ","cpu":"2","timeoutMs":"1000.5","ttlMinutes":"5","reuseLease":true}`,
			`{"apiKey":"k","snapshot":"s","autoStopInterval":0,"autoDeleteInterval":-1,"livenessTimeoutMs":-1}`,
		}
		for _, raw := range raws {
			first, err := ValidateAndNormalize(raw, nil)
			require.NoError(t, err)
			b1, _ := json.Marshal(first)
			// The host saves normalizedConfig and later hands it back, merged
			// with lease metadata and host bookkeeping.
			var saved map[string]any
			require.NoError(t, json.Unmarshal(b1, &saved))
			saved["provider"] = "daytona"
			saved["runnerLifecycleMode"] = "warm"
			saved["workspaceSentinel"] = map[string]any{"token": "t"}
			second, err := ValidateAndNormalize(saved, nil)
			require.NoError(t, err)
			b2, _ := json.Marshal(second)
			assert.JSONEq(t, string(b1), string(b2))
		}
	})
	t.Run("no aliasing of the Config's pointers", func(t *testing.T) {
		c := mustParse(t, `{"image":"i","cpu":2}`)
		n := Normalize(c)
		*n.CPU = 99
		assert.Equal(t, 2.0, *c.CPU)
		src, err := RuntimeCreateSource(c)
		require.NoError(t, err)
		*src.Resources.CPU = 99
		assert.Equal(t, 2.0, *c.CPU)
	})
	t.Run("-0 is echoed as 0, as JSON.stringify writes it", func(t *testing.T) {
		b, err := json.Marshal(Normalize(mustParse(t, `{"image":"i","memory":-0,"disk":"-0"}`)))
		require.NoError(t, err)
		assert.Contains(t, string(b), `"memory":0,"disk":0,`)
	})
}

// records requested resources in lease metadata — only configured keys (test 51).
func TestLeaseConfigMetadata(t *testing.T) {
	const key = "dtn_metadata_secret"
	c := mustParse(t, `{"apiKey":"`+key+`","image":"node:20","cpu":"4","memory":8,"reuseLease":true,
		"runnerLifecycleMode":"warm","warmRunnerIdleTimeoutMs":900000,"target":"us"}`)
	m := LeaseMetadata(c)
	assert.Equal(t, map[string]any{
		"image": "node:20", "snapshot": nil, "timeoutMs": int64(300000), "reuseLease": true,
		"cpu": 4.0, "memory": 8.0,
	}, m)
	b, err := jsvalue.StableStringify(m)
	require.NoError(t, err)
	assert.NotContains(t, string(b), key)

	m = LeaseMetadata(mustParse(t, `{"snapshot":"snap","archiveOnRelease":true,"timeoutMs":"1000"}`))
	assert.Equal(t, map[string]any{
		"image": nil, "snapshot": "snap", "timeoutMs": int64(1000), "reuseLease": false, "archiveOnRelease": true,
	}, m)

	// Every metadata key the saved (normalized) config also has is JSON-equal
	// to it, so host reuse matching keeps finding the lease.
	n, err := ValidateAndNormalize(`{"apiKey":"k","image":"node:20","cpu":"4","disk":10.5,"reuseLease":true,"timeoutMs":"450000.9"}`, nil)
	require.NoError(t, err)
	saved := wireMap(t, n)
	for k, v := range LeaseMetadata(mustParse(t, `{"apiKey":"k","image":"node:20","cpu":"4","disk":10.5,"reuseLease":true,"timeoutMs":"450000.9"}`)) {
		mv, _ := jsvalue.StableStringify(v)
		sv, _ := jsvalue.StableStringify(saved[k])
		assert.Equal(t, string(sv), string(mv), k)
	}
}

// wireMap is n as the host receives it: its JSON object.
func wireMap(t *testing.T, n Normalized) map[string]any {
	t.Helper()
	b, err := json.Marshal(n)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}
