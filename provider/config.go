package provider

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/daytonaworker/daytona-worker/internal/clamp"
)

// Configuration of a Daytona sandbox environment (docs/behavior.md#config-parsing,
// docs/host.md#config, docs/host.md#lease, docs/host.md#validate-config). Parsing is deliberately lenient and reproduces the
// JavaScript coercions of the reference plugin, because the host rebuilds
// configs for later calls from lease metadata (extra keys, numbers that were
// saved by another plugin version) and the Go worker must read them exactly as
// the TypeScript worker did.

// Defaults and bounds of docs/behavior.md#config-schema and docs/behavior.md#config-parsing.
const (
	// DefaultTimeoutMs is the create/start/stop/execute budget and the whole
	// fresh-acquisition budget (docs/behavior.md#acquire-budget).
	DefaultTimeoutMs = 300000
	// DefaultLivenessTimeoutMs bounds each liveness read (docs/behavior.md#liveness-bound).
	DefaultLivenessTimeoutMs = 30000
	// MaxTimeoutMs is the upper bound of timeoutMs and livenessTimeoutMs.
	MaxTimeoutMs = 86400000
	// Quota-safe inactivity intervals, in minutes, always sent at create.
	DefaultAutoStopInterval    = 15
	DefaultAutoArchiveInterval = 60
	DefaultAutoDeleteInterval  = 10080
	// DefaultRunnerIdleTimeoutMs is the host's warm-runner idle window when
	// the environment selects runnerLifecycleMode "warm" without
	// runnerIdleTimeoutMs (docs/behavior.md#warm-window).
	DefaultRunnerIdleTimeoutMs = 300000
	// WarmAutoStopMarginMinutes is the margin the warm floor adds after the
	// warm idle window (docs/behavior.md#warm-window).
	WarmAutoStopMarginMinutes = 5
	// EnvAPIKey is the host-level fallback for the API key (docs/behavior.md#api-key, docs/behavior.md#secrets).
	EnvAPIKey = "DAYTONA_API_KEY"
	// RunnerLifecycleWarm is the runnerLifecycleMode value that selects a warm
	// runner on the environment itself.
	RunnerLifecycleWarm = "warm"
)

// maxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER (2^53 - 1). Whole
// numbers beyond it cannot be represented exactly in the host's JSON, so the
// parser saturates there.
const maxSafeInteger = 1<<53 - 1

// Validation messages, exactly as the reference plugin words them (docs/behavior.md#validation),
// plus the seed-only ttlMinutes message (docs/behavior.md#ttl, the spec's proposed text).
// The host shows errors[0] to the operator.
const (
	MsgImageEmpty            = "Daytona image cannot be empty."
	MsgSnapshotEmpty         = "Daytona snapshot cannot be empty."
	MsgImageAndSnapshot      = "Daytona sandbox environments must set either image or snapshot, not both."
	MsgAPIURLInvalid         = "apiUrl must be a valid URL."
	MsgTimeoutRange          = "timeoutMs must be between 1 and 86400000."
	MsgLivenessTimeoutMax    = "livenessTimeoutMs must be less than or equal to 86400000."
	MsgAutoStopNegative      = "autoStopInterval must be greater than or equal to 0."
	MsgAutoArchiveNegative   = "autoArchiveInterval must be greater than or equal to 0."
	MsgAutoDeleteBelowMinus1 = "autoDeleteInterval must be greater than or equal to -1."
	MsgAPIKeyRequired        = "Daytona sandbox environments require an API key in config or DAYTONA_API_KEY."
	MsgResourcesRequireImage = "Daytona resource settings require image-backed sandbox creation; snapshot/default sandbox creation cannot override CPU, memory, disk, or GPU."
	MsgCPUNotPositive        = "cpu must be greater than 0 when provided."
	MsgMemoryNotPositive     = "memory must be greater than 0 when provided."
	MsgDiskNotPositive       = "disk must be greater than 0 when provided."
	MsgGPUNotPositive        = "gpu must be greater than 0 when provided."
	MsgTTLMinutesInvalid     = "ttlMinutes must be a positive whole number of minutes."
	MsgConfigNotObject       = "Daytona config must be a JSON object."
	// MsgRuntimeResourcesRequireImage is the runtime (create-time) wording of
	// docs/behavior.md#runtime-resources, which differs from MsgResourcesRequireImage.
	MsgRuntimeResourcesRequireImage = "Daytona resource settings require image-backed sandbox creation; default sandbox creation cannot override CPU, memory, disk, or GPU."
)

