package provider

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
	"github.com/stretchr/testify/require"
)

// A production driver (no HTTP client given) against an emulator whose
// connections are counted: hold, when set, sees each request first.
func countedDriverEnv(t *testing.T, hold func(*http.Request)) (e *testEnv, httpConns func() int64) {
	t.Helper()
	emu := daytonatest.New(daytonatest.WithDir(t.TempDir()))
	var opened, upgraded atomic.Int64 // a WebSocket keeps its connection for itself
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hold != nil {
			hold(r)
		}
		emu.ServeHTTP(w, r)
	}))
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		} else if s == http.StateHijacked {
			upgraded.Add(1)
		}
	}
	hs.Start()
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close(); emu.Close() })
	apiURL := hs.URL + daytonatest.APIPrefix
	e = &testEnv{t: t, srv: emu, client: testenv.Client(t, apiURL, emu.APIKey()),
		cfg: map[string]any{"apiKey": emu.APIKey(), "apiUrl": apiURL, "timeoutMs": 20000}}
	e.use(e.driverWith(func(o *Options) { o.HTTPClient = nil }))
	return e, func() int64 { return opened.Load() - upgraded.Load() }
}

// After warm-up, a lease's commands (session and one-shot) and a wave of
// 16 one-shot commands in flight at once open no new HTTP connection: the
// driver uses the client's tuned pool, not Go's default of 2 idle
// connections per host.
func TestALeaseReusesItsConnections(t *testing.T) {
	const inFlight = 16
	var mu sync.Mutex
	var wave chan struct{} // closed when inFlight executes are held at once
	var held int
	e, httpConns := countedDriverEnv(t, func(r *http.Request) {
		mu.Lock()
		w := wave
		if w == nil || r.Method != http.MethodPost || r.URL.Path[len(r.URL.Path)-len(rExecute):] != rExecute {
			mu.Unlock()
			return
		}
		if held++; held == inFlight {
			close(w)
		}
		mu.Unlock()
		select {
		case <-w:
		case <-r.Context().Done():
		}
	})
	l := e.acquire(nil)
	sequence := func() {
		for _, bypass := range []bool{false, true} {
			r, err := e.execute(l, "echo", []string{"hi"}, "bypassSession", bypass)
			require.NoError(t, err)
			require.Equal(t, "hi\n", r.Stdout)
			// Large answers come chunked: read to their end, or their
			// connection is dropped.
			r, err = e.execute(l, "bash", []string{"-c", "head -c 300000 /dev/zero | tr '\\0' a; echo"}, "bypassSession", bypass)
			require.NoError(t, err)
			require.Equal(t, 300001, len(r.Stdout))
		}
	}
	burst := func() {
		mu.Lock()
		wave, held = make(chan struct{}), 0
		mu.Unlock()
		var wg sync.WaitGroup
		for range inFlight {
			wg.Go(func() {
				r, err := e.execute(l, "echo", []string{"hi"}, "bypassSession", true)
				if err == nil && r.Stdout != "hi\n" {
					t.Errorf("stdout %q", r.Stdout)
				}
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	sequence()
	burst()
	warm := httpConns()
	sequence()
	require.Equal(t, warm, httpConns(), "a warm lease's commands open no connection")
	burst()
	require.Equal(t, warm, httpConns(), "a second wave of %d commands in flight opens no connection", inFlight)
}
