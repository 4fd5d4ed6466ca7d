package provider

import (
	"testing"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/stretchr/testify/require"
)

// newHTTPConns counts, in the emulator's request log, the requests that
// opened a TCP connection to carry HTTP calls (a WebSocket, the log
// follow, keeps a connection of its own for its life).
func (e *testEnv) newHTTPConns() int {
	n := 0
	for _, r := range e.srv.Requests() {
		if r.NewConn && !r.WebSocket {
			n++
		}
	}
	return n
}

// After warm-up, a lease's commands (session and one-shot, small and large
// answers) and a wave of 16 one-shot commands in flight at once open no
// new HTTP connection: the production driver uses the client's tuned pool,
// not Go's default of 2 idle connections per host.
func TestALeaseReusesItsConnections(t *testing.T) {
	const inFlight = 16
	e := newTestEnv(t, nil)
	e.use(e.driverWith(func(o *Options) { o.HTTPClient = nil }))
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
		// Every execute of the wave is held until all of them are in
		// flight, so the wave needs inFlight connections at once.
		gate := make(chan struct{})
		e.srv.Inject(daytonatest.Fault{Method: "POST", Route: rExecute, Gate: gate, Times: inFlight})
		before := e.srv.CountRequests("POST", rExecute)
		p := with(e.base(l.Metadata), "lease", l, "command", "echo", "args", []string{"hi"}, "bypassSession", true)
		calls := make([]<-chan result, inFlight)
		for i := range calls {
			calls[i] = e.async("environmentExecute", p)
		}
		e.awaitRequests("POST", rExecute, before+inFlight)
		close(gate)
		for _, c := range calls {
			r := wait(t, c)
			require.NoError(t, r.err)
			require.Equal(t, "hi\n", decode[execResult](t, r.raw).Stdout)
		}
	}
	sequence()
	burst()
	e.srv.ResetRequests()
	sequence()
	require.Zero(t, e.newHTTPConns(), "a warm lease's commands open no connection")
	burst()
	require.Zero(t, e.newHTTPConns(), "a second wave of %d commands in flight opens no connection", inFlight)
}