// configError is an error with a fixed, operator-facing message. Being a
// comparable string type, its values work as sentinels with errors.Is.
type configError string

func (e configError) Error() string { return string(e) }

const (
	// ErrMissingAPIKey: neither the config nor DAYTONA_API_KEY supplies a key
	// (docs/behavior.md#api-key). Same text as the validation message.
	ErrMissingAPIKey = configError(MsgAPIKeyRequired)
	// ErrResourcesRequireImage: the runtime resource rule of docs/behavior.md#runtime-resources — resources
	// are set but neither image nor snapshot is. Returned before any provider
	// call. Note the text differs from the validation message.
	ErrResourcesRequireImage = configError(MsgRuntimeResourcesRequireImage)
	// ErrInvalidConfig matches every *ValidationError with errors.Is.
	ErrInvalidConfig = configError("invalid Daytona sandbox environment config")
)

// ValidationError carries the validation messages of a config, in the order
// of docs/behavior.md#validation. It is the error the RPC layer maps to JSON-RPC -32602 (invalid
// params); Errors[0] is what the host shows. Use errors.As to get it, or
// errors.Is(err, ErrInvalidConfig) to recognise it.
type ValidationError struct {
	Errors []string
}

func (e *ValidationError) Error() string {
	if len(e.Errors) == 0 {
		return string(ErrInvalidConfig)
	}
	return strings.Join(e.Errors, " ")
}

// Is makes errors.Is(err, ErrInvalidConfig) true for any *ValidationError.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalidConfig }

// EnvLookup reads a process environment variable; os.LookupEnv fits. It is
// injected so that the config logic never reads the process environment
// itself (tests, and a worker serving several environments, pass their own).
// A nil EnvLookup means "no environment".
type EnvLookup func(key string) (string, bool)

func (l EnvLookup) get(key string) string {
	if l == nil {
		return ""
	}
	v, _ := l(key)
	return v
}

// secret holds the API key masked (XOR with a random per-process pad whose
// bytes are never zero). Config's own String/Format/LogValue/MarshalJSON
// redact it, but fmt also prints values it reaches by reflection — a Config
// held in an unexported field, or printed with a verb the field type does not
// support, is dumped field by field, pointers included — and so do
// reflection-based dumpers such as spew. Masking keeps the key out of all of
// them; equal keys still compare equal within the process.
type secret struct{ masked string }

var secretPad = newSecretPad()

func newSecretPad() [32]byte {
	var pad [32]byte
	_, _ = rand.Read(pad[:]) // crypto/rand.Read never fails (it aborts the process instead)
	for i := range pad {
		if pad[i] == 0 {
			pad[i] = 0xa5 // a zero byte would leave that key byte readable
		}
	}
	return pad
}

func sealSecret(plain string) secret {
	b := []byte(plain)
	for i := range b {
		b[i] ^= secretPad[i%len(secretPad)]
	}
	return secret{masked: string(b)}
}

func (s secret) reveal() string {
	b := []byte(s.masked)
	for i := range b {
		b[i] ^= secretPad[i%len(secretPad)]
	}
	return string(b)
}

// Config is a parsed Daytona environment config. The zero value is not
// useful; get one from ParseConfig or DefaultConfig.
//
// Empty strings mean "not configured" (the reference's null). The API key is
// not a field: read it with APIKey or ResolveAPIKey. Printing a Config with
// fmt, slog or encoding/json never shows the key.
type Config struct {
	apiKey secret

	APIURL   string // "" = the client's default endpoint
	Target   string // "" = the account's default target
	Snapshot string // "" = no snapshot
	Image    string // "" = no image
	Language string // "" = no language hint

	// TimeoutMs is Number(raw ?? 300000) truncated; non-finite input gives the
	// default. Unvalidated configs may hold 0 or negative values.
	TimeoutMs int64
	// LivenessTimeoutMs bounds liveness reads; <= 0 disables the bound.
	LivenessTimeoutMs int64

	// Resources, nil when not configured. Fractions are kept, as in the
	// reference.
	CPU, Memory, Disk, GPU *float64

	// Inactivity intervals in minutes. 0 disables auto-stop; 0 archive means
	// Daytona's maximum; -1 disables auto-delete.
	AutoStopInterval    int64
	AutoArchiveInterval int64
	AutoDeleteInterval  int64

	ReuseLease       bool
	ArchiveOnRelease bool

	// TTLMinutes is the seed-only wall-clock lifetime (docs/behavior.md#ttl); 0 = not set.
	// A present but invalid value leaves it 0; CreationTTLMinutes reports it.
	TTLMinutes int64
	ttlInvalid bool

	// Host-owned keys (docs/behavior.md#warm-window, docs/host.md#config, docs/host.md#host-config-keys). They are read because
	// they select the warm auto-stop floor, and never echoed by Normalize:
	// the host re-applies them itself.
	RunnerLifecycleMode string  // "", "inherit", "per_turn" or "warm"
	RunnerIdleTimeoutMs float64 // 0 = absent
	// WarmRunnerIdleTimeoutMs is forwarded by hosts of the newer contract for
	// warm paperclip_runner runs only; 0 = absent.
	WarmRunnerIdleTimeoutMs float64
}

