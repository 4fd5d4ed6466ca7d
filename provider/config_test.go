package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envWith returns an EnvLookup serving only the given variables.
func envWith(kv map[string]string) EnvLookup {
	return func(k string) (string, bool) {
		v, ok := kv[k]
		return v, ok
	}
}

var withEnvKey = envWith(map[string]string{EnvAPIKey: "env-key"})

func mustParse(t *testing.T, raw string) Config {
	t.Helper()
	c, err := ParseConfig(json.RawMessage(raw))
	require.NoError(t, err)
	return c
}

func f64(v float64) *float64 { return &v }

// normalizes config and validates the API key fallback — exact normalizedConfig (test 8).
func TestValidateConfigNormalizesExactly(t *testing.T) {
	raw := `{
		"apiKey": "  explicit-key  ", "apiUrl": "https://app.daytona.io/api", "target": "us",
		"snapshot": " base-snapshot ", "language": "typescript", "timeoutMs": "450000.9",
		"autoDeleteInterval": -1, "reuseLease": true,
		"runnerLifecycleMode": "warm", "runnerIdleTimeoutMs": 900000, "warmRunnerIdleTimeoutMs": 900000,
		"streamRunLogs": true, "agentId": "agent-1", "workspaceSentinel": {"token": "x"}
	}`
	n, err := ValidateConfig(json.RawMessage(raw), nil)
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
	assert.Len(t, n.AsMap(), 17)

	// The API key fallback: no key in config, DAYTONA_API_KEY set.
	n, err = ValidateConfig(map[string]any{"image": "node:20"}, withEnvKey)
	require.NoError(t, err)
	assert.Nil(t, n.APIKey, "the env key is never echoed into the saved config")
	// ... and a blank DAYTONA_API_KEY does not count.
	_, err = ValidateConfig(map[string]any{}, envWith(map[string]string{EnvAPIKey: " \t "}))
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	assert.Equal(t, []string{MsgAPIKeyRequired}, verr.Errors)
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

// applies quota-safety auto-stop/archive/delete defaults when unset (test 9).
func TestQuotaSafetyDefaults(t *testing.T) {
	for _, raw := range []string{`{}`, `{"autoStopInterval":null,"autoArchiveInterval":"","autoDeleteInterval":"soon"}`, `null`, ``} {
		c := mustParse(t, raw)
		assert.Equal(t, int64(15), c.AutoStopInterval, raw)
		assert.Equal(t, int64(60), c.AutoArchiveInterval, raw)
		assert.Equal(t, int64(10080), c.AutoDeleteInterval, raw)
		assert.Equal(t, int64(300000), c.TimeoutMs, raw)
		assert.Equal(t, int64(30000), c.LivenessTimeoutMs, raw)
	}
	assert.Equal(t, DefaultConfig(), mustParse(t, `{}`))
}

// preserves an explicit 0/-1 to disable auto intervals (test 10).
func TestExplicitZeroAndMinusOneIntervals(t *testing.T) {
	c := mustParse(t, `{"autoStopInterval":0,"autoArchiveInterval":0,"autoDeleteInterval":-1}`)
	assert.Equal(t, int64(0), c.AutoStopInterval)
	assert.Equal(t, int64(0), c.AutoArchiveInterval)
	assert.Equal(t, int64(-1), c.AutoDeleteInterval)
	n := Normalize(c)
	assert.Equal(t, int64(0), n.AutoStopInterval)
	assert.Equal(t, int64(-1), n.AutoDeleteInterval)
	assert.Empty(t, Validate(`{"autoStopInterval":0,"autoArchiveInterval":0,"autoDeleteInterval":-1}`, withEnvKey))
}

// Field-by-field JavaScript coercions of docs/behavior.md#config-parsing.
func TestParseCoercions(t *testing.T) {
	t.Run("timeoutMs: Number(raw ?? 300000), truncated, default when not finite", func(t *testing.T) {
		cases := map[string]int64{
			`{}`:                       300000,
			`{"timeoutMs":null}`:       300000,
			`{"timeoutMs":""}`:         0, // Number("") is 0 (then fails validation)
			`{"timeoutMs":"450000.9"}`: 450000,
			`{"timeoutMs":450000.9}`:   450000,
			`{"timeoutMs":-5.9}`:       -5,
			`{"timeoutMs":" 42 "}`:     42,
			`{"timeoutMs":"0x10"}`:     16,
			`{"timeoutMs":"abc"}`:      300000,
			`{"timeoutMs":"Infinity"}`: 300000,
			`{"timeoutMs":1e400}`:      300000, // JSON.parse gives Infinity
			`{"timeoutMs":"1_000"}`:    300000,
			`{"timeoutMs":true}`:       1,
			`{"timeoutMs":false}`:      0,
			`{"timeoutMs":[]}`:         0,
			`{"timeoutMs":["7"]}`:      7,
			`{"timeoutMs":[1,2]}`:      300000,
			`{"timeoutMs":{}}`:         300000,
			`{"timeoutMs":1e300}`:      maxSafeInteger, // saturated; validation still rejects it
		}
		for raw, want := range cases {
			assert.Equal(t, want, mustParse(t, raw).TimeoutMs, raw)
		}
		assert.Equal(t, int64(-1), mustParse(t, `{"livenessTimeoutMs":"-1"}`).LivenessTimeoutMs)
		assert.Equal(t, int64(30000), mustParse(t, `{"livenessTimeoutMs":"x"}`).LivenessTimeoutMs)
		assert.Equal(t, int64(0), mustParse(t, `{"livenessTimeoutMs":""}`).LivenessTimeoutMs)
	})

	t.Run("resources: null/absent/empty string are unset, otherwise Number kept when finite", func(t *testing.T) {
		cases := []struct {
			raw  string
			want *float64
		}{
			{`{}`, nil},
			{`{"cpu":null}`, nil},
			{`{"cpu":""}`, nil},
			{`{"cpu":" "}`, f64(0)}, // Number(" ") is 0, not unset
			{`{"cpu":"2.5"}`, f64(2.5)},
			{`{"cpu":2.5}`, f64(2.5)}, // fractions kept
			{`{"cpu":"x"}`, nil},
			{`{"cpu":"Infinity"}`, nil},
			{`{"cpu":false}`, f64(0)},
			{`{"cpu":true}`, f64(1)},
			{`{"cpu":[]}`, f64(0)},
			{`{"cpu":{}}`, nil},
		}
		for _, tc := range cases {
			assert.Equal(t, tc.want, mustParse(t, tc.raw).CPU, tc.raw)
		}
		c := mustParse(t, `{"cpu":1,"memory":"8","disk":10.5,"gpu":"1"}`)
		assert.Equal(t, f64(1), c.CPU)
		assert.Equal(t, f64(8), c.Memory)
		assert.Equal(t, f64(10.5), c.Disk)
		assert.Equal(t, f64(1), c.GPU)
	})

	t.Run("intervals: truncated, default when unset or invalid", func(t *testing.T) {
		cases := map[string]int64{
			`{"autoStopInterval":"7.9"}`:      7,
			`{"autoStopInterval":2.5}`:        2,
			`{"autoStopInterval":-0.5}`:       0,
			`{"autoStopInterval":"x"}`:        15,
			`{"autoStopInterval":""}`:         15,
			`{"autoStopInterval":null}`:       15,
			`{"autoStopInterval":false}`:      0, // Number(false) is 0: auto-stop disabled, as in JS
			`{"autoStopInterval":"-3"}`:       -3,
			`{"autoStopInterval":"Infinity"}`: 15,
		}
		for raw, want := range cases {
			assert.Equal(t, want, mustParse(t, raw).AutoStopInterval, raw)
		}
	})

	t.Run("booleans: only literal true", func(t *testing.T) {
		cases := map[string]bool{
			`{"reuseLease":true}`:   true,
			`{"reuseLease":"true"}`: false,
			`{"reuseLease":1}`:      false,
			`{"reuseLease":null}`:   false,
			`{"reuseLease":[true]}`: false,
			`{}`:                    false,
		}
		for raw, want := range cases {
			assert.Equal(t, want, mustParse(t, raw).ReuseLease, raw)
			assert.Equal(t, want, mustParse(t, strings.ReplaceAll(raw, "reuseLease", "archiveOnRelease")).ArchiveOnRelease, raw)
		}
	})

	t.Run("strings: trimmed, blank or non-string is unset", func(t *testing.T) {
		c := mustParse(t, `{"apiUrl":"  https://x.example  ","target":"\u00a0us\ufeff","snapshot":"   ","image":5,"language":null}`)
		assert.Equal(t, "https://x.example", c.APIURL)
		assert.Equal(t, "us", c.Target)
		assert.Equal(t, "", c.Snapshot)
		assert.Equal(t, "", c.Image)
		assert.Equal(t, "", c.Language)
		assert.Equal(t, "k", mustParse(t, `{"apiKey":"\n k \t"}`).APIKey())
		assert.Equal(t, "", mustParse(t, `{"apiKey":{"type":"secret_ref","secretId":"x"}}`).APIKey())
	})

	t.Run("host-owned warm keys", func(t *testing.T) {
		c := mustParse(t, `{"runnerLifecycleMode":"warm","runnerIdleTimeoutMs":"125000","warmRunnerIdleTimeoutMs":900000.5}`)
		assert.Equal(t, "warm", c.RunnerLifecycleMode)
		assert.Equal(t, 125000.0, c.RunnerIdleTimeoutMs)
		assert.Equal(t, 900000.5, c.WarmRunnerIdleTimeoutMs)
		for _, bad := range []string{`0`, `-1`, `true`, `"x"`, `null`, `""`, `1e400`, `{}`} {
			c := mustParse(t, `{"warmRunnerIdleTimeoutMs":`+bad+`,"runnerIdleTimeoutMs":`+bad+`}`)
			assert.Zero(t, c.WarmRunnerIdleTimeoutMs, bad)
			assert.Zero(t, c.RunnerIdleTimeoutMs, bad)
		}
		assert.Equal(t, "", mustParse(t, `{"runnerLifecycleMode":1}`).RunnerLifecycleMode)
	})

	t.Run("input forms", func(t *testing.T) {
		fromMap, err := ParseConfig(map[string]any{"image": "node:20", "cpu": 2, "timeoutMs": int64(1000)})
		require.NoError(t, err)
		fromBytes, err := ParseConfig([]byte(`{"image":"node:20","cpu":2,"timeoutMs":1000}`))
		require.NoError(t, err)
		fromStruct, err := ParseConfig(struct {
			Image     string `json:"image"`
			CPU       int    `json:"cpu"`
			TimeoutMs int    `json:"timeoutMs"`
		}{"node:20", 2, 1000})
		require.NoError(t, err)
		assert.Equal(t, fromMap, fromBytes)
		assert.Equal(t, fromMap, fromStruct)
		c, err := ParseConfig(nil)
		require.NoError(t, err)
		assert.Equal(t, DefaultConfig(), c)
		for _, bad := range []any{json.RawMessage(`[]`), json.RawMessage(`"x"`), json.RawMessage(`{"a":`), json.RawMessage(`{} {}`), []int{1}, func() {}} {
			_, err := ParseConfig(bad)
			var verr *ValidationError
			require.ErrorAs(t, err, &verr, "%T", bad)
			assert.Equal(t, []string{MsgConfigNotObject}, verr.Errors)
			assert.Equal(t, []string{MsgConfigNotObject}, Validate(bad, withEnvKey))
		}
	})
}

// Every validation rule of docs/behavior.md#validation alone, with its exact message.
func TestValidateEachRule(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		want []string
	}{
		{"valid minimal", `{}`, nil},
		{"valid image with resources", `{"image":"node:20","cpu":4,"memory":8,"disk":10,"gpu":1}`, nil},
		{"blank image", `{"image":"  "}`, []string{MsgImageEmpty}},
		{"empty image", `{"image":""}`, []string{MsgImageEmpty}},
		{"non-string image is just unset", `{"image":7}`, nil},
		{"blank snapshot", `{"snapshot":"\t"}`, []string{MsgSnapshotEmpty}},
		// rejects ambiguous or invalid config (test 33) — the ambiguity part.
		{"image and snapshot", `{"image":"node:20","snapshot":"snap"}`, []string{MsgImageAndSnapshot}},
		{"apiUrl relative", `{"apiUrl":"app.daytona.io/api"}`, []string{MsgAPIURLInvalid}},
		{"apiUrl garbage", `{"apiUrl":"not a url"}`, []string{MsgAPIURLInvalid}},
		{"apiUrl no host", `{"apiUrl":"https://"}`, []string{MsgAPIURLInvalid}},
		{"apiUrl bad port", `{"apiUrl":"https://x.example:99999/api"}`, []string{MsgAPIURLInvalid}},
		{"apiUrl space in host", `{"apiUrl":"https://exa mple.com"}`, []string{MsgAPIURLInvalid}},
		{"apiUrl ok", `{"apiUrl":"https://app.daytona.io/api"}`, nil},
		{"apiUrl ok loopback port", `{"apiUrl":"http://127.0.0.1:3000/api"}`, nil},
		{"apiUrl non-special scheme is a URL", `{"apiUrl":"foo:bar"}`, nil},
		{"apiUrl blank is unset", `{"apiUrl":"  "}`, nil},
		{"timeoutMs 0", `{"timeoutMs":0}`, []string{MsgTimeoutRange}},
		{"timeoutMs empty string is 0", `{"timeoutMs":""}`, []string{MsgTimeoutRange}},
		{"timeoutMs 0.9 truncates to 0", `{"timeoutMs":0.9}`, []string{MsgTimeoutRange}},
		{"timeoutMs 1", `{"timeoutMs":1}`, nil},
		{"timeoutMs max", `{"timeoutMs":86400000}`, nil},
		{"timeoutMs above max", `{"timeoutMs":86400001}`, []string{MsgTimeoutRange}},
		{"timeoutMs huge", `{"timeoutMs":1e300}`, []string{MsgTimeoutRange}},
		{"livenessTimeoutMs above max", `{"livenessTimeoutMs":86400001}`, []string{MsgLivenessTimeoutMax}},
		{"livenessTimeoutMs 0 disables", `{"livenessTimeoutMs":0}`, nil},
		{"livenessTimeoutMs negative disables", `{"livenessTimeoutMs":-5}`, nil},
		{"autoStop negative", `{"autoStopInterval":-1}`, []string{MsgAutoStopNegative}},
		{"autoStop -0.5 truncates to 0", `{"autoStopInterval":-0.5}`, nil},
		{"autoArchive negative", `{"autoArchiveInterval":"-2"}`, []string{MsgAutoArchiveNegative}},
		{"autoDelete -1 ok", `{"autoDeleteInterval":-1}`, nil},
		{"autoDelete -2", `{"autoDeleteInterval":-2}`, []string{MsgAutoDeleteBelowMinus1}},
		// rejects resource settings for snapshot-backed creation (test 49).
		{"resources with snapshot", `{"snapshot":"snap","cpu":2}`, []string{MsgResourcesRequireImage}},
		{"resources with default creation", `{"memory":4}`, []string{MsgResourcesRequireImage}},
		{"cpu 0", `{"image":"i","cpu":0}`, []string{MsgCPUNotPositive}},
		{"memory negative", `{"image":"i","memory":-1}`, []string{MsgMemoryNotPositive}},
		{"disk false is 0", `{"image":"i","disk":false}`, []string{MsgDiskNotPositive}},
		{"gpu blank string is 0", `{"image":"i","gpu":" "}`, []string{MsgGPUNotPositive}},
		{"memory outside the dropdown is accepted like the reference", `{"image":"i","memory":16}`, nil},
		{"ttl valid", `{"ttlMinutes":30}`, nil},
		{"ttl string", `{"ttlMinutes":"30"}`, nil},
		{"ttl null", `{"ttlMinutes":null}`, nil},
		{"ttl 0", `{"ttlMinutes":0}`, []string{MsgTTLMinutesInvalid}},
		{"ttl negative", `{"ttlMinutes":-5}`, []string{MsgTTLMinutesInvalid}},
		{"ttl fraction", `{"ttlMinutes":1.5}`, []string{MsgTTLMinutesInvalid}},
		{"ttl fraction string", `{"ttlMinutes":"2.5"}`, []string{MsgTTLMinutesInvalid}},
		{"ttl garbage", `{"ttlMinutes":"soon"}`, []string{MsgTTLMinutesInvalid}},
		{"ttl boolean", `{"ttlMinutes":true}`, []string{MsgTTLMinutesInvalid}},
		{"ttl array", `{"ttlMinutes":[30]}`, []string{MsgTTLMinutesInvalid}},
		{"ttl beyond 2^53", `{"ttlMinutes":1e300}`, []string{MsgTTLMinutesInvalid}},
		{"ttl infinite", `{"ttlMinutes":1e400}`, []string{MsgTTLMinutesInvalid}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Validate(json.RawMessage(tc.raw), withEnvKey))
		})
	}
}

