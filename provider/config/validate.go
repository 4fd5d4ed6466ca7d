package config

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/daytonaworker/daytona-worker/internal/jsvalue"
)

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
	// ErrInvalid matches every *ValidationError with errors.Is.
	ErrInvalid = configError("invalid Daytona sandbox environment config")
)

// ValidationError carries the validation messages of a config, in the order
// of docs/behavior.md#validation. It is the error the RPC layer maps to JSON-RPC -32602 (invalid
// params); Errors[0] is what the host shows. Use errors.As to get it, or
// errors.Is(err, ErrInvalid) to recognise it.
type ValidationError struct {
	Errors []string
}

func (e *ValidationError) Error() string {
	if len(e.Errors) == 0 {
		return string(ErrInvalid)
	}
	return strings.Join(e.Errors, " ")
}

// Is makes errors.Is(err, ErrInvalid) true for any *ValidationError.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Validate checks a config as submitted to environmentValidateConfig and
// returns the errors in the exact order and wording of docs/behavior.md#validation, followed by the
// seed-only ttlMinutes check (docs/behavior.md#ttl; appended last so that every reference
// case keeps its exact error list). It returns nil for a valid config.
//
// It performs no I/O. The API key may come from the config's apiKey — which
// during validation holds a pasted key or the UUID of a host secret; either
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
	if s, ok := m["image"].(string); ok && jsvalue.Trim(s) == "" {
		errs = append(errs, MsgImageEmpty)
	}
	if s, ok := m["snapshot"].(string); ok && jsvalue.Trim(s) == "" {
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
	if f.apiKey == "" && jsvalue.Trim(env.get(EnvAPIKey)) == "" {
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

// ValidateAndNormalize is Validate followed by Normalize: the whole of
// environmentValidateConfig. It returns the normalizedConfig to echo, or a
// *ValidationError holding every message.
func ValidateAndNormalize(raw any, env EnvLookup) (Normalized, error) {
	m, err := configObject(raw)
	if err != nil {
		return Normalized{}, err
	}
	f := parseFields(m)
	if errs := validateFields(m, f, env); len(errs) > 0 {
		return Normalized{}, &ValidationError{Errors: errs}
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
			w = append(w, "memory "+jsvalue.NumberToString(*c.Memory)+" is not one of the offered Daytona sandbox sizes (1, 2, 4 or 8 GiB); Daytona may reject it at creation.")
		}
	}
	return w
}
