package config

import (
	"bytes"
	"encoding/json"
	"math"

	"github.com/daytonaworker/daytona-worker/internal/jsvalue"
)

// fields is the parse result at JavaScript precision: validation works on
// these values, Config holds them converted to Go types.
type fields struct {
	apiKey, apiURL, target, snapshot, image, language string

	timeoutMs, livenessTimeoutMs float64
	cpu, memory, disk, gpu       *float64

	autoStop, autoArchive, autoDelete float64
	reuseLease, archiveOnRelease      bool

	ttlMinutes float64 // 0 = absent
	ttlInvalid bool

	runnerLifecycleMode string
	runnerIdleTimeoutMs float64
	warmIdleTimeoutMs   float64
}

// Parse parses an environment config leniently (docs/behavior.md#config-parsing): unknown keys
// are ignored, numbers may arrive as JSON numbers or strings and are coerced
// with JavaScript's Number() semantics, booleans count only when literally
// true. raw may be json.RawMessage, []byte or string (JSON text),
// map[string]any, nil (an empty config) or any value encoding/json marshals
// to an object.
//
// The only error is a *ValidationError for input that is not a JSON object.
// Field values never fail parsing; use Validate for that.
func Parse(raw any) (Config, error) {
	m, err := configObject(raw)
	if err != nil {
		return Config{}, err
	}
	return parseFields(m).config(), nil
}

// configObject turns raw into a decoded JSON object with numbers kept as
// json.Number (so 1e400 means Infinity, as in JSON.parse, instead of an
// error).
func configObject(raw any) (map[string]any, error) {
	notObject := &ValidationError{Errors: []string{MsgConfigNotObject}}
	var data []byte
	switch x := raw.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		if x == nil {
			return map[string]any{}, nil
		}
		return x, nil
	case json.RawMessage:
		data = x
	case []byte:
		data = x
	case string:
		data = []byte(x)
	default:
		b, err := json.Marshal(raw)
		if err != nil {
			return nil, notObject
		}
		data = b
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return map[string]any{}, nil
	}
	v, err := jsvalue.ParseJSON(data)
	if err != nil {
		return nil, notObject
	}
	switch x := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return x, nil
	default:
		return nil, notObject
	}
}

func parseFields(m map[string]any) fields {
	f := fields{
		apiKey:   optString(m, "apiKey"),
		apiURL:   optString(m, "apiUrl"),
		target:   optString(m, "target"),
		snapshot: optString(m, "snapshot"),
		image:    optString(m, "image"),
		language: optString(m, "language"),

		timeoutMs:         numberOrDefault(m, "timeoutMs", DefaultTimeoutMs),
		livenessTimeoutMs: numberOrDefault(m, "livenessTimeoutMs", DefaultLivenessTimeoutMs),

		cpu:    optNumber(m, "cpu"),
		memory: optNumber(m, "memory"),
		disk:   optNumber(m, "disk"),
		gpu:    optNumber(m, "gpu"),

		autoStop:    interval(m, "autoStopInterval", DefaultAutoStopInterval),
		autoArchive: interval(m, "autoArchiveInterval", DefaultAutoArchiveInterval),
		autoDelete:  interval(m, "autoDeleteInterval", DefaultAutoDeleteInterval),

		reuseLease:       m["reuseLease"] == true,
		archiveOnRelease: m["archiveOnRelease"] == true,

		runnerIdleTimeoutMs: positiveWindow(m, "runnerIdleTimeoutMs"),
		warmIdleTimeoutMs:   positiveWindow(m, "warmRunnerIdleTimeoutMs"),
	}
	if s, ok := m["runnerLifecycleMode"].(string); ok {
		f.runnerLifecycleMode = s
	}
	f.ttlMinutes, f.ttlInvalid = ttlMinutes(m)
	return f
}

// optString: kept only if a string that is non-empty after trimming; kept
// trimmed.
func optString(m map[string]any, key string) string {
	s, ok := m[key].(string)
	if !ok {
		return ""
	}
	return jsvalue.Trim(s)
}