// DefaultConfig returns the config an empty object parses to.
func DefaultConfig() Config {
	return Config{
		TimeoutMs:           DefaultTimeoutMs,
		LivenessTimeoutMs:   DefaultLivenessTimeoutMs,
		AutoStopInterval:    DefaultAutoStopInterval,
		AutoArchiveInterval: DefaultAutoArchiveInterval,
		AutoDeleteInterval:  DefaultAutoDeleteInterval,
	}
}

// APIKey returns the trimmed apiKey from the config, or "" when it has none.
// During environmentValidateConfig this may be a secret id (see IsSecretID);
// in every other call the host has resolved it to the key.
func (c Config) APIKey() string { return c.apiKey.reveal() }

// WithAPIKey returns a copy of c with the given API key (trimmed; blank
// clears it). For tests and for callers that build configs in code.
func (c Config) WithAPIKey(key string) Config {
	c.apiKey = sealSecret(jsTrim(key))
	return c
}

// ResolveAPIKey returns the key to authenticate with: the config's apiKey,
// else the trimmed DAYTONA_API_KEY from env, else ErrMissingAPIKey (docs/behavior.md#api-key).
func ResolveAPIKey(c Config, env EnvLookup) (string, error) {
	if k := c.APIKey(); k != "" {
		return k, nil
	}
	if k := jsTrim(env.get(EnvAPIKey)); k != "" {
		return k, nil
	}
	return "", ErrMissingAPIKey
}

// Fingerprint returns the account fingerprint (docs/behavior.md#envelope) of this config: the
// resolved key (or null when none resolves) and apiUrl. It is the account
// part of every cache/scope key and the envelope's accountFingerprint.
func (c Config) Fingerprint(env EnvLookup) string {
	key, _ := ResolveAPIKey(c, env)
	return AccountFingerprint(key, c.APIURL)
}

// Timeout is TimeoutMs as a duration, clamped to one day: absurd
// unvalidated values must neither overflow nor outlive any real use.
func (c Config) Timeout() time.Duration { return clamp.Millis(float64(c.TimeoutMs)) }

// AcquireBudget is the single fresh-acquisition budget of docs/behavior.md#acquire: timeoutMs
// when positive, else 300000 ms.
func (c Config) AcquireBudget() time.Duration {
	if c.TimeoutMs > 0 {
		return c.Timeout()
	}
	return DefaultTimeoutMs * time.Millisecond
}

// LivenessBound returns the per-call bound on liveness reads (docs/behavior.md#liveness-bound); ok is
// false when livenessTimeoutMs <= 0 disables it.
func (c Config) LivenessBound() (d time.Duration, ok bool) {
	if c.LivenessTimeoutMs <= 0 {
		return 0, false
	}
	return clamp.Millis(float64(c.LivenessTimeoutMs)), true
}

// HasResources reports whether any of cpu, memory, disk, gpu is configured.
func (c Config) HasResources() bool {
	return c.CPU != nil || c.Memory != nil || c.Disk != nil || c.GPU != nil
}

// CreationTTLMinutes returns the configured wall-clock lifetime for the
// create request (docs/behavior.md#ttl): 0 when none is configured, or a *ValidationError
// when the config carries an invalid ttlMinutes (validation rejects it at
// save time; a config that skipped validation must not silently lose the
// lifetime the operator asked for).
func (c Config) CreationTTLMinutes() (int64, error) {
	if c.ttlInvalid {
		return 0, &ValidationError{Errors: []string{MsgTTLMinutesInvalid}}
	}
	return c.TTLMinutes, nil
}

// --- parsing ---

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