// apiUrl validity against `new URL(s)` (expected values from Node.js 20).
func TestAPIURLMatchesWHATWG(t *testing.T) {
	cases := map[string]bool{
		"https://app.daytona.io/api": true, "http://127.0.0.1:3000/api": true, "not a url": false,
		"app.daytona.io/api": false, "https://": false, "https:": false, "https:example.com": true,
		"https:///example.com": true, "http://x:99999": false, "http://x:65535": true, "http://x:abc": false,
		"foo:bar": true, "mailto:a@b": true, "file:///tmp": true, "file:": true, "https://exa mple.com": false,
		"https://a<b.com": false, "http://[::1]:80/": true, "http://[::1": false, "https://user:pass@host/": true,
		"https://host/path with space": true, "https://host?q=1": true, "https://host#frag": true,
		"//host/path": false, "/relative": false, "1http://x": false, "http://a^b": false, "http://a|b": false,
		"http://%zz": false, "http://a%20b": false, "ws://x": true, "javascript:alert(1)": true,
		"https://:80": false, "https://@host": true, "https://host:/x": true, "HTTPS://HOST": true,
	}
	for s, want := range cases {
		assert.Equal(t, want, isAbsoluteURL(s), "new URL(%q)", s)
	}
}

// The order of docs/behavior.md#validation, all at once, with ttlMinutes appended last.
func TestValidateOrder(t *testing.T) {
	// Blank image and snapshot parse to unset, so "both" cannot fire with
	// them; the ambiguity is checked separately below.
	raw := `{"image":" ","snapshot":"","apiUrl":"nope","timeoutMs":0,"livenessTimeoutMs":86400001,
		"autoStopInterval":-1,"autoArchiveInterval":-1,"autoDeleteInterval":-2,
		"cpu":0,"memory":0,"disk":-1,"gpu":"0","ttlMinutes":0}`
	want := []string{
		MsgImageEmpty, MsgSnapshotEmpty, MsgAPIURLInvalid, MsgTimeoutRange, MsgLivenessTimeoutMax,
		MsgAutoStopNegative, MsgAutoArchiveNegative, MsgAutoDeleteBelowMinus1, MsgAPIKeyRequired,
		MsgResourcesRequireImage, MsgCPUNotPositive, MsgMemoryNotPositive, MsgDiskNotPositive,
		MsgGPUNotPositive, MsgTTLMinutesInvalid,
	}
	assert.Equal(t, want, Validate(json.RawMessage(raw), nil))

	// rejects ambiguous or invalid config — exact 4 errors in order (test 33).
	got := Validate(map[string]any{
		"image": "node:20", "snapshot": "base", "apiUrl": "not a url", "timeoutMs": 0,
	}, nil)
	assert.Equal(t, []string{
		"Daytona sandbox environments must set either image or snapshot, not both.",
		"apiUrl must be a valid URL.",
		"timeoutMs must be between 1 and 86400000.",
		"Daytona sandbox environments require an API key in config or DAYTONA_API_KEY.",
	}, got)

	_, err := ValidateConfig(json.RawMessage(raw), nil)
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	assert.Equal(t, want, verr.Errors)
	assert.Equal(t, strings.Join(want, " "), err.Error())
}

