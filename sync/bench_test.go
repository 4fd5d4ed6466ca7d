package sync

import (
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/shell"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// Benchmarks (numbers and commands: BENCH_NOTES.md in this directory;
// the worker-level figures are in bench/BENCHMARKS.md).
//
// BenchmarkSync runs the emulator out of process (cmd/daytona-sim), so the
// benchmark process is the worker side only and its peak RSS is the
// worker's. Each sub-benchmark measures `tar -cf - . | tar -xf -` of the
// same tree in the same run and reports ours/tar as "ratio".

// sim is a sandbox in a daytona-sim child process.
type sim struct {
	c    *daytona.Client
	ref  daytona.SandboxRef
	root string
}

func startSim(b *testing.B) *sim {
	b.Helper()
	s := testenv.StartSim(b, "-disk-bytes", strconv.FormatInt(64<<30, 10))
	sb := testenv.StartSandbox(b, s.Client, &daytona.CreateSandboxRequest{Name: "bench"})
	wd, _, err := s.Client.Toolbox.WorkDir(context.Background(), sb.Ref())
	require.NoError(b, err)
	return &sim{c: s.Client, ref: sb.Ref(), root: wd}
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
		// measure runs one direction: prepare (untimed), then the sync with
		// its peak memory, reported against tar's speed on the same tree.
		measure := func(b *testing.B, prepare func(), run func() error) {
			b.SetBytes(total)
			for b.Loop() {
				b.StopTimer()
				prepare()
				b.StartTimer()
				p := testenv.StartPeak()
				err := run()
				heap, rss := p.Done()
				require.NoError(b, err)
				b.ReportMetric(heap, "peak-heap-MiB")
				b.ReportMetric(rss, "peak-RSS-MiB")
			}
			b.ReportMetric(tarMBs, "tar-MB/s")
			b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds()/1e6/tarMBs, "ratio")
		}
		b.Run(tc.name+"/syncIn", func(b *testing.B) {
			measure(b, func() {}, func() error {
				_, err := SyncIn(context.Background(), t, []Operation{{ID: "i", Files: []Mapping{{SourcePath: src, TargetPath: remote, Kind: KindDirectory}}}}, Options{})
				return err
			})
		})
		dst := filepath.Join(host, "back")
		b.Run(tc.name+"/syncOut", func(b *testing.B) {
			measure(b, func() { require.NoError(b, os.RemoveAll(dst)) }, func() error {
				_, err := SyncOut(context.Background(), t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: remote, TargetPath: dst, Kind: KindDirectory}}}}, Options{})
				return err
			})
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
