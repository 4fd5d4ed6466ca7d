package config

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
		{"apiUrl only a query", `{"apiUrl":"https:?q"}`, []string{MsgAPIURLInvalid}},
		{"apiUrl only a fragment", `{"apiUrl":"https:#f"}`, []string{MsgAPIURLInvalid}},
		{"apiUrl only a port", `{"apiUrl":"https::443"}`, []string{MsgAPIURLInvalid}},
		{"apiUrl only credentials", `{"apiUrl":"https:@x"}`, []string{MsgAPIURLInvalid}},
		{"apiUrl host without slashes", `{"apiUrl":"https:example.com"}`, nil},
		{"apiUrl bad port", `{"apiUrl":"https://x.example:99999/api"}`, []string{MsgAPIURLInvalid}},
		{"apiUrl space in host", `{"apiUrl":"https://exa mple.com"}`, []string{MsgAPIURLInvalid}},
		{"apiUrl DEL in host", `{"apiUrl":"https://exa\u007fmple.com"}`, []string{MsgAPIURLInvalid}},
		{"apiUrl caret in host", `{"apiUrl":"https://exa^mple.com"}`, []string{MsgAPIURLInvalid}},
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
		{"ttl empty string is unset", `{"ttlMinutes":""}`, nil},
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

	_, err := ValidateAndNormalize(json.RawMessage(raw), nil)
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	assert.Equal(t, want, verr.Errors)
	assert.Equal(t, strings.Join(want, " "), err.Error())
}

// The exact reference strings, pinned once so a refactor cannot drift them.
func TestValidationMessagesExact(t *testing.T) {
	for _, m := range []struct{ got, want string }{
		{MsgImageEmpty, "Daytona image cannot be empty."},
		{MsgSnapshotEmpty, "Daytona snapshot cannot be empty."},
		{MsgImageAndSnapshot, "Daytona sandbox environments must set either image or snapshot, not both."},
		{MsgAPIURLInvalid, "apiUrl must be a valid URL."},
		{MsgTimeoutRange, "timeoutMs must be between 1 and 86400000."},
		{MsgLivenessTimeoutMax, "livenessTimeoutMs must be less than or equal to 86400000."},
		{MsgAutoStopNegative, "autoStopInterval must be greater than or equal to 0."},
		{MsgAutoArchiveNegative, "autoArchiveInterval must be greater than or equal to 0."},
		{MsgAutoDeleteBelowMinus1, "autoDeleteInterval must be greater than or equal to -1."},
		{MsgAPIKeyRequired, "Daytona sandbox environments require an API key in config or DAYTONA_API_KEY."},
		{MsgResourcesRequireImage, "Daytona resource settings require image-backed sandbox creation; snapshot/default sandbox creation cannot override CPU, memory, disk, or GPU."},
		{MsgCPUNotPositive, "cpu must be greater than 0 when provided."},
		{MsgMemoryNotPositive, "memory must be greater than 0 when provided."},
		{MsgDiskNotPositive, "disk must be greater than 0 when provided."},
		{MsgGPUNotPositive, "gpu must be greater than 0 when provided."},
		{MsgTTLMinutesInvalid, "ttlMinutes must be a positive whole number of minutes."},
		{ErrResourcesRequireImage.Error(), "Daytona resource settings require image-backed sandbox creation; default sandbox creation cannot override CPU, memory, disk, or GPU."},
	} {
		assert.Equal(t, m.want, m.got)
	}
}

// A UUID-shaped apiKey during validation is a secret id: it counts as
// present, is never used, and is echoed so the host keeps the reference.
func TestValidateSecretIDCountsAsKey(t *testing.T) {
	const id = "0b6c0d1e-6f4e-4c43-9d0a-6e5a4b1f2c3d"
	n, err := ValidateAndNormalize(map[string]any{"apiKey": id}, nil)
	require.NoError(t, err)
	require.NotNil(t, n.APIKey)
	assert.Equal(t, id, *n.APIKey)
	// A pasted key counts too; blank does not.
	assert.Empty(t, Validate(`{"apiKey":"dtn_pasted"}`, nil))
	assert.Equal(t, []string{MsgAPIKeyRequired}, Validate(`{"apiKey":"   "}`, nil))
}

func TestWarnings(t *testing.T) {
	// The manifest's sizes, 1, 2, 4 and 8 GiB, warn of nothing; others do.
	for _, m := range []string{"1", "2", "4", "8"} {
		assert.Empty(t, Warnings(mustParse(t, `{"image":"i","memory":`+m+`}`)), m)
	}
	for _, m := range []string{"3", "6", "1.5"} {
		assert.Len(t, Warnings(mustParse(t, `{"image":"i","memory":`+m+`}`)), 1, m)
	}
	assert.Empty(t, Warnings(mustParse(t, `{}`)))
	w := Warnings(mustParse(t, `{"image":"i","memory":16}`))
	require.Len(t, w, 1)
	assert.Contains(t, w[0], "memory 16")
	// A memory that is not positive is an error of its own
	// (MsgMemoryNotPositive), not also a warning.
	assert.Empty(t, Warnings(mustParse(t, `{"image":"i","memory":0}`)))
	assert.Empty(t, Warnings(mustParse(t, `{"image":"i","memory":-1}`)))
}