// numberOrDefault: Number(raw ?? def), truncated when finite, def otherwise.
func numberOrDefault(m map[string]any, key string, def float64) float64 {
	v, present := m[key]
	if !present || v == nil {
		return def
	}
	n := jsvalue.ToNumber(v)
	if math.IsNaN(n) || math.IsInf(n, 0) {
		return def
	}
	return math.Trunc(n)
}

// optNumber: null, absent and "" are "not configured"; otherwise Number(v),
// kept when finite (fractions kept).
func optNumber(m map[string]any, key string) *float64 {
	v, present := m[key]
	if !present || v == nil || v == "" {
		return nil
	}
	n := jsvalue.ToNumber(v)
	if math.IsNaN(n) || math.IsInf(n, 0) {
		return nil
	}
	return &n
}

// interval: like optNumber but truncated, and def when not configured or
// invalid. Explicit 0 and -1 are preserved.
func interval(m map[string]any, key string, def float64) float64 {
	n := optNumber(m, key)
	if n == nil {
		return def
	}
	return math.Trunc(*n)
}

// positiveWindow reads a host-owned millisecond window: any positive finite
// number (JSON number or numeric string); anything else, including booleans,
// counts as absent (0). The seed gives no range for warmRunnerIdleTimeoutMs
// (docs/host.md#newer-contract).
func positiveWindow(m map[string]any, key string) float64 {
	v, present := m[key]
	if !present || v == nil || v == "" {
		return 0
	}
	if _, isBool := v.(bool); isBool {
		return 0
	}
	n := jsvalue.ToNumber(v)
	if math.IsNaN(n) || math.IsInf(n, 0) || n <= 0 {
		return 0
	}
	return n
}

// ttlMinutes reads the seed-only ttlMinutes (docs/behavior.md#ttl): absent, null or "" is
// not set; otherwise a JSON number or numeric string holding a whole number
// in 1..2^53-1. Booleans, arrays and objects are invalid (unlike Number(),
// which would read true as 1 minute).
func ttlMinutes(m map[string]any) (minutes float64, invalid bool) {
	v, present := m["ttlMinutes"]
	if !present || v == nil || v == "" {
		return 0, false
	}
	switch v.(type) {
	case bool, []any, map[string]any:
		return 0, true
	}
	n := jsvalue.ToNumber(v)
	if math.IsNaN(n) || math.IsInf(n, 0) || n != math.Trunc(n) || n < 1 || n > maxSafeInteger {
		return 0, true
	}
	return n, false
}

// toInt64 converts a truncated JavaScript number to int64, saturating at
// ±(2^53-1). Valid configs never come near the bounds; saturation only keeps
// absurd unvalidated values representable and JSON-exact.
func toInt64(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f > maxSafeInteger:
		return maxSafeInteger
	case f < -maxSafeInteger:
		return -maxSafeInteger
	}
	return int64(f)
}

func (f fields) config() Config {
	c := Config{
		APIURL:                  f.apiURL,
		Target:                  f.target,
		Snapshot:                f.snapshot,
		Image:                   f.image,
		Language:                f.language,
		TimeoutMs:               toInt64(f.timeoutMs),
		LivenessTimeoutMs:       toInt64(f.livenessTimeoutMs),
		CPU:                     f.cpu,
		Memory:                  f.memory,
		Disk:                    f.disk,
		GPU:                     f.gpu,
		AutoStopInterval:        toInt64(f.autoStop),
		AutoArchiveInterval:     toInt64(f.autoArchive),
		AutoDeleteInterval:      toInt64(f.autoDelete),
		ReuseLease:              f.reuseLease,
		ArchiveOnRelease:        f.archiveOnRelease,
		TTLMinutes:              toInt64(f.ttlMinutes),
		ttlInvalid:              f.ttlInvalid,
		RunnerLifecycleMode:     f.runnerLifecycleMode,
		RunnerIdleTimeoutMs:     f.runnerIdleTimeoutMs,
		WarmRunnerIdleTimeoutMs: f.warmIdleTimeoutMs,
	}
	c.apiKey = sealSecret(f.apiKey)
	return c
}
