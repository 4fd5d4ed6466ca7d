package chaos

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
)

// Host operations a schedule is made of.
const (
	opAcquire    = "acquire"
	opRealize    = "realize"
	opExecute    = "execute"
	opSyncIn     = "syncIn"
	opSyncOut    = "syncOut"
	opResume     = "resume"
	opRelease    = "release"
	opStop       = "stop"
	opDestroy    = "destroy"
	opCancel     = "cancelActiveWork" // a release with cancelActiveWork while an execute runs
	opConcurrent = "concurrent"       // two calls on one lease at once
	opDiskFull   = "diskFull"         // the sandbox's disk allocation shrinks to what it uses
)

// leaseSlots is how many leases a schedule holds at most at once.
const leaseSlots = 2

// step is one host call (or, for opConcurrent, two).
type step struct {
	Op   string
	Slot int // which lease
	// Execute: bytes each stream writes and the exit code.
	Out, Err, Exit int
	// Sync: files in the tree and their size.
	Files, Size int
	// KillAfter > 0 kills the worker once the emulator has seen this many
	// requests after the call began (or when it answers, if sooner); a
	// fresh worker takes over for the next step.
	KillAfter int
	// Both are the two calls of opConcurrent.
	Both []step
}

func (s step) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s[%d]", s.Op, s.Slot)
	switch s.Op {
	case opExecute, opCancel:
		fmt.Fprintf(&b, " out=%d err=%d exit=%d", s.Out, s.Err, s.Exit)
	case opSyncIn, opSyncOut:
		fmt.Fprintf(&b, " files=%d size=%d", s.Files, s.Size)
	case opConcurrent:
		fmt.Fprintf(&b, " {%s} || {%s}", s.Both[0], s.Both[1])
	}
	if s.KillAfter > 0 {
		fmt.Fprintf(&b, " kill-after=%d", s.KillAfter)
	}
	return b.String()
}

// faultSpec is one emulator fault of a schedule: a kind on a route,
// applied to its Skip+1-th to Skip+Times-th matching request.
type faultSpec struct {
	Kind          string
	Method, Route string
	Skip, Times   int
	Bytes         int           // cut-after bytes (bodycut, wsclose)
	Delay         time.Duration // delay
}

func (f faultSpec) String() string {
	s := fmt.Sprintf("%s %s %s skip=%d times=%d", f.Kind, f.Method, f.Route, f.Skip, f.Times)
	if f.Bytes > 0 {
		s += fmt.Sprintf(" bytes=%d", f.Bytes)
	}
	if f.Delay > 0 {
		s += fmt.Sprintf(" delay=%s", f.Delay)
	}
	return s
}

// fault is the daytonatest.Fault of the spec.
func (f faultSpec) fault() daytonatest.Fault {
	df := daytonatest.Fault{Method: f.Method, Route: f.Route, Skip: f.Skip, Times: f.Times}
	switch f.Kind {
	case "500", "502", "503":
		fmt.Sscan(f.Kind, &df.Status)
	case "429":
		df.Status = http.StatusTooManyRequests
		df.Header = http.Header{"Retry-After": {"1"}}
	case "hang":
		df.Hang = true
	case "drop":
		df.Drop = true
	case "perform-drop":
		df.Perform, df.Drop = true, true
	case "perform-500":
		df.Perform, df.Status = true, 500
	case "perform-hang":
		df.Perform, df.Hang = true, true
	case "bodycut":
		df.BodyCut, df.BodyCutAfterBytes = true, int64(f.Bytes)
	case "wsclose":
		df.WSClose, df.WSCloseAfterBytes = true, f.Bytes
	case "wssilent":
		df.WSSilent = true
	case "wsdropfinal":
		df.WSDropFinal = true
	case "refusestart":
		df.RefuseStartWhileStopping = true
	case "listignores":
		df.ListIgnoresLabels = true
	case "delay":
		df.Delay = f.Delay
	}
	return df
}

