package testenv

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Peak samples the live heap every 2 ms and reads the process's peak RSS,
// for benchmarks that report memory (their process being the worker side
// alone, see StartSim).
type Peak struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	peakHeap uint64
}

// StartPeak starts sampling. It first collects and hands freed memory back
// and resets the peak RSS (VmHWM, through /proc/self/clear_refs), so each
// measurement starts from the same floor whatever came before.
func StartPeak() *Peak {
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // reset VmHWM
	p := &Peak{stop: make(chan struct{})}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		sample := func() {
			metrics.Read(s)
			p.peakHeap = max(p.peakHeap, s[0].Value.Uint64())
		}
		for {
			sample()
			select {
			case <-p.stop:
				// One last sample: what is live when Done is called counts
				// however short the measured work was.
				sample()
				return
			case <-tk.C:
			}
		}
	}()
	return p
}

// Done stops sampling and returns the peak live heap and the peak RSS
// since StartPeak, in MiB (RSS 0 where /proc is not there).
func (p *Peak) Done() (heapMiB, rssMiB float64) {
	close(p.stop)
	p.wg.Wait()
	return float64(p.peakHeap) / (1 << 20), float64(vmHWM()) / (1 << 20)
}

func vmHWM() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}
