package daytonatest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Path prefixes under which the emulator mounts its two planes. Both are
// non-root on purpose: a client that builds absolute paths instead of
// joining onto the base URL it was given fails against the emulator.
const (
	// APIPrefix is where the control plane lives (Daytona's NestJS global prefix).
	APIPrefix = "/api"
	// ToolboxPrefix is where the toolbox proxy lives; sandboxes report
	// toolboxProxyUrl = <server>/proxy/toolbox.
	ToolboxPrefix = "/proxy/toolbox"
)

// Defaults used when an option is not given.
const (
	DefaultTransitionDelay = 5 * time.Millisecond
	DefaultStartWait       = 30 * time.Second
	DefaultOrganizationID  = "org-daytonatest"
)

// Option configures a Server built by New.
type Option func(*config)

type config struct {
	apiKey          string
	dir             string
	transitionDelay time.Duration
	diskBytes       int64
	latency         time.Duration
	network         Network // WithNetwork
	tls             bool    // WithTLS
	isolation       Isolation
	logf            func(format string, args ...any)
	// structuredErrors: the newer daemon's answer to a lost session
	// (WithStructuredErrors).
	structuredErrors bool
	// cost paces the session labeler (WithLabelerCost).
	cost LabelerCost
	// upstream is the base URL of a real toolbox daemon
	// (WithToolboxUpstream).
	upstream string
}

// WithAPIKey sets the bearer token the server accepts (default: random).
func WithAPIKey(key string) Option { return func(c *config) { c.apiKey = key } }

// WithDir sets the host directory under which every sandbox gets its own
// tree (default: a fresh temp dir, removed by Close; testenv.Server passes t.TempDir()).
func WithDir(dir string) Option { return func(c *config) { c.dir = dir } }

// WithTransitionDelay sets how long each intermediate lifecycle state
// (creating, stopping, starting, destroying, ...) lasts before the next
// one (still asynchronously). Zero or less means no delay; use
// HoldTransitions to freeze a state.
func WithTransitionDelay(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			d = -1 // explicitly none, as opposed to unset
		}
		c.transitionDelay = d
	}
}

// WithDiskBytes sets every new sandbox's disk allocation in bytes
// (default: the sandbox's "disk" GiB).
func WithDiskBytes(n int64) Option { return func(c *config) { c.diskBytes = n } }

// WithLatency delays every request of both planes, WebSocket upgrades
// included, by d before the emulator handles it: d is the whole round trip
// of a request (the reply is not delayed again). This is the older model,
// a hold in the handler: a new connection, a TLS handshake and WebSocket
// frames cost nothing, and an upgrade costs what a request on a warm
// connection does. WithNetwork charges a network as it is, on the
// connections; WithLatency stays for tests that want one fixed delay per
// request (a slow server rather than a far one). The delay ends early
// when the client gives up or the server closes.
// Requests are logged on arrival, before the delay (Request.Handled is
// when it ended); test-side controls and Await helpers are never delayed.
// Zero or less means none (the default).
func WithLatency(d time.Duration) Option { return func(c *config) { c.latency = max(d, 0) } }

// WithStructuredErrors makes the toolbox answer an exec on a session that
// no longer exists, or whose shell died, the way the daemon's newer
// clients (0.218) know it: 410 with code SESSION_ENDED. Without it the
// emulator answers as the v0.190.0 daemon does: 500 with the wrapped
// message and no code (docs/emulator.md#lost-sessions-and-dead-shells).
func WithStructuredErrors() Option { return func(c *config) { c.structuredErrors = true } }

// WithLabelerCost charges the session path what the daemon's per-line
// labeler costs (a bash `while read` loop per stream): each stream's
// labeler is paced so that it delivers no faster than PerLine per line
// plus PerByte per byte. DaemonLabelerCost is the measured cost; the zero
// value (the default) charges nothing.
func WithLabelerCost(c LabelerCost) Option { return func(cfg *config) { cfg.cost = c } }

// WithLogf sets a debug logger (e.g. t.Logf). Secrets are never passed to it.
func WithLogf(logf func(format string, args ...any)) Option { return func(c *config) { c.logf = logf } }