// ParseConfig parses an environment config leniently (docs/behavior.md#config-parsing): unknown keys
// are ignored, numbers may arrive as JSON numbers or strings and are coerced
// with JavaScript's Number() semantics, booleans count only when literally
// true. raw may be json.RawMessage, []byte or string (JSON text),
// map[string]any, nil (an empty config) or any value encoding/json marshals
// to an object.
//
// The only error is a *ValidationError for input that is not a JSON object.
// Field values never fail parsing; use Validate for that.
func ParseConfig(raw any) (Config, error) {
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
	v, err := decodeJSONValue(data)
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
	return jsTrim(s)
}

// numberOrDefault: Number(raw ?? def), truncated when finite, def otherwise.
func numberOrDefault(m map[string]any, key string, def float64) float64 {
	v, present := m[key]
	if !present || v == nil {
		return def
	}
	n := jsToNumber(v)
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
	n := jsToNumber(v)
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
	n := jsToNumber(v)
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
	n := jsToNumber(v)
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

// --- validation ---

// Validate checks a config as submitted to environmentValidateConfig and
// returns the errors in the exact order and wording of docs/behavior.md#validation, followed by the
// seed-only ttlMinutes check (docs/behavior.md#ttl; appended last so that every reference
// case keeps its exact error list). It returns nil for a valid config.
//
// It performs no I/O. The API key may come from the config's apiKey — which
// during validation holds a pasted key or a secret id (IsSecretID); either
// counts as present and neither is used — or from a non-blank
// DAYTONA_API_KEY read through env.
func Validate(raw any, env EnvLookup) []string {
	m, err := configObject(raw)
	if err != nil {
		return []string{MsgConfigNotObject}
	}
	return validateFields(m, parseFields(m), env)
}

func validateFields(m map[string]any, f fields, env EnvLookup) []string {
	var errs []string
	if s, ok := m["image"].(string); ok && jsTrim(s) == "" {
		errs = append(errs, MsgImageEmpty)
	}
	if s, ok := m["snapshot"].(string); ok && jsTrim(s) == "" {
		errs = append(errs, MsgSnapshotEmpty)
	}
	if f.image != "" && f.snapshot != "" {
		errs = append(errs, MsgImageAndSnapshot)
	}
	if f.apiURL != "" && !isAbsoluteURL(f.apiURL) {
		errs = append(errs, MsgAPIURLInvalid)
	}
	if f.timeoutMs < 1 || f.timeoutMs > MaxTimeoutMs {
		errs = append(errs, MsgTimeoutRange)
	}
	if f.livenessTimeoutMs > MaxTimeoutMs {
		errs = append(errs, MsgLivenessTimeoutMax)
	}
	if f.autoStop < 0 {
		errs = append(errs, MsgAutoStopNegative)
	}
	if f.autoArchive < 0 {
		errs = append(errs, MsgAutoArchiveNegative)
	}
	if f.autoDelete < -1 {
		errs = append(errs, MsgAutoDeleteBelowMinus1)
	}
	if f.apiKey == "" && jsTrim(env.get(EnvAPIKey)) == "" {
		errs = append(errs, MsgAPIKeyRequired)
	}
	if (f.cpu != nil || f.memory != nil || f.disk != nil || f.gpu != nil) && f.image == "" {
		errs = append(errs, MsgResourcesRequireImage)
	}
	for _, r := range []struct {
		v   *float64
		msg string
	}{{f.cpu, MsgCPUNotPositive}, {f.memory, MsgMemoryNotPositive}, {f.disk, MsgDiskNotPositive}, {f.gpu, MsgGPUNotPositive}} {
		if r.v != nil && *r.v <= 0 {
			errs = append(errs, r.msg)
		}
	}
	if f.ttlInvalid {
		errs = append(errs, MsgTTLMinutesInvalid)
	}
	return errs
}

// ValidateConfig is Validate followed by Normalize: the whole of
// environmentValidateConfig. It returns the normalizedConfig to echo, or a
// *ValidationError holding every message.
func ValidateConfig(raw any, env EnvLookup) (NormalizedConfig, error) {
	m, err := configObject(raw)
	if err != nil {
		return NormalizedConfig{}, err
	}
	f := parseFields(m)
	if errs := validateFields(m, f, env); len(errs) > 0 {
		return NormalizedConfig{}, &ValidationError{Errors: errs}
	}
	return Normalize(f.config()), nil
}

// specialSchemes are the WHATWG URL "special" schemes, which need a host.
var specialSchemes = map[string]bool{"http": true, "https": true, "ws": true, "wss": true, "ftp": true}

// isAbsoluteURL approximates `new URL(s)` succeeding (the reference's check):
// an absolute URL with a scheme; special schemes need a non-empty host and a
// port in range. It is stricter than WHATWG for ASCII control characters
// (rejected here, silently stripped by browsers) and for a few exotic host
// spellings; it never accepts a relative reference.
func isAbsoluteURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return false
	}
	scheme := strings.ToLower(u.Scheme)
	if !specialSchemes[scheme] {
		return true
	}
	if u.Host == "" {
		// "https:example.com" and "https:///example.com" still name a host
		// for WHATWG; "https://" and "https:" do not.
		rest := strings.TrimLeft(s[len(u.Scheme)+1:], `/\`)
		if rest == "" || rest[0] == '?' || rest[0] == '#' || rest[0] == ':' || rest[0] == '@' {
			return false
		}
		return true
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n > 65535 {
			return false
		}
	}
	host := u.Hostname()
	if host == "" {
		return false
	}
	if strings.HasPrefix(u.Host, "[") {
		return true // IPv6 literal, already checked by url.Parse
	}
	// WHATWG forbidden domain code points that url.Parse lets through.
	return !strings.ContainsFunc(host, func(r rune) bool {
		return r <= 0x20 || r == 0x7f || strings.ContainsRune(`#%/:<>?@[\]^|`, r)
	})
}

