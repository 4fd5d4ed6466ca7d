package daytonatest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	osexec "os/exec"
	"strings"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// BenchmarkOneShotExecute8MiB is the emulator's own cost of a one-shot
// execute that prints 8 MiB (a `cat` of a file of 1 KiB lines, the
// command of the execute benchmark), host layout, no latency. Every
// iteration runs, back to back in rotated order so both share the
// machine's load:
//
//   - baseline: the same `cat` started by this process (bash, a pipe, the
//     output read into memory): what the command itself costs;
//   - execute: POST /process/execute over loopback, the answer read whole.
//
// execute/baseline is the emulator's time over the command's (1.0: the
// emulator adds nothing).
//
//	go test -run '^$' -bench OneShotExecute8MiB -benchtime 20x -count 3 ./daytona/daytonatest/
func BenchmarkOneShotExecute8MiB(b *testing.B) {
	const size = 8 << 20
	srv := testenv.Server(b, daytonatest.WithIsolation(daytonatest.IsolationOff))
	hc := &http.Client{}
	ctx := context.Background()
	// post returns the answer, or with count set only its length (read
	// and dropped, so the client's own allocations stay out of the times).
	post := func(url string, body any, count bool) ([]byte, int64) {
		raw, err := json.Marshal(body)
		if err != nil {
			b.Fatal(err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(raw))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+srv.APIKey())
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if count && resp.StatusCode == http.StatusOK {
			n, err := io.Copy(io.Discard, resp.Body)
			if err != nil {
				b.Fatal(err)
			}
			return nil, n
		}
		out, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("POST %s: %d %v %.200s", url, resp.StatusCode, err, out)
		}
		return out, int64(len(out))
	}
	answer := func(url string, body any) []byte {
		out, _ := post(url, body, false)
		return out
	}
	var sb struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(answer(srv.URL()+"/sandbox", map[string]any{}), &sb); err != nil {
		b.Fatal(err)
	}
	execURL := srv.ToolboxURL() + "/" + sb.ID + "/process/execute"
	var home struct {
		Result string `json:"result"`
	}
	if err := json.Unmarshal(answer(execURL, map[string]any{"command": "pwd"}), &home); err != nil {
		b.Fatal(err)
	}
	file := strings.TrimSpace(home.Result) + "/bench-8mib.txt"
	answer(execURL, map[string]any{"command": fmt.Sprintf(
		`head -c %d /dev/zero | tr '\0' b | fold -w 1023 | head -c %d > '%s'`, size, size, file)})
	cmd := fmt.Sprintf("cat '%s'", file)
	// The answer: {"exitCode":0,"result":"<8 MiB, a \n escaped as 2 bytes>"}.
	want := len(`{"exitCode":0,"result":""}`) + size + size/1024

	baseline := func() {
		var out countWriter
		c := osexec.Command("bash", "-c", cmd)
		c.Stdout = &out
		if err := c.Run(); err != nil || out != size {
			b.Fatalf("baseline: %v, %d bytes", err, out)
		}
	}
	execute := func() {
		if _, n := post(execURL, map[string]any{"command": cmd}, true); n != int64(want) {
			b.Fatalf("execute: %d bytes, want %d", n, want)
		}
	}
	ways := []func(){baseline, execute}
	var took [2]time.Duration
	b.SetBytes(size)
	for k := 0; b.Loop(); k++ {
		for j := range ways {
			i := (j + k) % len(ways)
			start := time.Now()
			ways[i]()
			took[i] += time.Since(start)
		}
	}
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(b.N) }
	b.ReportMetric(ms(took[0]), "baseline-ms/op")
	b.ReportMetric(ms(took[1]), "execute-ms/op")
	b.ReportMetric(took[1].Seconds()/took[0].Seconds(), "execute/baseline")
}

// countWriter counts and drops what is written to it.
type countWriter int

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}