// The exact reference strings, pinned once so a refactor cannot drift them.
func TestValidationMessagesExact(t *testing.T) {
	assert.Equal(t, "Daytona image cannot be empty.", MsgImageEmpty)
	assert.Equal(t, "Daytona snapshot cannot be empty.", MsgSnapshotEmpty)
	assert.Equal(t, "Daytona sandbox environments must set either image or snapshot, not both.", MsgImageAndSnapshot)
	assert.Equal(t, "apiUrl must be a valid URL.", MsgAPIURLInvalid)
	assert.Equal(t, "timeoutMs must be between 1 and 86400000.", MsgTimeoutRange)
	assert.Equal(t, "livenessTimeoutMs must be less than or equal to 86400000.", MsgLivenessTimeoutMax)
	assert.Equal(t, "autoStopInterval must be greater than or equal to 0.", MsgAutoStopNegative)
	assert.Equal(t, "autoArchiveInterval must be greater than or equal to 0.", MsgAutoArchiveNegative)
	assert.Equal(t, "autoDeleteInterval must be greater than or equal to -1.", MsgAutoDeleteBelowMinus1)
	assert.Equal(t, "Daytona sandbox environments require an API key in config or DAYTONA_API_KEY.", MsgAPIKeyRequired)
	assert.Equal(t, "Daytona resource settings require image-backed sandbox creation; snapshot/default sandbox creation cannot override CPU, memory, disk, or GPU.", MsgResourcesRequireImage)
	assert.Equal(t, "cpu must be greater than 0 when provided.", MsgCPUNotPositive)
	assert.Equal(t, "memory must be greater than 0 when provided.", MsgMemoryNotPositive)
	assert.Equal(t, "disk must be greater than 0 when provided.", MsgDiskNotPositive)
	assert.Equal(t, "gpu must be greater than 0 when provided.", MsgGPUNotPositive)
	assert.Equal(t, "ttlMinutes must be a positive whole number of minutes.", MsgTTLMinutesInvalid)
	assert.Equal(t, "Daytona resource settings require image-backed sandbox creation; default sandbox creation cannot override CPU, memory, disk, or GPU.", ErrResourcesRequireImage.Error())
}