// IsSecretID reports whether s is shaped like a host secret id (a UUID,
// 8-4-4-4-12 hex digits, either case). During validation such an apiKey is a
// reference to a company secret, not a key (docs/host.md#config).
func IsSecretID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
				return false
			}
		}
	}
	return true
}

// MemoryChoices are the sandbox sizes (GiB) the manifest offers for memory
// (docs/behavior.md#config-schema, tests 192–194). The reference validator does not enforce them — it
// only rejects values <= 0 — so Warnings reports other values instead of
// rejecting configs the TypeScript plugin accepted.
var MemoryChoices = []float64{1, 2, 4, 8}

// Warnings returns advisory, non-blocking remarks about a parsed config for
// the validate result's warnings list. Currently: memory outside
// MemoryChoices.
func Warnings(c Config) []string {
	var w []string
	if c.Memory != nil && *c.Memory > 0 {
		known := false
		for _, m := range MemoryChoices {
			if *c.Memory == m {
				known = true
			}
		}
		if !known {
			w = append(w, "memory "+jsNumberToString(*c.Memory)+" is not one of the offered Daytona sandbox sizes (1, 2, 4 or 8 GiB); Daytona may reject it at creation.")
		}
	}
	return w
}

// --- normalization ---

// NormalizedConfig is the normalizedConfig of environmentValidateConfig
// (docs/behavior.md#validation): the 17 keys of the reference, nulls included, in the reference's key
// order, plus ttlMinutes when set. Host-owned keys (runnerLifecycleMode,
// runnerIdleTimeoutMs, warmRunnerIdleTimeoutMs, streamRunLogs) are not
// echoed; timeoutMs, reuseLease and archiveOnRelease are, because the host
// does not re-apply them (docs/host.md#config).
//
// Its JSON encoding includes apiKey, as the reference's does: the host turns
// it into a company secret. It is the one type here that carries the key to
// the wire; fmt and slog output of it are redacted.
type NormalizedConfig struct {
	APIKey              *string  `json:"apiKey"`
	APIURL              *string  `json:"apiUrl"`
	Target              *string  `json:"target"`
	Snapshot            *string  `json:"snapshot"`
	Image               *string  `json:"image"`
	Language            *string  `json:"language"`
	TimeoutMs           int64    `json:"timeoutMs"`
	LivenessTimeoutMs   int64    `json:"livenessTimeoutMs"`
	CPU                 *float64 `json:"cpu"`
	Memory              *float64 `json:"memory"`
	Disk                *float64 `json:"disk"`
	GPU                 *float64 `json:"gpu"`
	AutoStopInterval    int64    `json:"autoStopInterval"`
	AutoArchiveInterval int64    `json:"autoArchiveInterval"`
	AutoDeleteInterval  int64    `json:"autoDeleteInterval"`
	ReuseLease          bool     `json:"reuseLease"`
	ArchiveOnRelease    bool     `json:"archiveOnRelease"`
	TTLMinutes          *int64   `json:"ttlMinutes,omitempty"`
}

