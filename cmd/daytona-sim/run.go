package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/cli"
)

// usagef is a command-line mistake (exit code 2).
func usagef(format string, a ...any) error { return cli.Usagef("daytona-sim -help", format, a...) }

// ready is the one line printed on stdout once the emulator listens:
//
//	{"apiUrl":"http://127.0.0.1:PORT/api","apiKey":"...","toolboxProxyUrl":"http://127.0.0.1:PORT/proxy/toolbox","organizationId":"...","dir":"..."}
type ready struct {
	APIURL          string `json:"apiUrl"`
	APIKey          string `json:"apiKey"`
	ToolboxProxyURL string `json:"toolboxProxyUrl"`
	OrganizationID  string `json:"organizationId"`
	Dir             string `json:"dir"`
	// CACertFile is the PEM file of the certificate served under -tls.
	CACertFile string `json:"caCertFile,omitempty"`
}

const usageHead = `usage: daytona-sim [flags]

daytona-sim is an emulator of the Daytona API for tests and demos, not Daytona.
It serves the Daytona REST and toolbox API on 127.0.0.1 and prints one JSON
line on stdout: {"apiUrl","apiKey","toolboxProxyUrl","organizationId","dir"}
(and "caCertFile" under -tls);
point a daytona-worker environment's apiUrl and apiKey at it.

Sandbox commands really run on this machine: a "sandbox" is a directory under
-dir, not an isolated machine. On Linux, when daytona-sim may create mount
namespaces (as root, or through unprivileged user namespaces), each sandbox's
commands see its home at /home/daytona and its own /tmp and run as uid 1000
("daytona"), as on Daytona; otherwise (or with -isolation off) they run as the
user running daytona-sim in the host directory and see the host's /tmp, and
daytona-sim says so once on stderr. Under a user namespace uid 1000 is that
user on the host, with its permissions. Run it only for code you would run
yourself.

It serves until SIGINT or SIGTERM (or, with -stop-on-eof, until stdin ends).

-rtt D charges every connection a network with round trip D, as a network
to Daytona does: the bytes of each direction arrive D/2 after they were
sent and a new connection's first bytes D later again (its TCP handshake),
so a request on a warm connection costs one round trip, on a new one two,
with -tls three, and WebSocket frames pay too. -bandwidth N limits each
direction of each connection to N bytes a second. -tls serves https and
wss with a self-signed certificate made at start, written to a file named
in the ready line as "caCertFile" (and on stderr); a Go client such as
daytona-worker trusts it with SSL_CERT_FILE=<that file>.

-latency D is the older model, a slow server rather than a far one: it
holds every API request, toolbox request and WebSocket upgrade for D
before serving it; new connections, TLS and WebSocket frames cost nothing.

Emulator only, not part of Daytona's API: GET <apiUrl>/__sim/requests (with
the same bearer API key) returns the request log as a JSON array of
{"method","route","status","newConn","webSocket","sandbox"} in arrival
order; ?since=N skips the first N entries ever logged. route is the route
template (e.g. "/process/session/{sessionId}/exec"), status is 0 while in
flight or when no reply came, and newConn marks the first request of a TCP
connection; its X-Sim-Connections header is the number of TCP connections
accepted so far (the reader's own included). It is neither logged nor held
by -latency. POST <apiUrl>/__sim/pty-drop?sandbox=ID
(same key) cuts that sandbox's terminal WebSockets without a close frame, as a
network failure would, and answers {"dropped":N}.

Flags:
`

// settings is the parsed command line.
type settings struct {
	port                     int
	apiKey, dir              string
	transitionDelay, latency time.Duration
	diskBytes                int64
	// network is -rtt and -bandwidth; tls is -tls.
	network            daytonatest.Network
	tls                bool
	stopOnEOF, verbose bool
	isolation          daytonatest.Isolation
	// daemonCost charges the daemon's labeler cost; structuredErrors
	// answers lost sessions as newer daemons do; toolbox sends every
	// sandbox's toolbox calls to a real daemon (docs/emulator.md).
	daemonCost, structuredErrors bool
	toolbox                      string
}

