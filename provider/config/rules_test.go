package config

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

// TestEachResourceAloneCounts: any one of cpu, memory, disk, gpu on its own
// is a resource request: passed along with an image, refused with neither
// image nor snapshot (a dropped member would create a sandbox without the
// GPU the operator asked for, or a default sandbox instead of an error).
func TestEachResourceAloneCounts(t *testing.T) {
	for _, r := range []string{"cpu", "memory", "disk", "gpu"} {
		c := mustParse(t, `{"image":"node:20","`+r+`":1}`)
		assert.True(t, c.HasResources(), "%s alone", r)
		src, err := RuntimeCreateSource(c)
		require.NoError(t, err)
		require.NotNil(t, src.Resources, "%s alone is passed along with the image", r)
		b, _ := json.Marshal(src.Resources)
		assert.JSONEq(t, `{"`+r+`":1}`, string(b))

		_, err = RuntimeCreateSource(mustParse(t, `{"`+r+`":1}`))
		assert.ErrorIs(t, err, ErrResourcesRequireImage, "%s alone without an image", r)

		// Config validation says the same, for each alone.
		assert.Empty(t, Validate(json.RawMessage(`{"apiKey":"k","image":"node:20","`+r+`":1}`), nil), "%s alone with an image", r)
		for _, src := range []string{``, `"snapshot":"snap",`} {
			assert.Equal(t, []string{MsgResourcesRequireImage}, Validate(json.RawMessage(`{"apiKey":"k",`+src+`"`+r+`":1}`), nil),
				"%s alone without an image (%s)", r, src)
		}
	}
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
		{new(1500.7), 1500},
		{new(0.0), 120000},
		{new(-1.0), 120000},
		{new(math.NaN()), 120000},
		{new(math.Inf(1)), 120000},
		{new(0.5), 1},
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