// Normalize returns the normalizedConfig for c (defaults filled in). Call it
// on a config that passed Validate; ValidateConfig does both.
func Normalize(c Config) NormalizedConfig {
	n := NormalizedConfig{
		APIKey:              strPtr(c.APIKey()),
		APIURL:              strPtr(c.APIURL),
		Target:              strPtr(c.Target),
		Snapshot:            strPtr(c.Snapshot),
		Image:               strPtr(c.Image),
		Language:            strPtr(c.Language),
		TimeoutMs:           c.TimeoutMs,
		LivenessTimeoutMs:   c.LivenessTimeoutMs,
		CPU:                 floatPtr(c.CPU),
		Memory:              floatPtr(c.Memory),
		Disk:                floatPtr(c.Disk),
		GPU:                 floatPtr(c.GPU),
		AutoStopInterval:    c.AutoStopInterval,
		AutoArchiveInterval: c.AutoArchiveInterval,
		AutoDeleteInterval:  c.AutoDeleteInterval,
		ReuseLease:          c.ReuseLease,
		ArchiveOnRelease:    c.ArchiveOnRelease,
	}
	if c.TTLMinutes > 0 && !c.ttlInvalid {
		t := c.TTLMinutes
		n.TTLMinutes = &t
	}
	return n
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// floatPtr copies, so a NormalizedConfig never aliases the Config's values.
// -0 becomes 0 to match JSON.stringify.
func floatPtr(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := *p
	if v == 0 {
		v = 0
	}
	return &v
}

// AsMap returns the normalized config as a JSON-ready map (nil for null).
// It contains the API key: use it for the wire only, never for logs.
func (n NormalizedConfig) AsMap() map[string]any {
	m := map[string]any{
		"apiKey":              ptrAny(n.APIKey),
		"apiUrl":              ptrAny(n.APIURL),
		"target":              ptrAny(n.Target),
		"snapshot":            ptrAny(n.Snapshot),
		"image":               ptrAny(n.Image),
		"language":            ptrAny(n.Language),
		"timeoutMs":           n.TimeoutMs,
		"livenessTimeoutMs":   n.LivenessTimeoutMs,
		"cpu":                 ptrAny(n.CPU),
		"memory":              ptrAny(n.Memory),
		"disk":                ptrAny(n.Disk),
		"gpu":                 ptrAny(n.GPU),
		"autoStopInterval":    n.AutoStopInterval,
		"autoArchiveInterval": n.AutoArchiveInterval,
		"autoDeleteInterval":  n.AutoDeleteInterval,
		"reuseLease":          n.ReuseLease,
		"archiveOnRelease":    n.ArchiveOnRelease,
	}
	if n.TTLMinutes != nil {
		m["ttlMinutes"] = *n.TTLMinutes
	}
	return m
}

func ptrAny[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// LeaseConfigMetadata returns the config-derived keys of the lease metadata
// (docs/behavior.md#acquire): image and snapshot (null when unset), timeoutMs, reuseLease, each
// resource only when configured (test 51), and archiveOnRelease only when
// true (release rebuilds its config from the metadata). The values equal the
// normalized config's, so they JSON-equal the saved config the host compares
// them with for reuse matching (docs/host.md#lease). target is not included:
// metadata records the sandbox's actual target. Nothing host-owned and
// nothing secret is included. Each call returns a new map.
func LeaseConfigMetadata(c Config) map[string]any {
	n := Normalize(c)
	m := map[string]any{
		"image":      ptrAny(n.Image),
		"snapshot":   ptrAny(n.Snapshot),
		"timeoutMs":  n.TimeoutMs,
		"reuseLease": n.ReuseLease,
	}
	for key, v := range map[string]*float64{"cpu": n.CPU, "memory": n.Memory, "disk": n.Disk, "gpu": n.GPU} {
		if v != nil {
			m[key] = *v
		}
	}
	if n.ArchiveOnRelease {
		m["archiveOnRelease"] = true
	}
	return m
}

// --- redaction ---

// RedactedPlaceholder is the placeholder shown instead of the API key.
const RedactedPlaceholder = "[REDACTED]"

// Redacted returns a log-safe view of c: the normalized keys with apiKey
// replaced by "[REDACTED]" (or null when no key is configured), plus the
// host-owned warm-runner keys and ttlMinutes when present. Safe for logs,
// errors and json.Marshal.
func (c Config) Redacted() map[string]any {
	m := Normalize(c).redactedMap()
	if c.RunnerLifecycleMode != "" {
		m["runnerLifecycleMode"] = c.RunnerLifecycleMode
	}
	if c.RunnerIdleTimeoutMs > 0 {
		m["runnerIdleTimeoutMs"] = c.RunnerIdleTimeoutMs
	}
	if c.WarmRunnerIdleTimeoutMs > 0 {
		m["warmRunnerIdleTimeoutMs"] = c.WarmRunnerIdleTimeoutMs
	}
	if c.ttlInvalid {
		m["ttlMinutes"] = "invalid"
	}
	return m
}

func (n NormalizedConfig) redactedMap() map[string]any {
	m := n.AsMap()
	if n.APIKey != nil {
		m["apiKey"] = RedactedPlaceholder
	}
	return m
}

// String renders the redacted view as canonical JSON.
func (c Config) String() string { return "provider.Config" + stableText(c.Redacted()) }

// GoString is used by %#v; it is redacted like String.
func (c Config) GoString() string { return c.String() }

// Format makes every fmt verb (%v, %+v, %#v, %s, %q, %d, %x, ...) print the
// redacted view; without it, verbs such as %d would print the raw fields.
func (c Config) Format(s fmt.State, verb rune) { formatRedacted(s, verb, c.String()) }

// LogValue makes slog log the redacted view.
func (c Config) LogValue() slog.Value { return redactedLogValue(c.Redacted()) }

// MarshalJSON encodes the redacted view: a Config is never sent to the host
// (NormalizedConfig is), so any JSON of it is for logs and diagnostics.
func (c Config) MarshalJSON() ([]byte, error) { return StableStringify(c.Redacted()) }

// String renders the normalized config with apiKey redacted.
func (n NormalizedConfig) String() string {
	return "provider.NormalizedConfig" + stableText(n.redactedMap())
}

// GoString is used by %#v; it is redacted like String.
func (n NormalizedConfig) GoString() string { return n.String() }

// Format makes every fmt verb print the redacted view.
func (n NormalizedConfig) Format(s fmt.State, verb rune) { formatRedacted(s, verb, n.String()) }

// LogValue makes slog log the redacted view.
func (n NormalizedConfig) LogValue() slog.Value { return redactedLogValue(n.redactedMap()) }

func stableText(m map[string]any) string {
	b, err := StableStringify(m)
	if err != nil {
		return "{}"
	}
	return string(b)
}

func formatRedacted(s fmt.State, verb rune, text string) {
	if verb == 'q' {
		text = strconv.Quote(text)
	}
	_, _ = s.Write([]byte(text))
}

func redactedLogValue(m map[string]any) slog.Value {
	keys := sortedKeysUTF16(m)
	attrs := make([]slog.Attr, 0, len(keys))
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, m[k]))
	}
	return slog.GroupValue(attrs...)
}

