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
	bulk := func(d time.Duration, printed, lines int64) *lastRun {
		return &lastRun{run: d, printed: printed, lines: lines}
	}
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
		{"a line held back by the labeler takes the files path", 100 * ms, bulk(20*ms, filesFrom, 0), plan{files: true, firstLook: 100 * ms}},
		{"one byte less stays in the log", 0, bulk(20*ms, filesFrom-1, 0), plan{firstLook: 20*ms + markMargin}},
		{"the labeler not half the run: the log", 0, bulk(60*ms, filesFrom, 0), plan{firstLook: 60*ms + markMargin}},
		{"even a long run, when the labeler was half of it", 0, bulk(2*time.Second, 8<<20, 0), plan{files: true, firstLook: 2*time.Second + markMargin}},
		{"its lines count: 100,000 short lines", 0, bulk(700*ms, 700<<10, 100_000), plan{files: true, firstLook: 700*ms + markMargin}},
		{"a line the log garbled takes the files path", 0, &lastRun{run: 10 * ms, printed: 26, garbled: true}, plan{files: true, firstLook: 10*ms + markMargin}},
		{"a long line not held back by the labeler is followed (live)", 0, bulk(time.Minute, 50<<20, 500_000), plan{follow: true}},
	} {
		assert.Equal(t, c.want, planFor(c.rtt, c.last), c.name)
	}
}

// TestLooksComeAQuarterLater: each look comes a quarter later than the
// last (at least a millisecond), and none past liveWithin.
func TestLooksComeAQuarterLater(t *testing.T) {
	var got []time.Duration
	for at, ok := time.Duration(0), true; ok; at, ok = nextLook(at) {
		got = append(got, at)
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{0, ms, 2 * ms, 3 * ms, 4 * ms, 5 * ms}, got[:6], "a millisecond apart at first")
	assert.Len(t, got, 23)
	for i := 5; i < len(got); i++ {
		assert.Equal(t, got[i-1]+got[i-1]/4, got[i], "a quarter later")
	}
	next, ok := nextLook(liveWithin * 4 / 5)
	assert.Equal(t, liveWithin, next)
	assert.True(t, ok, "a look at exactly liveWithin is made")
	_, ok = nextLook(liveWithin*4/5 + 4)
	assert.False(t, ok)
}

// TestHistoryForgetsTheLeastRecentlyUsedLine: a lease remembers at most
// commandHistories lines; reading a line's last run keeps it.
func TestHistoryForgetsTheLeastRecentlyUsedLine(t *testing.T) {
	var h history
	for k := uint64(0); k < commandHistories; k++ {
		h.note(k, time.Duration(k), 0, int64(k), 0, false)
	}
	assert.NotNil(t, h.last(0), "line 0 used: now the most recent")
	h.note(1000, time.Second, 0, 1, 0, false)
	assert.Len(t, h.lines, commandHistories)
	assert.NotNil(t, h.last(0))
	assert.Nil(t, h.last(1), "line 1 was the least recently used")
	assert.Equal(t, time.Second, h.last(1000).run)
	h.note(5, 7, 9, 8, 2, true)
	got := *h.last(5)
	assert.Equal(t, lastRun{run: 7, seen: 9, printed: 8, lines: 2, garbled: true, used: h.uses}, got, "a new run replaces the old")
}