// route is an emulator route with the fault kinds that make sense on it,
// and how often it is drawn (roughly how often a lease's calls use it).
type route struct {
	method, tmpl string
	kinds        []string
	weight       int
}

var (
	replyFaults   = []string{"500", "502", "503", "429", "hang", "drop", "delay"}
	performFaults = []string{"perform-drop", "perform-500", "perform-hang"}
	logFaults     = []string{"wsclose", "wssilent", "wsdropfinal", "500", "drop", "delay"}
)

func kinds(sets ...[]string) []string {
	var out []string
	for _, s := range sets {
		out = append(out, s...)
	}
	return out
}

// routes are the Daytona routes a lease's calls use.
var routes = []route{
	{"POST", "/sandbox", kinds(replyFaults, performFaults), 3},
	{"GET", "/sandbox/{sandboxIdOrName}", kinds(replyFaults, []string{"bodycut"}), 5},
	{"DELETE", "/sandbox/{sandboxIdOrName}", kinds(replyFaults, performFaults), 2},
	{"POST", "/sandbox/{sandboxIdOrName}/start", kinds(replyFaults, performFaults, []string{"refusestart"}), 1},
	{"POST", "/sandbox/{sandboxIdOrName}/stop", kinds(replyFaults, performFaults), 1},
	{"POST", "/sandbox/{sandboxIdOrName}/autostop/{interval}", replyFaults, 1},
	{"POST", "/sandbox/{sandboxIdOrName}/autodelete/{interval}", replyFaults, 1},
	{"GET", "/sandbox", kinds(replyFaults, []string{"listignores", "bodycut"}), 1},
	{"POST", "/process/execute", kinds(replyFaults, performFaults, []string{"bodycut"}), 5},
	{"POST", "/process/session", kinds(replyFaults, performFaults), 1},
	{"POST", "/process/session/{sessionId}/exec", kinds(replyFaults, performFaults), 2},
	{"GET", "/process/session/{sessionId}/command/{commandId}", kinds(replyFaults, []string{"bodycut"}), 1},
	{"GET", "/process/session/{sessionId}/command/{commandId}/logs", logFaults, 3},
	{"DELETE", "/process/session/{sessionId}", replyFaults, 1},
	{"POST", "/files/folder", kinds(replyFaults, performFaults), 1},
	{"POST", "/files/bulk-upload", kinds(replyFaults, performFaults), 2},
	{"POST", "/files/upload", kinds(replyFaults, performFaults), 1},
	{"GET", "/files/download", kinds(replyFaults, []string{"bodycut"}), 1},
	{"POST", "/files/bulk-download", kinds(replyFaults, []string{"bodycut"}), 1},
	{"DELETE", "/files", replyFaults, 1},
}

// schedule is everything one seed decides.
type schedule struct {
	Seed            int64
	Reuse           bool          // reusable leases (release stops) or ephemeral (release deletes)
	TransitionDelay time.Duration // how long each intermediate sandbox state lasts
	// Latency delays every request and WebSocket upgrade (a network
	// between the worker and Daytona): zero, or past the worker's
	// close-network threshold so the far-network reads run.
	Latency time.Duration
	Faults  []faultSpec
	Steps   []step
}

func (s schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schedule seed=%d reuse=%v transition-delay=%s latency=%s\n", s.Seed, s.Reuse, s.TransitionDelay, s.Latency)
	for _, f := range s.Faults {
		fmt.Fprintf(&b, "  fault %s\n", f)
	}
	for i, st := range s.Steps {
		fmt.Fprintf(&b, "  %2d %s\n", i, st)
	}
	return b.String()
}

// opWeights: how often each operation is drawn.
var opWeights = []struct {
	op string
	w  int
}{
	{opAcquire, 5}, {opRealize, 2}, {opExecute, 10}, {opSyncIn, 4}, {opSyncOut, 3},
	{opResume, 3}, {opRelease, 3}, {opStop, 2}, {opDestroy, 2}, {opCancel, 2},
	{opConcurrent, 4}, {opDiskFull, 1},
}

