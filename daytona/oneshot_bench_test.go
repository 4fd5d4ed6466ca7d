package daytona_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// BenchmarkOneShot8MiBShare splits an 8 MiB one-shot answer (lines of
// 1 KiB, the worker-level benchmark's command) against daytona-sim out of
// process, at 0 ms latency, into what the client adds and what it cannot
// change. Every iteration runs the command three ways, back to back (in
// rotated order) so they share the machine's load:
//
//   - floor: the same POST with a plain HTTP client, the answer read and
//     discarded (the sandbox command, the emulator's JSON answer, loopback);
//   - stream: Toolbox.ExecuteStream, the decoded text discarded (the
//     worker's one-shot path in this package);
//   - collect: Toolbox.Execute, the text collected as one string.
//
// stream/floor and collect/floor are throughputs relative to the floor
// (1.0: the client adds nothing).
//
//	go test -run '^$' -bench OneShot8MiBShare -benchtime 10x -count 3 ./daytona/
func BenchmarkOneShot8MiBShare(b *testing.B) {
	const cmd = `bash -c "head -c 8388608 /dev/zero | tr '\\0' a | fold -w 1023"`
	const size = 8388608 + 8388608/1023
	sim := testenv.StartSim(b)
	c := testenv.Client(b, sim.APIURL, sim.APIKey)
	ref := testenv.StartSandbox(b, c, nil).Ref()
	ctx := context.Background()
	body, err := json.Marshal(daytona.ExecuteRequest{Command: cmd})
	if err != nil {
		b.Fatal(err)
	}
	plain := &http.Client{Transport: daytona.NewTransport()}
	floor := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ref.ToolboxProxyURL+"/"+ref.ID+"/process/execute", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+sim.APIKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := plain.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	stream := func() error {
		n := 0
		_, _, err := c.Toolbox.ExecuteStream(ctx, ref, &daytona.ExecuteRequest{Command: cmd}, func(p []byte) error { n += len(p); return nil })
		if err == nil && n != size {
			b.Fatalf("stream: %d bytes", n)
		}
		return err
	}
	collect := func() error {
		res, _, err := c.Toolbox.Execute(ctx, ref, &daytona.ExecuteRequest{Command: cmd})
		if err == nil && len(res.Result) != size {
			b.Fatalf("collect: %d bytes", len(res.Result))
		}
		return err
	}
	var took [3]time.Duration
	b.SetBytes(size)
	ways := []func() error{floor, stream, collect}
	for k := 0; b.Loop(); k++ {
		for j := range ways {
			i := (j + k) % len(ways) // rotated: no way always runs first
			start := time.Now()
			if err := ways[i](); err != nil {
				b.Fatal(err)
			}
			took[i] += time.Since(start)
		}
	}
	mbs := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / (1 << 20) }
	b.ReportMetric(mbs(took[0]), "floor-MiB/s")
	b.ReportMetric(mbs(took[1]), "stream-MiB/s")
	b.ReportMetric(mbs(took[2]), "collect-MiB/s")
	b.ReportMetric(took[0].Seconds()/took[1].Seconds(), "stream/floor")
	b.ReportMetric(took[0].Seconds()/took[2].Seconds(), "collect/floor")
}
