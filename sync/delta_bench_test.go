package sync

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
)

// BenchmarkDeltaSyncIn re-syncs a 200 MiB tree of 5,000 files in which one
// file changed, the full way and as a delta, in the same run, at 0 and
// 40 ms per request (daytonatest.WithLatency). Bytes are counted on the
// wire by the emulator (request and reply bodies of every request of the
// sync, daytonatest.Request.BodyBytes/ReplyBytes), not taken from the
// worker's report. Reported: wire-ratio and time-ratio (delta/full),
// cold-time-ratio (a delta whose host hash record was emptied first: every
// host file is read and hashed), and the bytes and times of each. Command and results: docs/sync.md#delta.
func BenchmarkDeltaSyncIn(b *testing.B) {
	for _, lat := range []time.Duration{0, 40 * time.Millisecond} {
		b.Run(fmt.Sprintf("latency=%s", lat), func(b *testing.B) {
			e := newEnv(b, daytonatest.WithLatency(lat))
			host := filepath.Join(b.TempDir(), "src")
			const files, size = 5_000, (200 << 20) / 5_000
			makeTree(b, host, files, size)
			m := dirMapping(host, e.root+"/bench")
			_, err := e.syncIn(b, Options{Delta: DeltaOff}, m)
			require.NoError(b, err)
			block := make([]byte, size)
			change := func(i int) { // new content, same size, a new mtime
				for k := range block {
					block[k] = byte(i + k)
				}
				p := filepath.Join(host, fmt.Sprintf("d%03d", i%100), fmt.Sprintf("f%06d", i))
				require.NoError(b, os.WriteFile(p, block, 0o644))
				require.NoError(b, os.Chtimes(p, time.Now(), time.Now().Add(time.Duration(i)*time.Second)))
			}
			run := func(o Options) (time.Duration, int64) {
				e.srv.ResetRequests()
				start := time.Now()
				res, err := e.syncIn(b, o, m)
				d := time.Since(start)
				require.NoError(b, err)
				require.Len(b, res[0].Directories, 1)
				body, reply := e.srv.WireBytes()
				return d, body + reply
			}
			// A delta sync before the timed runs fills the worker's host
			// hash record, as the runs before it would have in a
			// long-running worker; the cold runs empty it first.
			change(999)
			run(Options{})
			var fullT, deltaT, coldT time.Duration
			var fullW, deltaW int64
			i := 0
			for b.Loop() {
				i++
				change(i)
				t, w := run(Options{Delta: DeltaOff})
				fullT, fullW = fullT+t, fullW+w
				change(i + 1000)
				t, w = run(Options{})
				deltaT, deltaW = deltaT+t, deltaW+w
				change(i + 2000)
				hostHashes.mu.Lock()
				clear(hostHashes.m)
				hostHashes.mu.Unlock()
				t, _ = run(Options{})
				coldT += t
			}
			b.ReportMetric(float64(deltaW)/float64(fullW), "wire-ratio")
			b.ReportMetric(float64(deltaT)/float64(fullT), "time-ratio")
			b.ReportMetric(float64(coldT)/float64(fullT), "cold-time-ratio")
			b.ReportMetric(float64(fullW)/float64(i)/(1<<20), "full-wire-MiB")
			b.ReportMetric(float64(deltaW)/float64(i)/(1<<10), "delta-wire-KiB")
			b.ReportMetric(float64(fullT.Milliseconds())/float64(i), "full-ms")
			b.ReportMetric(float64(deltaT.Milliseconds())/float64(i), "delta-ms")
		})
	}
}