func drawOp(r *rand.Rand) string {
	total := 0
	for _, o := range opWeights {
		total += o.w
	}
	n := r.IntN(total)
	for _, o := range opWeights {
		if n < o.w {
			return o.op
		}
		n -= o.w
	}
	return opExecute
}

// outputSizes are the stream sizes executes write: empty, small, around a
// log chunk, and larger than several.
var outputSizes = []int{0, 1, 7, 100, 4096, 65537, 300000}

// drawStep draws one call of op on a slot.
func drawStep(r *rand.Rand, op string) step {
	st := step{Op: op, Slot: r.IntN(leaseSlots)}
	switch op {
	case opExecute, opCancel:
		st.Out, st.Err = outputSizes[r.IntN(len(outputSizes))], outputSizes[r.IntN(len(outputSizes)-1)]
		st.Exit = []int{0, 0, 0, 1, 2, 127, 255}[r.IntN(7)]
	case opSyncIn, opSyncOut:
		st.Files, st.Size = 1+r.IntN(6), []int{0, 5, 300, 70000}[r.IntN(4)]
	}
	return st
}

// latencies are the network round trips a schedule runs behind: none
// (the emulator on loopback) twice as often as 20 ms, so the looks and
// follows the exec plan makes across a network meet the faults too.
var latencies = []time.Duration{0, 0, 20 * time.Millisecond}

// newSchedule draws the schedule of a seed. The latency comes from a
// stream of its own, so a seed draws the same steps and faults as before
// latencies were drawn.
func newSchedule(seed int64) schedule {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	s := schedule{Seed: seed, Reuse: r.IntN(2) == 0, TransitionDelay: []time.Duration{time.Millisecond, 5 * time.Millisecond, 40 * time.Millisecond}[r.IntN(3)]}
	s.Latency = latencies[rand.New(rand.NewPCG(uint64(seed), 0x1a7e)).IntN(len(latencies))]
	total := 0
	for _, rt := range routes {
		total += rt.weight
	}
	for range 1 + r.IntN(5) {
		rt := drawRoute(r, total)
		f := faultSpec{Kind: rt.kinds[r.IntN(len(rt.kinds))], Method: rt.method, Route: rt.tmpl, Skip: r.IntN(6), Times: 1 + r.IntN(3)}
		switch f.Kind {
		case "bodycut", "wsclose":
			f.Bytes = r.IntN(300)
		case "delay":
			f.Delay = time.Duration(10+r.IntN(200)) * time.Millisecond
		case "hang", "perform-hang":
			f.Times = 1 // every hang costs a bound's wait
		}
		s.Faults = append(s.Faults, f)
	}
	// Every schedule starts with an acquire on slot 0.
	s.Steps = append(s.Steps, step{Op: opAcquire})
	for range 4 + r.IntN(10) {
		st := drawStep(r, drawOp(r))
		if st.Op == opConcurrent {
			a := drawStep(r, []string{opExecute, opExecute, opSyncIn, opSyncOut, opRelease, opStop}[r.IntN(6)])
			b := drawStep(r, []string{opExecute, opSyncIn, opSyncOut}[r.IntN(3)])
			a.Slot, b.Slot = st.Slot, st.Slot
			st.Both = []step{a, b}
		}
		if r.IntN(10) == 0 {
			st.KillAfter = 1 + r.IntN(8)
		}
		s.Steps = append(s.Steps, st)
	}
	return s
}

// drawRoute picks a route by weight.
func drawRoute(r *rand.Rand, total int) route {
	n := r.IntN(total)
	for _, rt := range routes {
		if n < rt.weight {
			return rt
		}
		n -= rt.weight
	}
	return routes[0]
}
