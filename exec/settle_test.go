package exec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestCommandLineWithoutRunTimesIsTimedByTheLease: a command line the
// lease knows only from what a one-shot run kept (a history with no run
// times) has its first read timed from the lease's runs, as a new command
// line's is, not left untimed for want of its own.
func TestCommandLineWithoutRunTimesIsTimedByTheLease(t *testing.T) {
	var r runTimes
	for range runTimeSamples {
		r.add(20 * time.Millisecond)
	}
	const key = 7
	lease, _ := r.settleCommand(key)
	assert.Positive(t, lease, "the lease's runs time a new command line")
	r.command(key).kept = [2]int{1 << 20, 0}
	got, _ := r.settleCommand(key)
	assert.Equal(t, lease, got)
	_, _, ok := r.bulkRuns(key)
	assert.False(t, ok, "no runs of its own to watch a bulk command by")
}
