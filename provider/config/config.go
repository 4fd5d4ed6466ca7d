// Package config is the configuration language of a Daytona sandbox
// environment: Parse reads a host-supplied config leniently, with the
// JavaScript coercions of the TypeScript plugin (the host rebuilds configs
// for later calls from lease metadata, so the worker must read them exactly
// as that plugin did); Validate and ValidateAndNormalize give the reference
// error messages in the reference order; Normalize gives the normalizedConfig
// the host saves; the runtime rules (RuntimeCreateSource, ResolveTimeoutMs,
// EffectiveAutoStopMinutes, StaleHandleThreshold, AccountFingerprint) turn a
// Config into what a provider call needs. Package provider is its user. A
// Config never shows its API key through fmt, slog or encoding/json (see
// redact.go for how, and why Config has no formatting methods).
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/daytonaworker/daytona-worker/internal/clamp"
	"github.com/daytonaworker/daytona-worker/internal/jsvalue"
)

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

// Config is a parsed Daytona environment config. The zero value is not
// useful; get one from Parse or Default.
//
// Empty strings mean "not configured" (the reference's null). The API key is
// not a field: read it with APIKey or ResolveAPIKey.
type Config struct {
	apiKey *secret // nil = no key configured

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

	// TTLMinutes is the seed-only wall-clock lifetime (docs/behavior.md#ttl); 0 = not set. A present
	// but invalid value leaves it 0; CreationTTLMinutes reports it.
	TTLMinutes int64
	ttlInvalid bool

	// Host-owned keys (docs/behavior.md#warm-window, docs/host.md#config,
	// docs/host.md#host-config-keys). They are read because they select the warm auto-stop
	// floor, and never echoed by Normalize: the host re-applies them itself.
	RunnerLifecycleMode string  // "", "inherit", "per_turn" or "warm"
	RunnerIdleTimeoutMs float64 // 0 = absent
	// WarmRunnerIdleTimeoutMs is forwarded by hosts of the newer contract for
	// warm paperclip_runner runs only; 0 = absent.
	WarmRunnerIdleTimeoutMs float64
}

// Default returns the config an empty object parses to.
func Default() Config {
	return Config{
		TimeoutMs:           DefaultTimeoutMs,
		LivenessTimeoutMs:   DefaultLivenessTimeoutMs,
		AutoStopInterval:    DefaultAutoStopInterval,
		AutoArchiveInterval: DefaultAutoArchiveInterval,
		AutoDeleteInterval:  DefaultAutoDeleteInterval,
	}
}

// APIKey returns the trimmed apiKey from the config, or "" when it has none.
// During environmentValidateConfig this may be the id of a host secret (a
// UUID, docs/host.md#config); in every other call the host has resolved it to the key.
func (c Config) APIKey() string { return c.apiKey.reveal() }

// ResolveAPIKey returns the key to authenticate with: the config's apiKey,
// else the trimmed DAYTONA_API_KEY from env, else ErrMissingAPIKey
// (docs/behavior.md#api-key).
func ResolveAPIKey(c Config, env EnvLookup) (string, error) {
	if k := c.APIKey(); k != "" {
		return k, nil
	}
	if k := jsvalue.Trim(env.get(EnvAPIKey)); k != "" {
		return k, nil
	}
	return "", ErrMissingAPIKey
}

// AccountFingerprint returns the account identity of a config: the
// lowercase hex sha256 of the canonical JSON
// { apiKey: <resolved key or null>, apiUrl: <apiUrl or null> }, as the
// TypeScript plugin computes it (docs/behavior.md#envelope). An empty apiKey or apiURL counts as null.
// It is the account part of every cache and scope key and the cleanup
// envelope's accountFingerprint; the secret itself never leaves this
// function, only the digest does. target is deliberately not part of the
// identity: lease metadata later fills in the actual region.
func AccountFingerprint(apiKey, apiURL string) string {
	identity := map[string]any{"apiKey": nil, "apiUrl": nil}
	if apiKey != "" {
		identity["apiKey"] = apiKey
	}
	if apiURL != "" {
		identity["apiUrl"] = apiURL
	}
	// Strings and nil always stringify; the error is impossible here.
	canonical, _ := jsvalue.StableStringify(identity)
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// Timeout is TimeoutMs as a duration, clamped to one day: absurd
// unvalidated values must neither overflow nor outlive any real use.
func (c Config) Timeout() time.Duration { return clamp.Millis(float64(c.TimeoutMs)) }

// AcquireBudget is the single fresh-acquisition budget of
// docs/behavior.md#acquire: timeoutMs when
// positive, else 300000 ms.
func (c Config) AcquireBudget() time.Duration {
	if c.TimeoutMs > 0 {
		return c.Timeout()
	}
	return DefaultTimeoutMs * time.Millisecond
}

// LivenessBound returns the per-call bound on liveness reads
// (docs/behavior.md#liveness-bound); ok is false
// when livenessTimeoutMs <= 0 disables it.
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
// create request (docs/behavior.md#ttl): 0 when none is configured, or a *ValidationError when the
// config carries an invalid ttlMinutes (validation rejects it at save time;
// a config that skipped validation must not silently lose the lifetime the
// operator asked for).
func (c Config) CreationTTLMinutes() (int64, error) {
	if c.ttlInvalid {
		return 0, &ValidationError{Errors: []string{MsgTTLMinutesInvalid}}
	}
	return c.TTLMinutes, nil
}