// A UUID-shaped apiKey during validation is a secret id: it counts as
// present, is never used, and is echoed so the host keeps the reference.
func TestValidateSecretIDCountsAsKey(t *testing.T) {
	const id = "0b6c0d1e-6f4e-4c43-9d0a-6e5a4b1f2c3d"
	assert.True(t, IsSecretID(id))
	assert.True(t, IsSecretID(strings.ToUpper(id)))
	n, err := ValidateConfig(map[string]any{"apiKey": id}, nil)
	require.NoError(t, err)
	require.NotNil(t, n.APIKey)
	assert.Equal(t, id, *n.APIKey)
	for _, s := range []string{"", "dtn_abc", id + "0", strings.Replace(id, "-", "_", 1), "0b6c0d1e-6f4e-4c43-9d0a-6e5a4b1f2c3g"} {
		assert.False(t, IsSecretID(s), s)
	}
	// A pasted key counts too; blank does not.
	assert.Empty(t, Validate(`{"apiKey":"dtn_pasted"}`, nil))
	assert.Equal(t, []string{MsgAPIKeyRequired}, Validate(`{"apiKey":"   "}`, nil))
}

func TestNormalize(t *testing.T) {
	t.Run("ttlMinutes echoed only when set", func(t *testing.T) {
		n, err := ValidateConfig(`{"ttlMinutes":"45"}`, withEnvKey)
		require.NoError(t, err)
		b, _ := json.Marshal(n)
		assert.Contains(t, string(b), `"archiveOnRelease":false,"ttlMinutes":45}`)
		assert.Len(t, n.AsMap(), 18)
		n = Normalize(mustParse(t, `{}`))
		b, _ = json.Marshal(n)
		assert.NotContains(t, string(b), "ttlMinutes")
	})
	t.Run("resources echoed as numbers, archiveOnRelease kept", func(t *testing.T) {
		n, err := ValidateConfig(`{"image":"node:20","cpu":"4","memory":8,"disk":"10.5","archiveOnRelease":true}`, withEnvKey)
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
			first, err := ValidateConfig(raw, nil)
			require.NoError(t, err)
			b1, _ := json.Marshal(first)
			// The host saves normalizedConfig and later hands it back, merged
			// with lease metadata and host bookkeeping.
			var saved map[string]any
			require.NoError(t, json.Unmarshal(b1, &saved))
			saved["provider"] = "daytona"
			saved["runnerLifecycleMode"] = "warm"
			saved["workspaceSentinel"] = map[string]any{"token": "t"}
			second, err := ValidateConfig(saved, nil)
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
	})
}