// Server is the Daytona emulator. The zero value is ready to use as an
// http.Handler (it generates an API key, see APIKey, and a temp dir that
// Close removes); New applies options.
type Server struct {
	initOnce sync.Once
	cfg      config
	ownDir   bool // dir was created by us and is removed on Close
	stateDir string
	// method is how sandbox processes are isolated; isoNote why it is the
	// host layout when it is.
	method  method
	isoNote string

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every observable change
	sandboxes map[string]*sandbox
	order     []string // creation order of sandbox ids
	holds     map[string]int
	faults    []*FaultHandle
	requests  []*Request
	// requestsGone counts entries removed from the front of requests
	// (ResetRequests, the log's bound), for SimRequestsPath's since.
	requestsGone int
	dispatch     []Dispatch
	history      history     // transitions and deletions (history.go)
	access       accessState // SSH access tokens and snapshots (access.go, snapshots.go)
	closed       bool

	baseURL atomic.Value // string: scheme://host:port once known (Start)
	// conns counts the TCP connections accepted (Connections).
	conns atomic.Int64
	// cert and certPEM are what WithTLS serves.
	cert    tls.Certificate
	certPEM []byte

	upstreamOnce sync.Once
	upstream     *httputil.ReverseProxy

	done   chan struct{}
	wg     sync.WaitGroup
	httpSv *httptest.Server
}

// New returns a configured Server that is not listening yet: use it as an
// http.Handler, or call Start.
func New(opts ...Option) *Server {
	s := &Server{}
	for _, o := range opts {
		o(&s.cfg)
	}
	s.init()
	return s
}

// Start serves the emulator on addr, which must be a loopback address
// ("127.0.0.1:0" picks a free port; "" means that). It returns the API
// base URL.
func (s *Server) Start(addr string) (string, error) {
	s.init()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("daytonatest: listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", fmt.Errorf("daytonatest: refusing non-loopback listen address %q", addr)
	}
	tcp, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("daytonatest: %w", err)
	}
	// Every connection goes through the network model, which counts it.
	ln := newNetListener(tcp, s.cfg.network, &s.conns)
	// httptest's server on our listener: Close then cuts every client
	// connection at once instead of waiting for hung requests to drain,
	// which is what tests and a stopping daytona-sim both want.
	hs := httptest.NewUnstartedServer(s)
	_ = hs.Listener.Close()
	hs.Listener = ln
	hs.Config.ReadHeaderTimeout = 10 * time.Second
	hs.Config.ConnContext = connContext // for Request.NewConn
	scheme := "http"
	if s.cfg.tls {
		// StartTLS offers HTTP/1.1 only, as WebSocket upgrades need.
		hs.TLS = &tls.Config{Certificates: []tls.Certificate{s.cert}, MinVersion: tls.VersionTLS12}
		hs.StartTLS()
		scheme = "https"
	} else {
		hs.Start()
	}
	s.mu.Lock()
	s.httpSv = hs
	s.baseURL.Store(scheme + "://" + tcp.Addr().String())
	s.mu.Unlock()
	return s.URL(), nil
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		c := &s.cfg
		if c.apiKey == "" {
			c.apiKey = "dtn_test_" + randHex(16)
		}
		switch {
		case c.transitionDelay == 0:
			c.transitionDelay = DefaultTransitionDelay
		case c.transitionDelay < 0:
			c.transitionDelay = 0
		}
		if c.dir == "" {
			d, err := os.MkdirTemp("", "daytonatest-")
			if err != nil {
				panic(fmt.Sprintf("daytonatest: temp dir: %v", err))
			}
			c.dir = d
			s.ownDir = true
		}
		if real, err := filepath.EvalSymlinks(c.dir); err == nil {
			c.dir = real
		}
		s.stateDir = filepath.Join(c.dir, ".daytonatest-state")
		if err := os.MkdirAll(s.stateDir, 0o700); err != nil {
			panic(fmt.Sprintf("daytonatest: state dir: %v", err))
		}
		if c.tls {
			cert, certPEM, err := selfSigned()
			if err != nil {
				panic(err)
			}
			s.cert, s.certPEM = cert, certPEM
		}
		s.method, s.isoNote = isolationFor(c.isolation)
		if s.method == methodHost {
			reportFallback(s.isoNote)
		}
		s.changed = make(chan struct{})
		s.sandboxes = map[string]*sandbox{}
		s.holds = map[string]int{}
		s.done = make(chan struct{})
	})
}

