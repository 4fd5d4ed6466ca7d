package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// BenchmarkOneShot8MiBWorker measures the worker's whole one-shot path for
// an 8 MiB result (lines of 1 KiB) at 0 ms latency: an environmentExecute
// with bypassSession framed on the worker's stdin, through the driver, the
// command runner, the client's streaming decoder and the result frame on
// stdout, against daytona-sim out of process. Each iteration also runs the
// same command as a raw client one-shot (Toolbox.ExecuteStream, text
// discarded), so worker/raw is the worker's own share in the same run
// (1.0 = free). The host's parse of the frame is not included.
//
//	go test -run '^$' -bench OneShot8MiBWorker -benchtime 10x -count 3 ./cmd/daytona-worker/
//
// With -cpuprofile, the profile is the worker side alone.
func BenchmarkOneShot8MiBWorker(b *testing.B) {
	const script = `head -c 8388608 /dev/zero | tr '\0' a | fold -w 1023`
	const size = 8388608 + 8388608/1023
	sim := testenv.StartSim(b)
	ref := testenv.StartSandbox(b, sim.Client, nil).Ref()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serve(context.Background(), inR, outW, io.Discard, serveOptions{level: slog.LevelError})
		_ = outW.Close()
	}()
	b.Cleanup(func() { _ = inW.Close(); <-done })
	out := bufio.NewReaderSize(outR, 1<<20)
	id := 0
	// call sends one request and returns its response line, unparsed.
	call := func(method string, params map[string]any) []byte {
		id++
		frame, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := inW.Write(append(frame, '\n')); err != nil {
			b.Fatal(err)
		}
		prefix := []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,`)
		for {
			line, err := out.ReadBytes('\n')
			if err != nil {
				b.Fatal(err)
			}
			if bytes.HasPrefix(line, prefix) {
				if bytes.Contains(line[:min(len(line), 64)], []byte(`"error"`)) {
					b.Fatalf("%s", line)
				}
				return line
			}
		}
	}
	params := func(kv ...any) map[string]any {
		p := map[string]any{"driverKey": "daytona", "companyId": "company-1", "environmentId": "env-1",
			"config": map[string]any{"apiKey": sim.APIKey, "apiUrl": sim.APIURL, "timeoutMs": 600000}}
		for i := 0; i < len(kv); i += 2 {
			p[kv[i].(string)] = kv[i+1]
		}
		return p
	}
	var res struct {
		Result json.RawMessage `json:"result"`
	}
	line := call("environmentAcquireLease", params("runId", "run-1", "agentId", "agent-1", "executionWorkspaceId", "ws-1", "adapterType", "claude_local"))
	if err := json.Unmarshal(line, &res); err != nil {
		b.Fatal(err)
	}
	exec := params("lease", res.Result, "command", "bash", "args", []string{"-c", script}, "bypassSession", true)
	raw := &daytona.ExecuteRequest{Command: "bash -c " + strconv.Quote(script)}
	var rawTook, workerTook time.Duration
	b.SetBytes(size)
	for k := 0; b.Loop(); k++ {
		for j := range 2 {
			start := time.Now()
			if (j+k)%2 == 0 { // rotated: neither always runs first
				n := 0
				_, _, err := sim.Client.Toolbox.ExecuteStream(context.Background(), ref, raw, func(p []byte) error { n += len(p); return nil })
				if err != nil || n != size {
					b.Fatalf("raw: %v, %d bytes", err, n)
				}
				rawTook += time.Since(start)
				continue
			}
			if line := call("environmentExecute", exec); len(line) < size || !bytes.Contains(line[:64], []byte(`"exitCode":0`)) {
				b.Fatalf("worker: %d bytes, starts %q", len(line), line[:min(len(line), 64)])
			}
			workerTook += time.Since(start)
		}
	}
	mibs := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / (1 << 20) }
	b.ReportMetric(mibs(rawTook), "raw-MiB/s")
	b.ReportMetric(mibs(workerTook), "worker-MiB/s")
	b.ReportMetric(rawTook.Seconds()/workerTook.Seconds(), "worker/raw")
}