// records requested resources in lease metadata — only configured keys (test 51).
func TestLeaseConfigMetadata(t *testing.T) {
	const key = "dtn_metadata_secret"
	c := mustParse(t, `{"apiKey":"`+key+`","image":"node:20","cpu":"4","memory":8,"reuseLease":true,
		"runnerLifecycleMode":"warm","warmRunnerIdleTimeoutMs":900000,"target":"us"}`)
	m := LeaseConfigMetadata(c)
	assert.Equal(t, map[string]any{
		"image": "node:20", "snapshot": nil, "timeoutMs": int64(300000), "reuseLease": true,
		"cpu": 4.0, "memory": 8.0,
	}, m)
	b, err := StableStringify(m)
	require.NoError(t, err)
	assert.NotContains(t, string(b), key)

	m = LeaseConfigMetadata(mustParse(t, `{"snapshot":"snap","archiveOnRelease":true,"timeoutMs":"1000"}`))
	assert.Equal(t, map[string]any{
		"image": nil, "snapshot": "snap", "timeoutMs": int64(1000), "reuseLease": false, "archiveOnRelease": true,
	}, m)

	// Every metadata key the saved (normalized) config also has is JSON-equal
	// to it, so host reuse matching keeps finding the lease.
	n, err := ValidateConfig(`{"apiKey":"k","image":"node:20","cpu":"4","disk":10.5,"reuseLease":true,"timeoutMs":"450000.9"}`, nil)
	require.NoError(t, err)
	saved := n.AsMap()
	for k, v := range LeaseConfigMetadata(mustParse(t, `{"apiKey":"k","image":"node:20","cpu":"4","disk":10.5,"reuseLease":true,"timeoutMs":"450000.9"}`)) {
		mv, _ := StableStringify(v)
		sv, _ := StableStringify(saved[k])
		assert.Equal(t, string(sv), string(mv), k)
	}
}

