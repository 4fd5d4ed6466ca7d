package sync

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/shell"
)

// Benchmarks (see BENCH_NOTES.md for numbers and commands).
//
// BenchmarkSync runs the emulator out of process (cmd/daytona-sim), so the
// benchmark process is the worker side only and its peak RSS is the
// worker's. Each sub-benchmark measures `tar -cf - . | tar -xf -` of the
// same tree in the same run and reports ours/tar as "ratio".

// sim is a daytona-sim child process and a sandbox in it.
type sim struct {
	cmd  *osexec.Cmd
	c    *daytona.Client
	ref  daytona.SandboxRef
	root string
}

func startSim(b *testing.B) *sim {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "daytona-sim")
	build := osexec.Command("go", "build", "-o", bin, "../cmd/daytona-sim")
	build.Stderr = os.Stderr
	require.NoError(b, build.Run())
	cmd := osexec.Command(bin, "-stop-on-eof", "-disk-bytes", strconv.FormatInt(64<<30, 10), "-dir", b.TempDir())
	stdin, err := cmd.StdinPipe()
	require.NoError(b, err)
	out, err := cmd.StdoutPipe()
	require.NoError(b, err)
	cmd.Stderr = os.Stderr
	require.NoError(b, cmd.Start())
	b.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(b, err)
	var info struct{ APIURL, APIKey string }
	require.NoError(b, json.Unmarshal([]byte(line), &info))
	c, err := daytona.NewClient(daytona.WithAPIURL(info.APIURL), daytona.WithAPIKey(info.APIKey))
	require.NoError(b, err)
	ctx := context.Background()
	sb, _, err := c.Sandboxes.Create(ctx, &daytona.CreateSandboxRequest{Name: "bench", Snapshot: "base"})
	require.NoError(b, err)
	sb, err = c.Sandboxes.WaitUntilStarted(ctx, sb.ID)
	require.NoError(b, err)
	wd, _, err := c.Toolbox.WorkDir(ctx, sb.Ref())
	require.NoError(b, err)
	return &sim{cmd: cmd, c: c, ref: sb.Ref(), root: wd}
}

// makeTree writes files*size bytes of non-zero (not sparse) data.
func makeTree(b *testing.B, dir string, files int, size int) int64 {
	b.Helper()
	block := make([]byte, size)
	for i := range block {
		block[i] = byte(i*7 + 1)
	}
	for i := range files {
		p := filepath.Join(dir, fmt.Sprintf("d%03d", i%100), fmt.Sprintf("f%06d", i))
		require.NoError(b, os.MkdirAll(filepath.Dir(p), 0o755))
		block[0] = byte(i)
		require.NoError(b, os.WriteFile(p, block, 0o644))
	}
	return int64(files) * int64(size)
}

// tarPipe times `tar -cf - . | tar -xf -` from src into a fresh dst.
func tarPipe(b *testing.B, src string) time.Duration {
	b.Helper()
	dst, err := os.MkdirTemp(filepath.Dir(src), "tarpipe-")
	require.NoError(b, err)
	defer os.RemoveAll(dst)
	start := time.Now()
	cmd := osexec.Command("bash", "-c", "tar -C \"$1\" -cf - . | tar -C \"$2\" -xf -", "x", src, dst)
	out, err := cmd.CombinedOutput()
	require.NoError(b, err, string(out))
	return time.Since(start)
}

// peakSampler samples live heap bytes every 2 ms and reads the process's
// peak RSS (VmHWM, reset through /proc/self/clear_refs).
type peakSampler struct {
	stop     chan struct{}
	wg       stdsync.WaitGroup
	peakHeap uint64
}

func startPeak() *peakSampler {
	runtime.GC()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // reset VmHWM
	p := &peakSampler{stop: make(chan struct{})}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		for {
			metrics.Read(s)
			p.peakHeap = max(p.peakHeap, s[0].Value.Uint64())
			select {
			case <-p.stop:
				return
			case <-tk.C:
			}
		}
	}()
	return p
}

func (p *peakSampler) done() (heapMiB, rssMiB float64) {
	close(p.stop)
	p.wg.Wait()
	return float64(p.peakHeap) / (1 << 20), float64(vmHWM()) / (1 << 20)
}

func vmHWM() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			f := strings.Fields(l)
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}

func BenchmarkSync(b *testing.B) {
	s := startSim(b)
	t := Target{Client: s.c, Sandbox: s.ref, Root: s.root}
	for _, tc := range []struct {
		name        string
		files, size int
	}{
		{"100MiB", 100, 1 << 20},
		{"1GiB", 64, 16 << 20},
		{"10kSmall", 10_000, 1 << 10},
	} {
		host := b.TempDir()
		src := filepath.Join(host, "src")
		total := makeTree(b, src, tc.files, tc.size)
		tarTime := tarPipe(b, src)
		tarMBs := float64(total) / tarTime.Seconds() / 1e6
		remote := s.root + "/" + tc.name
		b.Run(tc.name+"/syncIn", func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				p := startPeak()
				_, err := SyncIn(context.Background(), t, []Operation{{ID: "i", Files: []Mapping{{SourcePath: src, TargetPath: remote, Kind: KindDirectory}}}}, Options{})
				heap, rss := p.done()
				require.NoError(b, err)
				b.ReportMetric(heap, "peak-heap-MiB")
				b.ReportMetric(rss, "peak-RSS-MiB")
			}
			b.ReportMetric(tarMBs, "tar-MB/s")
			b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds()/1e6/tarMBs, "ratio")
		})
		b.Run(tc.name+"/syncOut", func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				dst := filepath.Join(host, "back")
				b.StopTimer()
				require.NoError(b, os.RemoveAll(dst))
				b.StartTimer()
				p := startPeak()
				_, err := SyncOut(context.Background(), t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: remote, TargetPath: dst, Kind: KindDirectory}}}}, Options{})
				heap, rss := p.done()
				require.NoError(b, err)
				b.ReportMetric(heap, "peak-heap-MiB")
				b.ReportMetric(rss, "peak-RSS-MiB")
			}
			b.ReportMetric(tarMBs, "tar-MB/s")
			b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds()/1e6/tarMBs, "ratio")
		})
		require.NoError(b, os.RemoveAll(host))
		_, _, _ = s.c.Toolbox.Execute(context.Background(), s.ref, &daytona.ExecuteRequest{Command: "rm -rf " + shell.Quote(remote)})
	}
}

// BenchmarkTerminalExport measures the disk-full fallback channel: one
// 64 MiB file streamed through the terminal (in-process emulator).
func BenchmarkTerminalExport(b *testing.B) {
	e := newEnv(b)
	const size = 64 << 20
	block := make([]byte, size)
	for i := range block {
		block[i] = byte(i*13 + 1)
	}
	require.NoError(b, os.WriteFile(filepath.Join(e.root, "big"), block, 0o644))
	host := b.TempDir()
	b.SetBytes(size)
	for b.Loop() {
		_, _, err := e.t.streamFiles(context.Background(), []Mapping{{SourcePath: e.root + "/big", TargetPath: filepath.Join(host, "big"), Kind: KindFile}}, Options{HostReserve: -1})
		require.NoError(b, err)
	}
}
