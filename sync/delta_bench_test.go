package sync

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/span/spantest"
)

// deltaBench is one direction of the delta benchmarks: a 200 MiB tree of
// 5,000 files (100 directories), re-synced after some files changed, the
// full way (DeltaOff) and as a delta, in the same run.
type deltaBench struct {
	e    *env
	sync func(ctx context.Context, o Options) ([]OperationResult, error)
	// change rewrites the i-th changed file of a run on the side the
	// sync reads: new content, same size, a new mtime.
	change func(i int)
	// changes per run: 1 inbound, 10 outbound (the bars).
	changes int
	n       int // change counter, so every run changes other content
	phases  map[string]time.Duration
}

// run changes b.changes files, syncs with o and returns the time and the
// bytes on the wire: the request and reply bodies of every request of
// the sync, counted by the emulator (daytonatest.Request.BodyBytes and
// ReplyBytes), not taken from the worker's report. With phases set, the
// delta's span times are summed into d.phases.
func (d *deltaBench) run(b *testing.B, o Options, phases bool) (time.Duration, int64) {
	for range d.changes {
		d.n++
		d.change(d.n)
	}
	ctx, rec := spantest.New(b.Context())
	d.e.srv.ResetRequests()
	start := time.Now()
	res, err := d.sync(ctx, o)
	took := time.Since(start)
	require.NoError(b, err)
	require.Len(b, res[0].Directories, 1)
	if o.Delta != DeltaOff {
		require.Equal(b, WayDelta, res[0].Directories[0].Way, res[0].Directories[0].Reason)
	}
	if phases {
		for _, r := range rec.Records() {
			d.phases[r.Name] += time.Duration(r.EndTimeMs-r.StartTimeMs) * time.Millisecond
		}
	}
	body, reply := d.e.srv.WireBytes()
	return took, body + reply
}

// report runs the timed loop: per iteration a full sync, a delta that
// follows it (cold: the full sync rewrote every file, so the host hash
// record knows none of them), and a delta that follows a delta (the
// steady state of a long-running worker, and the time-ratio).
func (d *deltaBench) report(b *testing.B) {
	d.phases = map[string]time.Duration{}
	// The runs follow each other within seconds; in service a lease's
	// syncs are a run apart. Files written a moment ago are never
	// recorded (delta_record.go), so here every ctime counts as settled,
	// as it would be by the next sync.
	settled := Options{settle: -time.Hour}
	var fullT, deltaT, coldT time.Duration
	var fullW, deltaW int64
	i := 0
	for b.Loop() {
		i++
		t, w := d.run(b, Options{Delta: DeltaOff}, false)
		fullT, fullW = fullT+t, fullW+w
		t, _ = d.run(b, settled, false)
		coldT += t
		t, w = d.run(b, settled, true)
		deltaT, deltaW = deltaT+t, deltaW+w
	}
	b.ReportMetric(float64(deltaW)/float64(fullW), "wire-ratio")
	b.ReportMetric(float64(deltaT)/float64(fullT), "time-ratio")
	b.ReportMetric(float64(coldT)/float64(fullT), "cold-time-ratio")
	b.ReportMetric(float64(fullW)/float64(i)/(1<<20), "full-wire-MiB")
	b.ReportMetric(float64(deltaW)/float64(i)/(1<<10), "delta-wire-KiB")
	b.ReportMetric(float64(fullT.Milliseconds())/float64(i), "full-ms")
	b.ReportMetric(float64(deltaT.Milliseconds())/float64(i), "delta-ms")
	for name, t := range d.phases {
		b.ReportMetric(float64(t.Milliseconds())/float64(i), "delta-"+name+"-ms")
	}
}

const benchFiles, benchSize = 5_000, (200 << 20) / 5_000

// rewrite gives the file p new content of benchSize bytes and an mtime
// of its own.
func rewrite(b *testing.B, p string, i int) {
	block := make([]byte, benchSize)
	for k := range block {
		block[k] = byte(i + k)
	}
	require.NoError(b, os.WriteFile(p, block, 0o644))
	require.NoError(b, os.Chtimes(p, time.Now(), time.Now().Add(time.Duration(i)*time.Second)))
}

func benchFile(root string, i int) string {
	i %= benchFiles
	return filepath.Join(root, fmt.Sprintf("d%03d", i%100), fmt.Sprintf("f%06d", i))
}

// BenchmarkDeltaSyncIn re-syncs a 200 MiB tree of 5,000 files in which one
// host file changed, at 0 and 40 ms per request
// (daytonatest.WithLatency). Reported: wire-ratio and time-ratio
// (delta/full), cold-time-ratio, the bytes and times of each, and the
// delta's time per span (list, compare, pack, transfer, extractTarball).
// Command and results: docs/sync.md#delta.
func BenchmarkDeltaSyncIn(b *testing.B) {
	for _, lat := range []time.Duration{0, 40 * time.Millisecond} {
		b.Run(fmt.Sprintf("latency=%s", lat), func(b *testing.B) {
			e := newEnv(b, daytonatest.WithLatency(lat))
			host := filepath.Join(b.TempDir(), "src")
			makeTree(b, host, benchFiles, benchSize)
			m := dirMapping(host, e.root+"/bench")
			_, err := e.syncIn(b, Options{Delta: DeltaOff}, m)
			require.NoError(b, err)
			d := &deltaBench{e: e, changes: 1,
				sync: func(ctx context.Context, o Options) ([]OperationResult, error) {
					return SyncIn(ctx, e.t, []Operation{{ID: "i", Files: []Mapping{m}}}, o)
				},
				change: func(i int) { rewrite(b, benchFile(host, i*37), i) },
			}
			// A delta before the timed runs lets the sandbox record and the
			// host hash record see the tree once, as a worker's earlier
			// syncs would have.
			d.run(b, Options{settle: -time.Hour}, false)
			d.report(b)
		})
	}
}

// BenchmarkDeltaSyncOut exports the same tree after 10 sandbox files
// changed, at 0 and 40 ms per request; reported as BenchmarkDeltaSyncIn.
func BenchmarkDeltaSyncOut(b *testing.B) {
	for _, lat := range []time.Duration{0, 40 * time.Millisecond} {
		b.Run(fmt.Sprintf("latency=%s", lat), func(b *testing.B) {
			e := newEnv(b, daytonatest.WithLatency(lat))
			sb := e.hostRoot + "/bench"
			makeTree(b, sb, benchFiles, benchSize)
			m := dirMapping(e.root+"/bench", filepath.Join(b.TempDir(), "back"))
			_, err := e.syncOut(b, Options{Delta: DeltaOff}, m)
			require.NoError(b, err)
			d := &deltaBench{e: e, changes: 10,
				sync: func(ctx context.Context, o Options) ([]OperationResult, error) {
					return SyncOut(ctx, e.t, []Operation{{ID: "o", Files: []Mapping{m}}}, o)
				},
				change: func(i int) { rewrite(b, benchFile(sb, i*37), i) },
			}
			d.run(b, Options{settle: -time.Hour}, false)
			d.report(b)
		})
	}
}