func TestResolveAPIKeyAndFingerprint(t *testing.T) {
	c := mustParse(t, `{"apiKey":" cfg-key ","apiUrl":"https://app.daytona.io/api","target":"us"}`)
	k, err := ResolveAPIKey(c, withEnvKey)
	require.NoError(t, err)
	assert.Equal(t, "cfg-key", k, "config key wins over DAYTONA_API_KEY")

	c = mustParse(t, `{}`)
	k, err = ResolveAPIKey(c, envWith(map[string]string{EnvAPIKey: "  env-key \n"}))
	require.NoError(t, err)
	assert.Equal(t, "env-key", k, "env key is trimmed")

	_, err = ResolveAPIKey(c, nil)
	assert.ErrorIs(t, err, ErrMissingAPIKey)
	assert.Equal(t, MsgAPIKeyRequired, err.Error())

	// The fingerprint ignores target (test 154: the host fills in the actual
	// region later) and follows the resolved key and apiUrl.
	a := mustParse(t, `{"apiKey":"test-key"}`)
	b := mustParse(t, `{"apiKey":"test-key","target":"eu","image":"x"}`)
	assert.Equal(t, a.Fingerprint(nil), b.Fingerprint(nil))
	assert.Equal(t, "c231e5699afa53aecca21ad4c1fbdf9dfa02efbb9f73ef9cc137ddd2bf5403a6", a.Fingerprint(nil))
	assert.Equal(t, a.Fingerprint(nil), mustParse(t, `{}`).Fingerprint(envWith(map[string]string{EnvAPIKey: "test-key"})))
	// fences failed-creation retries by account (test 23): another key or
	// endpoint is another account.
	assert.NotEqual(t, a.Fingerprint(nil), mustParse(t, `{"apiKey":"other"}`).Fingerprint(nil))
	assert.NotEqual(t, a.Fingerprint(nil), mustParse(t, `{"apiKey":"test-key","apiUrl":"https://x.example/api"}`).Fingerprint(nil))
	assert.Equal(t, AccountFingerprint("", ""), mustParse(t, `{}`).Fingerprint(nil))

	assert.Equal(t, "k2", c.WithAPIKey(" k2 ").APIKey())
	assert.Equal(t, "", c.WithAPIKey("k2").WithAPIKey("  ").APIKey())
}

// passes configured resources to Daytona for image-based creation (47), drops resource
// settings for snapshot-backed runtime creation instead of failing (48), rejects resource
// settings for default sandbox creation before creating a sandbox (50).
func TestRuntimeCreateSource(t *testing.T) {
	src, err := RuntimeCreateSource(mustParse(t, `{"image":"node:20","cpu":2,"memory":4}`))
	require.NoError(t, err)
	assert.Equal(t, "node:20", src.Image)
	assert.Equal(t, "", src.Snapshot)
	require.NotNil(t, src.Resources)
	b, _ := json.Marshal(src.Resources)
	assert.JSONEq(t, `{"cpu":2,"memory":4}`, string(b), "unset members omitted")

	src, err = RuntimeCreateSource(mustParse(t, `{"image":"node:20"}`))
	require.NoError(t, err)
	assert.Nil(t, src.Resources)

	src, err = RuntimeCreateSource(mustParse(t, `{"snapshot":"snap","cpu":2,"gpu":1}`))
	require.NoError(t, err)
	assert.Equal(t, CreateSource{Snapshot: "snap"}, src, "resources dropped for a snapshot")

	_, err = RuntimeCreateSource(mustParse(t, `{"disk":3}`))
	assert.ErrorIs(t, err, ErrResourcesRequireImage)
	assert.Equal(t, MsgRuntimeResourcesRequireImage, err.Error())

	src, err = RuntimeCreateSource(mustParse(t, `{}`))
	require.NoError(t, err)
	assert.Equal(t, CreateSource{}, src, "Daytona's default snapshot")

	src, err = RuntimeCreateSource(mustParse(t, `{"image":"i","snapshot":"s","cpu":1}`))
	require.NoError(t, err)
	assert.Equal(t, "i", src.Image, "never both: image wins for an unvalidated config")
	assert.Equal(t, "", src.Snapshot)
}

func TestCreationTTLMinutes(t *testing.T) {
	m, err := mustParse(t, `{"ttlMinutes":30}`).CreationTTLMinutes()
	require.NoError(t, err)
	assert.Equal(t, int64(30), m)
	m, err = mustParse(t, `{}`).CreationTTLMinutes()
	require.NoError(t, err)
	assert.Zero(t, m)
	// An invalid value in an unvalidated config fails closed instead of
	// silently creating a sandbox without the lifetime the operator set.
	_, err = mustParse(t, `{"ttlMinutes":"1.5"}`).CreationTTLMinutes()
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	assert.Equal(t, []string{MsgTTLMinutesInvalid}, verr.Errors)
}

func TestTimeoutHelpers(t *testing.T) {
	for ms, want := range map[int64]int64{-5: 1, 0: 1, 1: 1, 999: 1, 1000: 1, 1001: 2, 1500: 2, 300000: 300, 300001: 301} {
		assert.Equal(t, want, ToTimeoutSeconds(ms), "ToTimeoutSeconds(%d)", ms)
	}
	c := mustParse(t, `{"timeoutMs":120000}`)
	cases := []struct {
		param *float64
		want  int64
	}{
		{nil, 120000},
		{f64(1500.7), 1500},
		{f64(0), 120000},
		{f64(-1), 120000},
		{f64(math.NaN()), 120000},
		{f64(math.Inf(1)), 120000},
		{f64(0.5), 1},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, ResolveTimeoutMs(tc.param, c), "%v", tc.param)
	}

	assert.Equal(t, 120*time.Second, c.Timeout())
	assert.Equal(t, 120*time.Second, c.AcquireBudget())
	assert.Equal(t, 300*time.Second, mustParse(t, `{"timeoutMs":0}`).AcquireBudget(), "non-positive timeout falls back to 300000")
	assert.Equal(t, 24*time.Hour, mustParse(t, `{"timeoutMs":1e300}`).Timeout(), "clamped to one day: never overflows, even with a margin added")

	d, ok := mustParse(t, `{}`).LivenessBound()
	assert.True(t, ok)
	assert.Equal(t, 30*time.Second, d)
	_, ok = mustParse(t, `{"livenessTimeoutMs":0}`).LivenessBound()
	assert.False(t, ok)
	_, ok = mustParse(t, `{"livenessTimeoutMs":-1}`).LivenessBound()
	assert.False(t, ok)
}