// --- runtime rules ---

// Resources is the resources object of an image-based create request (docs/behavior.md#runtime-resources).
// Unset members are omitted.
type Resources struct {
	CPU    *float64 `json:"cpu,omitempty"`
	Memory *float64 `json:"memory,omitempty"`
	Disk   *float64 `json:"disk,omitempty"`
	GPU    *float64 `json:"gpu,omitempty"`
}

// CreateSource is what a create request starts from: an image (with
// resources) or a snapshot (possibly "" for Daytona's default snapshot),
// never both.
type CreateSource struct {
	Image     string     // non-empty for image-based creation
	Snapshot  string     // used only when Image is ""; "" = Daytona default
	Resources *Resources // non-nil only for image-based creation with resources configured
}

// RuntimeCreateSource applies the runtime resource rule of docs/behavior.md#runtime-resources (different
// from validation): resources with neither image nor snapshot fail with
// ErrResourcesRequireImage before any provider call; with a snapshot they are
// silently dropped (a snapshot fixes its own size); with an image they are
// passed along. When both image and snapshot are set (an unvalidated config)
// the image wins, as in the reference.
func RuntimeCreateSource(c Config) (CreateSource, error) {
	if c.Image != "" {
		src := CreateSource{Image: c.Image}
		if c.HasResources() {
			src.Resources = &Resources{CPU: floatPtr(c.CPU), Memory: floatPtr(c.Memory), Disk: floatPtr(c.Disk), GPU: floatPtr(c.GPU)}
		}
		return src, nil
	}
	if c.Snapshot == "" && c.HasResources() {
		return CreateSource{}, ErrResourcesRequireImage
	}
	return CreateSource{Snapshot: c.Snapshot}, nil
}

