package config

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
	assert.Equal(t, Default(), mustParse(t, `{}`))
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
			{`{"cpu":" "}`, new(0.0)}, // Number(" ") is 0, not unset
			{`{"cpu":"2.5"}`, new(2.5)},
			{`{"cpu":2.5}`, new(2.5)}, // fractions kept
			{`{"cpu":"x"}`, nil},
			{`{"cpu":"Infinity"}`, nil},
			{`{"cpu":false}`, new(0.0)},
			{`{"cpu":true}`, new(1.0)},
			{`{"cpu":[]}`, new(0.0)},
			{`{"cpu":{}}`, nil},
		}
		for _, tc := range cases {
			assert.Equal(t, tc.want, mustParse(t, tc.raw).CPU, tc.raw)
		}
		c := mustParse(t, `{"cpu":1,"memory":"8","disk":10.5,"gpu":"1"}`)
		assert.Equal(t, new(1.0), c.CPU)
		assert.Equal(t, new(8.0), c.Memory)
		assert.Equal(t, new(10.5), c.Disk)
		assert.Equal(t, new(1.0), c.GPU)
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
		fromMap, err := Parse(map[string]any{"image": "node:20", "cpu": 2, "timeoutMs": int64(1000)})
		require.NoError(t, err)
		fromBytes, err := Parse([]byte(`{"image":"node:20","cpu":2,"timeoutMs":1000}`))
		require.NoError(t, err)
		fromStruct, err := Parse(struct {
			Image     string `json:"image"`
			CPU       int    `json:"cpu"`
			TimeoutMs int    `json:"timeoutMs"`
		}{"node:20", 2, 1000})
		require.NoError(t, err)
		assert.Equal(t, fromMap, fromBytes)
		assert.Equal(t, fromMap, fromStruct)
		c, err := Parse(nil)
		require.NoError(t, err)
		assert.Equal(t, Default(), c)
		for _, bad := range []any{json.RawMessage(`[]`), json.RawMessage(`"x"`), json.RawMessage(`{"a":`), json.RawMessage(`{} {}`), []int{1}, func() {}} {
			_, err := Parse(bad)
			var verr *ValidationError
			require.ErrorAs(t, err, &verr, "%T", bad)
			assert.Equal(t, []string{MsgConfigNotObject}, verr.Errors)
			assert.Equal(t, []string{MsgConfigNotObject}, Validate(bad, withEnvKey))
		}
	})
}