// Warm-window auto-stop floor, docs/behavior.md#warm-window ("warm idle window
// versus Daytona auto-stop" in the seed's tests).
func TestEffectiveAutoStopMinutes(t *testing.T) {
	t.Run("floor relationship for several forwarded warm windows", func(t *testing.T) {
		for _, tc := range []struct {
			warmMs    float64
			wantFloor int64
		}{{125000, 8}, {300000, 10}, {900000, 20}, {1800000, 35}} {
			assert.Equal(t, tc.wantFloor, WarmAutoStopFloorMinutes(tc.warmMs), "warm %v ms", tc.warmMs)
			// A short configured interval is raised to the floor.
			short := mustParse(t, fmt.Sprintf(`{"reuseLease":true,"autoStopInterval":1,"warmRunnerIdleTimeoutMs":%v}`, tc.warmMs))
			assert.Equal(t, tc.wantFloor, EffectiveAutoStopMinutes(short, true, 0), "warm %v ms", tc.warmMs)
			// Passing the window explicitly gives the same answer.
			assert.Equal(t, tc.wantFloor, EffectiveAutoStopMinutes(mustParse(t, `{"autoStopInterval":1}`), true, tc.warmMs))
			// The relationship the seed's regression tests assert, for the
			// default and an explicit 15 alike: max(configured, floor).
			for _, configured := range []string{`{}`, `{"autoStopInterval":15}`, `{"autoStopInterval":1}`} {
				got := EffectiveAutoStopMinutes(mustParse(t, configured), true, tc.warmMs)
				assert.GreaterOrEqual(t, float64(got)*60000, tc.warmMs+WarmAutoStopMarginMinutes*60000, "%s warm %v", configured, tc.warmMs)
			}
		}
	})
	t.Run("staging case: explicit 15 is raised to 20 for a 900 s window", func(t *testing.T) {
		c := mustParse(t, `{"reuseLease":true,"autoStopInterval":15,"warmRunnerIdleTimeoutMs":900000}`)
		got := EffectiveAutoStopMinutes(c, true, 0)
		assert.Equal(t, int64(20), got)
		assert.GreaterOrEqual(t, got*60000, int64(1200000))
	})
	cases := []struct {
		name     string
		raw      string
		reusable bool
		want     int64
	}{
		{"environment selects warm, default window 300 s", `{"runnerLifecycleMode":"warm","autoStopInterval":2}`, true, 10},
		{"environment selects warm, default 15 already above its floor", `{"runnerLifecycleMode":"warm"}`, true, 15},
		{"environment selects warm with its own window", `{"runnerLifecycleMode":"warm","runnerIdleTimeoutMs":125000,"autoStopInterval":2}`, true, 8},
		{"environment warm with a long window raises the default", `{"runnerLifecycleMode":"warm","runnerIdleTimeoutMs":1800000}`, true, 35},
		{"forwarded window wins over the environment's", `{"runnerLifecycleMode":"warm","runnerIdleTimeoutMs":125000,"warmRunnerIdleTimeoutMs":1800000}`, true, 35},
		{"explicit 0 stays disabled", `{"autoStopInterval":0,"warmRunnerIdleTimeoutMs":900000}`, true, 0},
		{"longer configured value kept", `{"autoStopInterval":60,"warmRunnerIdleTimeoutMs":900000}`, true, 60},
		{"inherit with a per-turn agent: nothing forwarded, explicit 2 stays 2", `{"runnerLifecycleMode":"inherit","autoStopInterval":2}`, true, 2},
		{"per_turn keeps the configured value", `{"runnerLifecycleMode":"per_turn","runnerIdleTimeoutMs":900000}`, true, 15},
		{"runnerIdleTimeoutMs alone does not select warm", `{"runnerIdleTimeoutMs":900000}`, true, 15},
		{"non-reusable keeps the configured value", `{"warmRunnerIdleTimeoutMs":900000}`, false, 15},
		{"non-reusable with environment warm", `{"runnerLifecycleMode":"warm"}`, false, 15},
		{"invalid negative configured value is not hidden", `{"autoStopInterval":-3,"warmRunnerIdleTimeoutMs":900000}`, true, -3},
		{"fractional window rounds up", `{"warmRunnerIdleTimeoutMs":60000.5}`, true, 15},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, EffectiveAutoStopMinutes(mustParse(t, tc.raw), tc.reusable, 0))
		})
	}
	assert.Equal(t, int64(7), WarmAutoStopFloorMinutes(60000.5), "ceil(1.0000083) + 5")
	// NaN/Inf passed explicitly falls back to the config.
	assert.Equal(t, int64(15), EffectiveAutoStopMinutes(mustParse(t, `{}`), true, math.NaN()))
	assert.Equal(t, int64(15), EffectiveAutoStopMinutes(mustParse(t, `{}`), true, math.Inf(1)))

	// Resume raises only a shorter, enabled interval.
	assert.True(t, ShouldRaiseAutoStop(15, 20))
	assert.False(t, ShouldRaiseAutoStop(20, 20))
	assert.False(t, ShouldRaiseAutoStop(30, 20))
	assert.False(t, ShouldRaiseAutoStop(0, 20), "0 on the sandbox already never stops")
}

