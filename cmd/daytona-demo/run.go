package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Run is the demo with explicit I/O.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("daytona-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workerBin := fs.String("worker", "bin/daytona-worker", "worker binary")
	simBin := fs.String("sim", "bin/daytona-sim", "emulator binary (used without DAYTONA_API_KEY)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := map[string]any{"timeoutMs": 300000, "reuseLease": true}
	target := "real Daytona"
	if key := strings.TrimSpace(os.Getenv("DAYTONA_API_KEY")); key == "" {
		sim, err := startSim(ctx, *simBin)
		if err != nil {
			return err
		}
		defer sim.stop()
		cfg["apiUrl"], cfg["apiKey"] = sim.apiURL, sim.apiKey
		target = "the Daytona emulator at " + sim.apiURL
	} else {
		if u := os.Getenv("DAYTONA_API_URL"); u != "" {
			cfg["apiUrl"] = u
		}
		if t := os.Getenv("DAYTONA_TARGET"); t != "" {
			cfg["target"] = t
		}
	}
	w, err := startWorker(ctx, *workerBin, stdout)
	if err != nil {
		return err
	}
	defer w.kill()
	fmt.Fprintf(stdout, "daytona-demo: a lease lifecycle against %s\n", target)
	d := &demo{w: w, out: stdout, cfg: cfg}
	return d.run(ctx)
}

type demo struct {
	w       *worker
	out     io.Writer
	cfg     map[string]any
	methods []string
}

func (d *demo) step(ctx context.Context, name, method string, params any, timeout time.Duration, show func(json.RawMessage) string) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	res, err := d.w.call(ctx, method, params)
	took := time.Since(start)
	if err != nil {
		fmt.Fprintf(d.out, "  FAIL %-22s %8.1f ms  %v\n", name, ms(took), err)
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	detail := ""
	if show != nil {
		detail = show(res)
	}
	fmt.Fprintf(d.out, "  ok   %-22s %8.1f ms  %s\n", name, ms(took), detail)
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (d *demo) run(ctx context.Context) error {
	const company, environment = "demo-company", "demo-environment"
	base := func(cfg map[string]any) map[string]any {
		return map[string]any{"driverKey": "daytona", "companyId": company, "environmentId": environment, "issueId": nil, "config": cfg}
	}
	invocation := func(p map[string]any) map[string]any { return p }
	res, err := d.step(ctx, "initialize", "initialize", map[string]any{"manifest": map[string]any{}, "config": map[string]any{},
		"instanceInfo": map[string]any{"instanceId": "demo", "hostVersion": "demo"}, "apiVersion": 1}, 15*time.Second,
		func(r json.RawMessage) string {
			var v struct {
				SupportedMethods []string `json:"supportedMethods"`
			}
			_ = json.Unmarshal(r, &v)
			d.methods = v.SupportedMethods
			return fmt.Sprintf("%d methods", len(v.SupportedMethods))
		})
	if err != nil {
		return err
	}
	_ = res
	res, err = d.step(ctx, "validate config", "environmentValidateConfig", map[string]any{"driverKey": "daytona", "config": d.cfg}, 30*time.Second,
		func(r json.RawMessage) string { return "ok" })
	if err != nil {
		return err
	}
	var v struct {
		OK               bool           `json:"ok"`
		Errors           []string       `json:"errors"`
		NormalizedConfig map[string]any `json:"normalizedConfig"`
	}
	_ = json.Unmarshal(res, &v)
	if !v.OK {
		return fmt.Errorf("config rejected: %s", strings.Join(v.Errors, "; "))
	}
	cfg := v.NormalizedConfig
	budget := 330 * time.Second

	type lease struct {
		ProviderLeaseID *string        `json:"providerLeaseId"`
		Metadata        map[string]any `json:"metadata"`
	}
	var l lease
	_, err = d.step(ctx, "acquire lease", "environmentAcquireLease", invocation(with(base(cfg), "runId", "demo-run",
		"agentId", "demo-agent", "executionWorkspaceId", "demo-workspace", "adapterType", "claude_local")), budget,
		func(r json.RawMessage) string {
			_ = json.Unmarshal(r, &l)
			if l.ProviderLeaseID == nil {
				return "no lease"
			}
			return fmt.Sprintf("sandbox %s (%v), cwd %v, shell %v", *l.ProviderLeaseID, l.Metadata["sandboxName"], l.Metadata["remoteCwd"], l.Metadata["shellCommand"])
		})
	if err != nil || l.ProviderLeaseID == nil {
		return errors.Join(err, errors.New("no lease"))
	}
	id := *l.ProviderLeaseID
	leaseCfg := merge(cfg, l.Metadata)
	destroyed := false
	defer func() {
		if !destroyed { // never leave a sandbox behind, whatever failed
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
			defer cancel()
			_, _ = d.step(dctx, "destroy (cleanup)", "environmentDestroyLease", with(base(leaseCfg), "providerLeaseId", id, "leaseMetadata", l.Metadata), budget, nil)
		}
	}()
	leaseObj := map[string]any{"providerLeaseId": id, "metadata": l.Metadata}
	if _, err = d.step(ctx, "realize workspace", "environmentRealizeWorkspace", with(base(leaseCfg), "lease", leaseObj,
		"workspace", map[string]any{"remotePath": l.Metadata["remoteCwd"]}), budget, func(r json.RawMessage) string { return string(r) }); err != nil {
		return err
	}
	if slices.Contains(d.methods, "environmentExecute") {
		if _, err = d.step(ctx, "execute", "environmentExecute", with(base(leaseCfg), "lease", leaseObj, "command", "bash",
			"args", []string{"-c", "echo hello from $(uname -s) in $PWD; echo to stderr >&2"}, "timeoutMs", 60000), budget,
			func(r json.RawMessage) string {
				var x struct {
					ExitCode *int   `json:"exitCode"`
					Stdout   string `json:"stdout"`
				}
				_ = json.Unmarshal(r, &x)
				return fmt.Sprintf("exit %v, stdout %q, %d live chunks", deref(x.ExitCode), strings.TrimSpace(x.Stdout), d.w.logChunks())
			}); err != nil {
			return err
		}
	}
	if slices.Contains(d.methods, "environmentSyncIn") && slices.Contains(d.methods, "environmentSyncOut") {
		if err := d.syncRoundTrip(ctx, base(leaseCfg), leaseObj, l.Metadata, budget); err != nil {
			return err
		}
	}
	if _, err = d.step(ctx, "release lease", "environmentReleaseLease", with(base(leaseCfg), "providerLeaseId", id, "leaseMetadata", l.Metadata), budget,
		func(r json.RawMessage) string { return string(r) }); err != nil {
		return err
	}
	var r lease
	if _, err = d.step(ctx, "resume lease", "environmentResumeLease", with(base(cfg), "providerLeaseId", id, "leaseMetadata", l.Metadata), budget,
		func(raw json.RawMessage) string {
			_ = json.Unmarshal(raw, &r)
			if r.ProviderLeaseID == nil {
				return "not resumable"
			}
			s, _ := r.Metadata["workspaceSentinel"].(map[string]any)
			return fmt.Sprintf("resumed from %v, sentinel %v", r.Metadata["resumedFromState"], s["result"])
		}); err != nil {
		return err
	}
	if r.ProviderLeaseID != nil {
		l.Metadata = r.Metadata
		leaseCfg = merge(cfg, r.Metadata)
	}
	if _, err = d.step(ctx, "destroy lease", "environmentDestroyLease", with(base(leaseCfg), "providerLeaseId", id, "leaseMetadata", l.Metadata), budget,
		func(r json.RawMessage) string { return string(r) }); err != nil {
		return err
	}
	destroyed = true
	if _, err = d.step(ctx, "health", "health", map[string]any{}, 30*time.Second, func(r json.RawMessage) string { return string(r) }); err != nil {
		return err
	}
	start := time.Now()
	if _, err = d.step(ctx, "shutdown", "shutdown", map[string]any{}, 10*time.Second, nil); err != nil {
		return err
	}
	code := d.w.wait(10 * time.Second)
	fmt.Fprintf(d.out, "  ok   %-22s %8.1f ms  exit code %d\n", "worker exited", ms(time.Since(start)), code)
	if code != 0 {
		return fmt.Errorf("worker exit code %d", code)
	}
	return nil
}

// syncRoundTrip pushes a small tree in and pulls it back.
func (d *demo) syncRoundTrip(ctx context.Context, base, leaseObj, md map[string]any, budget time.Duration) error {
	src, err := os.MkdirTemp("", "daytona-demo-in-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	dst, err := os.MkdirTemp("", "daytona-demo-out-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dst)
	_ = os.WriteFile(filepath.Join(src, "hello.txt"), []byte("hello from the host\n"), 0o644)
	_ = os.MkdirAll(filepath.Join(src, "nested"), 0o755)
	_ = os.WriteFile(filepath.Join(src, "nested", "data.bin"), []byte{0, 1, 2, 3, 255}, 0o600)
	remote := fmt.Sprint(md["remoteCwd"]) + "/demo-sync"
	counts := func(r json.RawMessage) string { return string(r) }
	if _, err := d.step(ctx, "sync in", "environmentSyncIn", with(base, "lease", leaseObj, "operations", []any{map[string]any{
		"operationId": "demo-in", "files": []any{map[string]any{"sourcePath": src, "targetPath": remote, "kind": "directory"}}}}), budget, counts); err != nil {
		return err
	}
	out := filepath.Join(dst, "tree")
	if _, err := d.step(ctx, "sync out", "environmentSyncOut", with(base, "lease", leaseObj, "operations", []any{map[string]any{
		"operationId": "demo-out", "files": []any{map[string]any{"sourcePath": remote, "targetPath": out, "kind": "directory"}}}}), budget, counts); err != nil {
		return err
	}
	got, err := os.ReadFile(filepath.Join(out, "hello.txt"))
	if err != nil || string(got) != "hello from the host\n" {
		return fmt.Errorf("sync round trip lost hello.txt: %v", err)
	}
	return nil
}

func with(m map[string]any, kv ...any) map[string]any {
	out := merge(m)
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func merge(ms ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// sim is cmd/daytona-sim as a child process.
type sim struct {
	cmd            *osexec.Cmd
	stdin          io.WriteCloser
	apiURL, apiKey string
}

func startSim(ctx context.Context, bin string) (*sim, error) {
	// -stop-on-eof: closing the pipe stops it, and so does our own death.
	cmd := osexec.CommandContext(ctx, bin, "-stop-on-eof")
	stdin, out, err := startPiped(cmd)
	if err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("emulator did not start: %w", err)
	}
	var ready struct {
		APIURL string `json:"apiUrl"`
		APIKey string `json:"apiKey"`
	}
	if err := json.Unmarshal([]byte(line), &ready); err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	return &sim{cmd: cmd, stdin: stdin, apiURL: ready.APIURL, apiKey: ready.APIKey}, nil
}

// startPiped starts cmd with pipes to its stdin and from its stdout; its
// stderr is ours, so the child's logs show next to the demo's steps.
func startPiped(cmd *osexec.Cmd) (io.WriteCloser, io.ReadCloser, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s (run `make build` first): %w", cmd.Args[0], err)
	}
	return stdin, stdout, nil
}

func (s *sim) stop() {
	_ = s.stdin.Close() // it stops at stdin EOF (-stop-on-eof)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
	}
}

// worker is the worker process and a minimal JSON-RPC client of it.
type worker struct {
	cmd   *osexec.Cmd
	stdin io.WriteCloser
	out   io.Writer

	mu      sync.Mutex
	nextID  int
	pending map[int]chan response
	chunks  int
	exited  chan int
}

type response struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func startWorker(ctx context.Context, bin string, out io.Writer) (*worker, error) {
	cmd := osexec.Command(bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "NODE_ENV=production", "TZ=UTC"}
	if key := os.Getenv("DAYTONA_API_KEY"); key != "" {
		cmd.Env = append(cmd.Env, "DAYTONA_API_KEY="+key)
	}
	stdin, stdout, err := startPiped(cmd)
	if err != nil {
		return nil, err
	}
	w := &worker{cmd: cmd, stdin: stdin, out: out, pending: map[int]chan response{}, exited: make(chan int, 1)}
	go w.read(stdout)
	return w, nil
}

func (w *worker) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var f struct {
				ID     *int            `json:"id"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
				response
			}
			if json.Unmarshal(line, &f) == nil {
				switch {
				case f.Method == "execute.log":
					var p struct{ Stream, Chunk string }
					_ = json.Unmarshal(f.Params, &p)
					w.mu.Lock()
					w.chunks++
					w.mu.Unlock()
					for _, l := range strings.Split(strings.TrimRight(p.Chunk, "\n"), "\n") {
						fmt.Fprintf(w.out, "       | %s: %s\n", p.Stream, l)
					}
				case f.ID != nil && f.Method == "":
					w.mu.Lock()
					ch := w.pending[*f.ID]
					delete(w.pending, *f.ID)
					w.mu.Unlock()
					if ch != nil {
						ch <- f.response
					}
				}
			}
		}
		if err != nil {
			code := 0
			if werr := w.cmd.Wait(); werr != nil {
				var ee *osexec.ExitError
				if errors.As(werr, &ee) {
					code = ee.ExitCode()
				} else {
					code = -1
				}
			}
			w.exited <- code
			return
		}
	}
}

func (w *worker) logChunks() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.chunks
	w.chunks = 0
	return n
}

func (w *worker) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	w.mu.Lock()
	w.nextID++
	id := w.nextID
	ch := make(chan response, 1)
	w.pending[id] = ch
	w.mu.Unlock()
	frame := map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params,
		"paperclipInvocation": map[string]any{"id": fmt.Sprintf("00000000-0000-4000-8000-%012d", id), "scope": map[string]any{"companyId": "demo-company"}}}
	b, err := json.Marshal(frame)
	if err != nil {
		return nil, err
	}
	if _, err := w.stdin.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return nil, fmt.Errorf("error %d: %s", r.Error.Code, r.Error.Message)
		}
		return r.Result, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: no answer: %w", method, ctx.Err())
	}
}

func (w *worker) wait(d time.Duration) int {
	select {
	case code := <-w.exited:
		return code
	case <-time.After(d):
		_ = w.cmd.Process.Kill()
		return -1
	}
}

func (w *worker) kill() {
	_ = w.stdin.Close()
	_ = w.cmd.Process.Kill()
}