// ToTimeoutSeconds converts milliseconds to the whole seconds every Daytona
// timeout argument takes: max(1, ceil(ms / 1000)) (docs/behavior.md#small-functions).
func ToTimeoutSeconds(ms int64) int64 {
	ms = min(ms, clamp.MaxMillis) // an unvalidated config must not send absurd seconds
	if ms <= 1000 {
		return 1
	}
	return (ms + 999) / 1000
}

// ResolveTimeoutMs returns the timeout of one call (docs/behavior.md#small-functions): a finite positive
// per-call timeout (truncated, at least 1 ms) wins, else the config's
// timeoutMs. param is nil when the call carries none.
func ResolveTimeoutMs(param *float64, c Config) int64 {
	if param != nil {
		p := *param
		if !math.IsNaN(p) && !math.IsInf(p, 0) && p > 0 {
			return max(1, toInt64(math.Trunc(p)))
		}
	}
	return c.TimeoutMs
}

// WarmIdleWindowMs returns the warm-runner idle window the config selects
// (docs/behavior.md#warm-window), and whether it selects one at all. Exactly two inputs select it:
// the host forwarded warmRunnerIdleTimeoutMs (newer hosts, only for warm
// paperclip_runner runs), or the environment itself sets
// runnerLifecycleMode "warm" (window = runnerIdleTimeoutMs, default 300000).
// "inherit" without a forwarded value, "per_turn" and no mode select none.
func (c Config) WarmIdleWindowMs() (float64, bool) {
	if c.WarmRunnerIdleTimeoutMs > 0 {
		return c.WarmRunnerIdleTimeoutMs, true
	}
	if c.RunnerLifecycleMode == RunnerLifecycleWarm {
		if c.RunnerIdleTimeoutMs > 0 {
			return c.RunnerIdleTimeoutMs, true
		}
		return DefaultRunnerIdleTimeoutMs, true
	}
	return 0, false
}

// WarmAutoStopFloorMinutes is ceil(warmIdleMs / 60000) + 5 (docs/behavior.md#warm-window).
func WarmAutoStopFloorMinutes(warmIdleMs float64) int64 {
	return toInt64(math.Ceil(warmIdleMs/60000)) + WarmAutoStopMarginMinutes
}

// EffectiveAutoStopMinutes returns the auto-stop interval to send at create
// and to raise on resume (docs/behavior.md#warm-window): for a reusable lease that keeps a warm
// runner, max(configured, ceil(warm idle / 1 min) + 5); otherwise the
// configured value. An explicit 0 (auto-stop disabled) is kept, and so is an
// invalid negative value (Daytona rejects it; the floor must not hide it).
//
// warmIdleMs is a warm window the caller received outside the config; pass
// 0 to use the one the config selects (WarmIdleWindowMs). reusable is the
// lease's reuse flag (normally c.ReuseLease). The stale-handle threshold
// (StaleHandleThreshold) deliberately keeps using the configured value.
func EffectiveAutoStopMinutes(c Config, reusable bool, warmIdleMs float64) int64 {
	configured := c.AutoStopInterval
	if !reusable || configured <= 0 {
		return configured
	}
	window := warmIdleMs
	if math.IsNaN(window) || math.IsInf(window, 0) || window <= 0 {
		var ok bool
		if window, ok = c.WarmIdleWindowMs(); !ok {
			return configured
		}
	}
	return max(configured, WarmAutoStopFloorMinutes(window))
}

// ShouldRaiseAutoStop reports whether resume must raise an existing
// sandbox's auto-stop (docs/behavior.md#warm-window, raise on resume): only a shorter, enabled interval is
// raised; 0 on the sandbox already means "never stops".
func ShouldRaiseAutoStop(currentMinutes, effectiveMinutes int64) bool {
	return currentMinutes > 0 && effectiveMinutes > currentMinutes
}

// StaleHandleThreshold returns how long a cached sandbox handle may stay
// unverified before it is refreshed (docs/behavior.md#stale-handle): floor(autoStopInterval × 60000 ×
// 0.5) ms of the configured interval — never the warm-floor effective one —
// and ok=false when auto-stop is disabled (then handles are never refreshed
// for staleness).
func StaleHandleThreshold(c Config) (d time.Duration, ok bool) {
	if c.AutoStopInterval <= 0 {
		return 0, false
	}
	return clamp.Millis(math.Floor(float64(c.AutoStopInterval) * 60000 * 0.5)), true
}