// URL is the API base URL including its path prefix, e.g.
// http://127.0.0.1:4321/api. Empty until the server listens.
func (s *Server) URL() string {
	s.init()
	b := s.base()
	if b == "" {
		return ""
	}
	return b + APIPrefix
}

// ToolboxURL is the toolboxProxyUrl the sandboxes report.
func (s *Server) ToolboxURL() string {
	s.init()
	b := s.base()
	if b == "" {
		return ""
	}
	return b + ToolboxPrefix
}

// APIKey is the bearer token the server accepts.
func (s *Server) APIKey() string { s.init(); return s.cfg.apiKey }

// OrganizationID is the organization of every sandbox.
func (s *Server) OrganizationID() string { s.init(); return DefaultOrganizationID }

// Isolated reports whether sandbox processes run in their own mount
// namespace as uid 1000 (see WithIsolation); when not, the reason is why
// they use the host layout.
func (s *Server) Isolated() (ok bool, reason string) {
	s.init()
	return s.method != methodHost, s.isoNote
}

// Dir is the host directory holding the sandbox trees.
func (s *Server) Dir() string { s.init(); return s.cfg.dir }

// Close stops the listener (if any), kills every process the sandboxes
// run, stops background transitions and waits for them. It is idempotent.
func (s *Server) Close() {
	s.init()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	hs := s.httpSv
	var boxes []*sandbox
	for _, sb := range s.sandboxes {
		boxes = append(boxes, sb)
	}
	s.notifyLocked()
	s.mu.Unlock()
	for _, sb := range boxes {
		sb.killAll("server closed")
	}
	if hs != nil {
		hs.CloseClientConnections()
		hs.Close()
	}
	s.wg.Wait()
	if s.ownDir {
		_ = os.RemoveAll(s.cfg.dir)
	}
}

// notifyLocked wakes every waiter; s.mu must be held.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) notify() {
	s.mu.Lock()
	s.notifyLocked()
	s.mu.Unlock()
}

// Await blocks until cond returns true, re-evaluating it after every
// observable change in the server (state transitions, requests, command
// output and completion, ...). cond runs without the server lock held and
// may call any Server method. It returns ctx.Err() if ctx ends first.
func (s *Server) Await(ctx context.Context, cond func() bool) error {
	s.init()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// goBackground runs f on a goroutine that Close waits for.
func (s *Server) goBackground(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// sleep waits d or until the server closes / ctx ends; false if interrupted.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.done:
		return false
	case <-ctx.Done():
		return false
	}
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.logf != nil {
		s.cfg.logf(format, args...)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// ServeHTTP implements http.Handler for both planes. Each request is
// logged on arrival, then held for the WithLatency delay, then served.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.init()
	newConn := firstOnConn(r)
	if r.URL.Path == APIPrefix+SimRequestsPath {
		s.serveSimRequests(w, r)
		return
	}
	if r.URL.Path == APIPrefix+SimPTYDropPath {
		s.serveSimPTYDrop(w, r)
		return
	}
	plane, rt, params, tmpl, rel, ok := routeOf(r)
	if !ok {
		if s.hold(w, r) {
			writeAPIError(w, r, http.StatusNotFound, fmt.Sprintf("Cannot %s %s", r.Method, r.URL.Path))
		}
		return
	}
	rec := s.logRequest(r, plane, tmpl, rel, newConn)
	sw := &statusWriter{ResponseWriter: w}
	body := &countedBody{ReadCloser: r.Body}
	if r.Body != nil {
		r.Body = body
	} else {
		body.ReadCloser = http.NoBody
	}
	defer s.finishRequest(rec, sw, body)
	if !s.hold(sw, r) {
		return
	}
	s.mu.Lock()
	rec.Handled = time.Now()
	s.mu.Unlock()
	if plane == planeAPI {
		s.serveAPI(sw, r, rec, rt, params, rel)
	} else {
		s.serveToolbox(sw, r, rec, rt, params, rel)
	}
}

func (s *Server) base() string {
	b, _ := s.baseURL.Load().(string)
	return b
}

// baseFor returns scheme://host for URLs the server hands out.
func (s *Server) baseFor(r *http.Request) string {
	if b := s.base(); b != "" {
		return b
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func bearerOK(r *http.Request, key string) bool {
	h := r.Header.Get("Authorization")
	const p = "Bearer "
	if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
		return false
	}
	return h[len(p):] == key
}

var errClosed = errors.New("daytonatest: server closed")
