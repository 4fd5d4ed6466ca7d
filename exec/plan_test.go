package exec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPlanFor pins each rule of the plan (docs/exec.md#the-plan) at its
// boundary: what a user gets from each path is tested in session_test.go.
func TestPlanFor(t *testing.T) {
	ms := time.Millisecond
	run := func(d time.Duration, printed int64) *lastRun { return &lastRun{run: d, printed: printed} }
	for _, c := range []struct {
		name string
		rtt  time.Duration
		last *lastRun
		want plan
	}{
		{"unknown line, unmeasured network: look at once", 0, nil, plan{firstLook: markMargin}},
		{"unknown line at 40 ms: exec and read", 40 * ms, nil, plan{firstLook: 40 * ms}},
		{"unknown line at 50 ms: the tick costs as much as a round trip", 50 * ms, nil, plan{firstLook: 50 * ms}},
		{"unknown line past 50 ms: synchronous", 51 * ms, nil, plan{sync: true, firstLook: 51 * ms}},
		{"known short line at 100 ms: synchronous", 100 * ms, run(10*ms, 3), plan{sync: true, firstLook: 100 * ms}},
		{"a run that spills into a second tick at 60 ms: not synchronous", 60 * ms, run(50*ms, 3), plan{firstLook: 60 * ms}},
		{"a longer run at 0 ms: looked at when it would end", 0, run(30*ms, 3), plan{firstLook: 30*ms + markMargin}},
		{"a run of exactly liveWithin is still short", 0, run(liveWithin, 3), plan{firstLook: liveWithin + markMargin}},
		{"a run past liveWithin is followed at once", 100 * ms, run(liveWithin+ms, 3), plan{follow: true}},
		{"a short line that printed filesFrom takes the files path", 100 * ms, run(20*ms, filesFrom), plan{files: true, firstLook: 100 * ms}},
		{"one byte less stays in the log", 0, run(20*ms, filesFrom-1), plan{firstLook: 20*ms + markMargin}},
		{"a long line that prints a lot is followed (live)", 0, run(time.Second, 100<<20), plan{follow: true}},
	} {
		assert.Equal(t, c.want, planFor(c.rtt, c.last), c.name)
	}
}

// TestLooksDoubleUntilLiveWithin: each look comes when the time since the
// dispatch has doubled, at least a millisecond after the last, and none
// past liveWithin.
func TestLooksDoubleUntilLiveWithin(t *testing.T) {
	var got []time.Duration
	for at, ok := time.Duration(0), true; ok; at, ok = nextLook(at) {
		got = append(got, at)
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{0, ms, 2 * ms, 4 * ms, 8 * ms, 16 * ms, 32 * ms, 64 * ms, 128 * ms}, got)
	next, ok := nextLook(liveWithin / 2)
	assert.Equal(t, liveWithin, next)
	assert.True(t, ok, "a look at exactly liveWithin is made")
	_, ok = nextLook(liveWithin/2 + 1)
	assert.False(t, ok)
}

// TestHistoryForgetsTheLeastRecentlyUsedLine: a lease remembers at most
// commandHistories lines; reading a line's last run keeps it.
func TestHistoryForgetsTheLeastRecentlyUsedLine(t *testing.T) {
	var h history
	for k := uint64(0); k < commandHistories; k++ {
		h.note(k, time.Duration(k), 0, int64(k))
	}
	assert.NotNil(t, h.last(0), "line 0 used: now the most recent")
	h.note(1000, time.Second, 0, 1)
	assert.Len(t, h.lines, commandHistories)
	assert.NotNil(t, h.last(0))
	assert.Nil(t, h.last(1), "line 1 was the least recently used")
	assert.Equal(t, time.Second, h.last(1000).run)
	h.note(5, 7, 9, 8)
	got := *h.last(5)
	assert.Equal(t, lastRun{run: 7, seen: 9, printed: 8, used: h.uses}, got, "a new run replaces the old")
}