// Stale-handle refresh threshold, docs/behavior.md#stale-handle (tests 147, 148, 151).
func TestStaleHandleThreshold(t *testing.T) {
	d, ok := StaleHandleThreshold(mustParse(t, `{}`))
	assert.True(t, ok)
	assert.Equal(t, 7*time.Minute+30*time.Second, d, "default 15 min → refresh after 7.5 min idle")

	d, ok = StaleHandleThreshold(mustParse(t, `{"autoStopInterval":1}`))
	assert.True(t, ok)
	assert.Equal(t, 30*time.Second, d)

	// never refreshes when auto-stop is disabled, even after a long idle gap (test 151).
	_, ok = StaleHandleThreshold(mustParse(t, `{"autoStopInterval":0}`))
	assert.False(t, ok)

	// The warm floor does not stretch the threshold: it keeps the configured interval.
	warm := mustParse(t, `{"reuseLease":true,"autoStopInterval":15,"warmRunnerIdleTimeoutMs":1800000}`)
	require.Equal(t, int64(35), EffectiveAutoStopMinutes(warm, true, 0))
	d, ok = StaleHandleThreshold(warm)
	assert.True(t, ok)
	assert.Equal(t, 7*time.Minute+30*time.Second, d)
}

func TestWarnings(t *testing.T) {
	assert.Empty(t, Warnings(mustParse(t, `{"image":"i","memory":8}`)))
	assert.Empty(t, Warnings(mustParse(t, `{}`)))
	w := Warnings(mustParse(t, `{"image":"i","memory":16}`))
	require.Len(t, w, 1)
	assert.Contains(t, w[0], "memory 16")
}

// Config must never print its API key.
func TestConfigRedaction(t *testing.T) {
	const key = "dtn_SUPER_SECRET_key_0123456789"
	c := mustParse(t, `{"apiKey":"`+key+`","apiUrl":"https://app.daytona.io/api","image":"node:20","cpu":2,
		"runnerLifecycleMode":"warm","warmRunnerIdleTimeoutMs":900000,"ttlMinutes":30}`)
	require.Equal(t, key, c.APIKey())
	n := Normalize(c)

	type exported struct{ C Config }
	type unexported struct{ c Config }
	type withNormalized struct{ n NormalizedConfig }
	var outputs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x", "%T %v", "%10.3v"} {
		outputs = append(outputs,
			fmt.Sprintf(verb, c), fmt.Sprintf(verb, &c), fmt.Sprintf(verb, n), fmt.Sprintf(verb, &n),
			fmt.Sprintf(verb, exported{c}), fmt.Sprintf(verb, unexported{c}), fmt.Sprintf(verb, []Config{c}),
			fmt.Sprintf(verb, map[string]any{"cfg": c}), fmt.Sprintf(verb, withNormalized{n}),
		)
	}
	outputs = append(outputs, fmt.Sprint(c), fmt.Sprintln(c), c.String(), c.GoString(), n.String(), n.GoString())
	outputs = append(outputs, fmt.Errorf("acquire failed for %v: %w", c, errors.New("boom")).Error())

	var logs bytes.Buffer
	jsonLog := slog.New(slog.NewJSONHandler(&logs, nil))
	jsonLog.Info("config", "cfg", c, "normalized", n, "ptr", &c)
	textLog := slog.New(slog.NewTextHandler(&logs, nil))
	textLog.Info("config", "cfg", c, "normalized", n)
	textLog.Info("config", slog.Any("group", c))
	outputs = append(outputs, logs.String())

	j, err := json.Marshal(c)
	require.NoError(t, err)
	outputs = append(outputs, string(j))
	j, err = json.Marshal(c.Redacted())
	require.NoError(t, err)
	outputs = append(outputs, string(j))
	j, err = json.Marshal(exported{c})
	require.NoError(t, err)
	outputs = append(outputs, string(j))

	for _, out := range outputs {
		assert.NotContains(t, out, key)
		assert.NotContains(t, out, "SUPER_SECRET")
	}
	// The redacted view still says what is configured.
	assert.Contains(t, c.String(), RedactedPlaceholder)
	assert.Contains(t, c.String(), "node:20")
	assert.Contains(t, logs.String(), RedactedPlaceholder)
	assert.Contains(t, string(j), RedactedPlaceholder)
	assert.Equal(t, RedactedPlaceholder, c.Redacted()["apiKey"])
	assert.Nil(t, mustParse(t, `{}`).Redacted()["apiKey"], "no key: null, not a placeholder")

	// Masking keeps configs comparable: same key, equal configs.
	assert.Equal(t, c, mustParse(t, `{"apiKey":"`+key+`","apiUrl":"https://app.daytona.io/api","image":"node:20","cpu":2,
		"runnerLifecycleMode":"warm","warmRunnerIdleTimeoutMs":900000,"ttlMinutes":30}`))
	assert.NotEqual(t, c, c.WithAPIKey("other"))

	// The wire form of NormalizedConfig does carry the key: the host turns it
	// into a company secret (docs/behavior.md#validation). That is the only place it appears.
	wire, err := json.Marshal(n)
	require.NoError(t, err)
	assert.Contains(t, string(wire), key)
	assert.Equal(t, key, n.AsMap()["apiKey"])
}

// Parsing and helpers are pure: concurrent use is race-free.
func TestConcurrentUse(t *testing.T) {
	raw := json.RawMessage(`{"apiKey":"k","image":"i","cpu":2,"warmRunnerIdleTimeoutMs":900000,"reuseLease":true}`)
	c := mustParse(t, string(raw))
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 50 {
				_ = Validate(raw, withEnvKey)
				_ = c.Fingerprint(nil)
				_ = c.String()
				_ = EffectiveAutoStopMinutes(c, true, 0)
				_, _ = ValidateConfig(raw, nil)
			}
		}()
	}
	for range 8 {
		<-done
	}
}
