package config

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every bound the config enforces, at the bound and one past it
// (docs/testing.md, "Limits at the limit"). A bound tested only well under
// and well over lets an off-by-one (< for <=, 65536 for 65535) through.
func TestConfigLimitsAtTheLimit(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		want []string // nil: valid
	}{
		// apiUrl ports: 0 to 65535, as `new URL()` takes them.
		{"port 65535", `{"apiUrl":"https://x.example:65535/api"}`, nil},
		{"port 65536", `{"apiUrl":"https://x.example:65536/api"}`, []string{MsgAPIURLInvalid}},
		{"port 0", `{"apiUrl":"http://127.0.0.1:0"}`, nil},
		{"port 1", `{"apiUrl":"http://127.0.0.1:1"}`, nil},
		// timeoutMs: 1 to MaxTimeoutMs.
		{"timeoutMs 1", `{"timeoutMs":1}`, nil},
		{"timeoutMs 0", `{"timeoutMs":0}`, []string{MsgTimeoutRange}},
		{"timeoutMs max", fmt.Sprintf(`{"timeoutMs":%d}`, MaxTimeoutMs), nil},
		{"timeoutMs max+1", fmt.Sprintf(`{"timeoutMs":%d}`, MaxTimeoutMs+1), []string{MsgTimeoutRange}},
		// livenessTimeoutMs: at most MaxTimeoutMs (<= 0 disables it).
		{"livenessTimeoutMs max", fmt.Sprintf(`{"livenessTimeoutMs":%d}`, MaxTimeoutMs), nil},
		{"livenessTimeoutMs max+1", fmt.Sprintf(`{"livenessTimeoutMs":%d}`, MaxTimeoutMs+1), []string{MsgLivenessTimeoutMax}},
		// Intervals (minutes): auto-stop and auto-archive from 0, auto-delete from -1.
		{"autoStop 0", `{"autoStopInterval":0}`, nil},
		{"autoStop -1", `{"autoStopInterval":-1}`, []string{MsgAutoStopNegative}},
		{"autoArchive 0", `{"autoArchiveInterval":0}`, nil},
		{"autoArchive -1", `{"autoArchiveInterval":-1}`, []string{MsgAutoArchiveNegative}},
		{"autoDelete -1", `{"autoDeleteInterval":-1}`, nil},
		{"autoDelete -2", `{"autoDeleteInterval":-2}`, []string{MsgAutoDeleteBelowMinus1}},
		// Resources: anything above 0.
		{"cpu tiny", `{"image":"i","cpu":1e-9}`, nil},
		{"cpu 0", `{"image":"i","cpu":0}`, []string{MsgCPUNotPositive}},
		{"memory tiny", `{"image":"i","memory":1e-9}`, nil},
		{"memory 0", `{"image":"i","memory":0}`, []string{MsgMemoryNotPositive}},
		{"disk tiny", `{"image":"i","disk":1e-9}`, nil},
		{"disk 0", `{"image":"i","disk":0}`, []string{MsgDiskNotPositive}},
		{"gpu tiny", `{"image":"i","gpu":1e-9}`, nil},
		{"gpu 0", `{"image":"i","gpu":0}`, []string{MsgGPUNotPositive}},
		// ttlMinutes: a whole number from 1 to 2^53-1.
		{"ttl 1", `{"ttlMinutes":1}`, nil},
		{"ttl 0", `{"ttlMinutes":0}`, []string{MsgTTLMinutesInvalid}},
		{"ttl max safe", fmt.Sprintf(`{"ttlMinutes":%d}`, maxSafeInteger), nil},
		{"ttl max safe+1", fmt.Sprintf(`{"ttlMinutes":%d}`, maxSafeInteger+1), []string{MsgTTLMinutesInvalid}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, Validate(json.RawMessage(c.raw), withEnvKey))
		})
	}
}

// The derived bounds, at their edges.
func TestDerivedLimitsAtTheLimit(t *testing.T) {
	// Daytona timeouts are whole seconds, at least 1, rounded up.
	for ms, want := range map[int64]int64{-1: 1, 0: 1, 1: 1, 1000: 1, 1001: 2, 2000: 2, 2001: 3} {
		require.Equal(t, want, ToTimeoutSeconds(ms), "%d ms", ms)
	}
	// A per-call timeout wins when positive, truncated, at least 1 ms.
	c := Default()
	for _, p := range []struct {
		in   float64
		want int64
	}{{0, c.TimeoutMs}, {-1, c.TimeoutMs}, {0.5, 1}, {1, 1}, {1.9, 1}, {2, 2}} {
		require.Equal(t, p.want, ResolveTimeoutMs(&p.in, c), "%v", p.in)
	}
	// The acquire budget: timeoutMs when positive, else the default.
	for ms, want := range map[int64]time.Duration{1: time.Millisecond, 0: DefaultTimeoutMs * time.Millisecond, -1: DefaultTimeoutMs * time.Millisecond} {
		require.Equal(t, want, Config{TimeoutMs: ms}.AcquireBudget(), "%d ms", ms)
	}
	// The liveness bound is on from 1 ms.
	for ms, on := range map[int64]bool{1: true, 0: false, -1: false} {
		_, ok := Config{LivenessTimeoutMs: ms}.LivenessBound()
		require.Equal(t, on, ok, "%d ms", ms)
	}
	// The warm floor: ceil(window / 1 min) + 5, from one minute to the next.
	for ms, want := range map[float64]int64{60000: 6, 60001: 7, 120000: 7} {
		require.Equal(t, want, WarmAutoStopFloorMinutes(ms), "%v ms", ms)
	}
	// Resume raises only an enabled, shorter auto-stop.
	require.False(t, ShouldRaiseAutoStop(10, 10), "equal: not raised")
	require.True(t, ShouldRaiseAutoStop(10, 11))
	require.False(t, ShouldRaiseAutoStop(0, 11), "0 never stops")
	require.True(t, ShouldRaiseAutoStop(1, 2))
	// Stale handles: half the auto-stop interval, off at 0.
	d, ok := StaleHandleThreshold(Config{AutoStopInterval: 1})
	require.True(t, ok)
	require.Equal(t, 30*time.Second, d)
	_, ok = StaleHandleThreshold(Config{AutoStopInterval: 0})
	require.False(t, ok)
	// The effective auto-stop keeps 0 (disabled) and raises only up to the floor.
	warm := Config{AutoStopInterval: 6, RunnerLifecycleMode: RunnerLifecycleWarm, RunnerIdleTimeoutMs: 60000}
	require.EqualValues(t, 6, EffectiveAutoStopMinutes(warm, true, 0), "configured equals the floor")
	warm.AutoStopInterval = 5
	require.EqualValues(t, 6, EffectiveAutoStopMinutes(warm, true, 0), "one under the floor is raised")
	warm.AutoStopInterval = 0
	require.EqualValues(t, 0, EffectiveAutoStopMinutes(warm, true, 0), "disabled stays disabled")
}