// parseArgs parses the command line. help is true when it printed the
// usage to stdout (for -h, -help, --help).
func parseArgs(args []string, stdout io.Writer) (st settings, help bool, err error) {
	fs := flag.NewFlagSet("daytona-sim", flag.ContinueOnError)
	// Errors are reported by main as one line; help goes to stdout in full.
	fs.SetOutput(io.Discard)
	fs.IntVar(&st.port, "port", 0, "TCP port on 127.0.0.1 (0 picks a free one)")
	fs.StringVar(&st.apiKey, "api-key", "", "bearer token to accept (default: random)")
	fs.StringVar(&st.dir, "dir", "", "directory for the sandbox trees (default: a temp dir removed on exit)")
	fs.DurationVar(&st.transitionDelay, "transition-delay", 0, "duration of each intermediate lifecycle state (default 5ms)")
	// A Func, not a Duration flag: the flag package reports a bad
	// Duration as a bare "parse error".
	fs.Func("latency", "`duration` to hold every request and WebSocket upgrade, e.g. 40ms (default 0)", func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return errors.New("want a non-negative duration such as 40ms")
		}
		st.latency = d
		return nil
	})
	fs.Func("rtt", "round trip `duration` of the network to every connection, e.g. 40ms (default 0)", func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return errors.New("want a non-negative duration such as 40ms")
		}
		st.network.RTT = d
		return nil
	})
	fs.Func("bandwidth", "`bytes` per second each direction of each connection may carry (default 0: unlimited)", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return errors.New("want bytes per second, a non-negative integer such as 1048576")
		}
		st.network.Bandwidth = n
		return nil
	})
	fs.BoolVar(&st.tls, "tls", false, "serve https and wss with a self-signed certificate made at start (its file is the ready line's caCertFile)")
	fs.Int64Var(&st.diskBytes, "disk-bytes", 0, "disk allocation of every new sandbox in bytes (default: its disk GiB)")
	fs.Func("isolation", "`mode` of sandbox isolation: auto, off or userns (default auto, or $"+daytonatest.IsolationEnv+")", func(v string) error {
		switch i := daytonatest.Isolation(v); i {
		case daytonatest.IsolationAuto, daytonatest.IsolationOff, daytonatest.IsolationUserNS:
			st.isolation = i
			return nil
		}
		return errors.New("want auto, off or userns")
	})
	fs.BoolVar(&st.daemonCost, "daemon-cost", false, "charge the session path what the real daemon's per-line labeler costs (3.1 µs a line, 0.15 µs a byte)")
	fs.BoolVar(&st.structuredErrors, "structured-errors", false, "answer an exec on a lost session or dead shell with a newer daemon's 410 SESSION_ENDED instead of v0.190.0's 500")
	fs.StringVar(&st.toolbox, "toolbox-upstream", "", "`URL` of a real toolbox daemon on loopback that serves every sandbox's toolbox calls (docs/emulator.md#a-real-daemon-behind-the-emulator)")
	fs.BoolVar(&st.stopOnEOF, "stop-on-eof", false, "also stop when stdin reaches EOF (for a parent that holds a stdin pipe)")
	fs.BoolVar(&st.verbose, "v", false, "log emulator events to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usageHead)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return st, true, nil
		}
		return st, false, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return st, false, usagef("unexpected argument %q", fs.Arg(0))
	}
	if st.port < 0 || st.port > 65535 {
		return st, false, usagef("invalid -port %d", st.port)
	}
	return st, false, nil
}

// options are the emulator options the settings ask for.
func (st settings) options(stderr io.Writer) []daytonatest.Option {
	var opts []daytonatest.Option
	if st.apiKey != "" {
		opts = append(opts, daytonatest.WithAPIKey(st.apiKey))
	}
	if st.dir != "" {
		opts = append(opts, daytonatest.WithDir(st.dir))
	}
	if st.transitionDelay > 0 {
		opts = append(opts, daytonatest.WithTransitionDelay(st.transitionDelay))
	}
	if st.latency > 0 {
		opts = append(opts, daytonatest.WithLatency(st.latency))
	}
	if st.network != (daytonatest.Network{}) {
		opts = append(opts, daytonatest.WithNetwork(st.network))
	}
	if st.tls {
		opts = append(opts, daytonatest.WithTLS())
	}
	if st.diskBytes > 0 {
		opts = append(opts, daytonatest.WithDiskBytes(st.diskBytes))
	}
	if st.isolation != "" {
		opts = append(opts, daytonatest.WithIsolation(st.isolation))
	}
	if st.daemonCost {
		opts = append(opts, daytonatest.WithLabelerCost(daytonatest.DaemonLabelerCost))
	}
	if st.structuredErrors {
		opts = append(opts, daytonatest.WithStructuredErrors())
	}
	if st.toolbox != "" {
		opts = append(opts, daytonatest.WithToolboxUpstream(st.toolbox))
	}
	if st.verbose {
		opts = append(opts, daytonatest.WithLogf(func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }))
	}
	return opts
}

// writeCert writes the -tls certificate to a file of its own (removed
// when daytona-sim stops) and returns its path.
func writeCert(pem []byte) (string, error) {
	f, err := os.CreateTemp("", "daytona-sim-cert-*.pem")
	if err != nil {
		return "", err
	}
	_, err = f.Write(pem)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// Run serves the emulator until ctx ends, or until stdin reaches EOF when
// -stop-on-eof is given, so that a parent that spawned it with a stdin pipe
// can stop it by closing the pipe. Without the flag stdin is ignored, so
// `daytona-sim </dev/null &` keeps serving. Logs go to stderr. Without -dir
// the sandbox trees live in a temporary directory that is removed on exit.
// It returns nil on a clean stop.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	st, help, err := parseArgs(args, stdout)
	if err != nil || help {
		return err
	}
	srv := daytonatest.New(st.options(stderr)...)
	defer srv.Close()
	apiURL, err := srv.Start("127.0.0.1:" + strconv.Itoa(st.port))
	if err != nil {
		return err
	}
	r := ready{
		APIURL: apiURL, APIKey: srv.APIKey(), ToolboxProxyURL: srv.ToolboxURL(),
		OrganizationID: srv.OrganizationID(), Dir: srv.Dir(),
	}
	if pem := srv.CertPEM(); pem != nil {
		f, err := writeCert(pem)
		if err != nil {
			return err
		}
		defer os.Remove(f)
		r.CACertFile = f
		fmt.Fprintf(stderr, "daytona-sim: TLS certificate in %s (trust it with SSL_CERT_FILE=%s)\n", f, f)
	}
	line, _ := json.Marshal(r)
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "daytona-sim: serving %s\n", apiURL)

	eof := make(chan struct{})
	if st.stopOnEOF && stdin != nil {
		// This goroutine may outlive Run if stdin never ends; it only reads.
		go func() {
			_, _ = io.Copy(io.Discard, stdin)
			close(eof)
		}()
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(stderr, "daytona-sim: signal, stopping")
	case <-eof:
		fmt.Fprintln(stderr, "daytona-sim: stdin closed, stopping")
	}
	return nil
}
