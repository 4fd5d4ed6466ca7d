package config

import (
	"math"
	"time"

	"github.com/daytonaworker/daytona-worker/internal/clamp"
)

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
			n := Normalize(c) // copies, -0 as 0
			src.Resources = &Resources{CPU: n.CPU, Memory: n.Memory, Disk: n.Disk, GPU: n.GPU}
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
