package daytona

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/internal/xfer"
)

// streamingServer is a toolbox that streams: uploads are checksummed as
// they arrive, downloads are generated on the fly.
func streamingServer(tb testing.TB) (*httptest.Server, *atomic.Uint32, *atomic.Int64) {
	var gotCRC atomic.Uint32
	var gotBytes atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /toolbox/{id}/files/bulk-upload", func(w http.ResponseWriter, r *http.Request) {
		_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		mr := multipart.NewReader(r.Body, params["boundary"])
		var files []UploadedFile
		for {
			p, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			if p.FormName() != "files[0].file" {
				_, _ = io.Copy(io.Discard, p)
				continue
			}
			h := crc32.NewIEEE()
			n, err := io.Copy(h, p)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			gotCRC.Store(h.Sum32())
			gotBytes.Store(n)
			files = append(files, UploadedFile{Path: partFileName(p), Bytes: n})
		}
		writeJSON(w, 200, map[string]any{"files": files})
	})
	mux.HandleFunc("GET /toolbox/{id}/files/download", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.URL.Query().Get("path")[1:], 10, 64)
		if err != nil {
			w.WriteHeader(400)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		_, _ = io.Copy(w, xfer.NewPattern(n))
	})
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	return srv, &gotCRC, &gotBytes
}

// heapPeak samples HeapInuse until stop is called and returns the peak.
func heapPeak() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > peak.Load() {
			peak.Store(ms.HeapInuse)
		}
	}
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		sample()
		return peak.Load()
	}
}

// TestTransfer256MiBBoundedHeap moves 256 MiB up and 256 MiB down through
// the client (and a streaming loopback server in the same process) and
// asserts the heap never grows by more than 32 MiB: transfers stream.
// Not parallel, so no other test's allocations are measured.
func TestTransfer256MiBBoundedHeap(t *testing.T) {
	const size = 256 << 20
	const budget = 32 << 20
	srv, gotCRC, gotBytes := streamingServer(t)
	c, err := NewClient(WithAPIURL(srv.URL+"/api"), WithAPIKey(testKey))
	require.NoError(t, err)
	ref := SandboxRef{ID: "perf", ToolboxProxyURL: srv.URL + "/toolbox"}
	want := xfer.CRC(size)

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	stop := heapPeak()

	_, err = c.Files.UploadFile(t.Context(), ref, "/big.bin", xfer.NewPattern(size))
	require.NoError(t, err)

	body, _, err := c.Files.Download(t.Context(), ref, "/"+strconv.Itoa(size))
	require.NoError(t, err)
	h := crc32.NewIEEE()
	n, err := io.Copy(h, body)
	require.NoError(t, err)
	require.NoError(t, body.Close())

	peak := stop()
	assert.EqualValues(t, size, gotBytes.Load(), "upload size")
	assert.Equal(t, want, gotCRC.Load(), "upload content")
	assert.EqualValues(t, size, n, "download size")
	assert.Equal(t, want, h.Sum32(), "download content")
	growth := int64(peak) - int64(base.HeapInuse)
	t.Logf("heap in use: base %d KiB, peak %d KiB, growth %d KiB for 2×%d MiB", base.HeapInuse>>10, peak>>10, growth>>10, size>>20)
	assert.Less(t, growth, int64(budget), "heap grew with the transfer size")
}

// BenchmarkUploadDownload reports the client's upload+download throughput
// against a streaming loopback toolbox, next to a raw loopback TCP copy of
// the same bytes, and their ratio (client-MB/s ÷ raw-MB/s).
func BenchmarkUploadDownload(b *testing.B) {
	const size = 64 << 20
	srv, _, gotBytes := streamingServer(b)
	c, err := NewClient(WithAPIURL(srv.URL+"/api"), WithAPIKey(testKey))
	require.NoError(b, err)
	ref := SandboxRef{ID: "perf", ToolboxProxyURL: srv.URL + "/toolbox"}
	ctx := context.Background()

	rawBest, err := xfer.BestRawLoopback(size, 3)
	require.NoError(b, err)
	b.SetBytes(2 * size)
	for b.Loop() {
		if _, err := c.Files.UploadFile(ctx, ref, "/big.bin", xfer.NewPattern(size)); err != nil {
			b.Fatal(err)
		}
		body, _, err := c.Files.Download(ctx, ref, fmt.Sprintf("/%d", size))
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, body); err != nil || n != size {
			b.Fatalf("download: %d bytes, %v", n, err)
		}
		body.Close()
	}
	b.StopTimer()
	if gotBytes.Load() != size {
		b.Fatalf("upload: %d bytes", gotBytes.Load())
	}
	clientMBs := float64(2*size) * float64(b.N) / b.Elapsed().Seconds() / 1e6
	rawMBs := float64(2*size) / rawBest.Seconds() / 1e6
	b.ReportMetric(clientMBs, "client-MB/s")
	b.ReportMetric(rawMBs, "raw-MB/s")
	b.ReportMetric(clientMBs/rawMBs, "client/raw")
}
