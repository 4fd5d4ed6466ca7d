package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/daytonaworker/daytona-worker/internal/cli"
)

// Run is the demo with explicit I/O.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// The worker's log reader and a step's progress line print at the same
	// time; one lock keeps their lines whole (and the writer race-free).
	stdout = &lockedWriter{w: stdout}
	fs := flag.NewFlagSet("daytona-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workerBin := fs.String("worker", "bin/daytona-worker", "worker binary")
	simBin := fs.String("sim", "bin/daytona-sim", "emulator binary (used without DAYTONA_API_KEY)")
	verbose := fs.Bool("v", false, "also print each step's raw JSON result")
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
		apiURL := defaultAPIURL
		if u := os.Getenv("DAYTONA_API_URL"); u != "" {
			cfg["apiUrl"], apiURL = u, u
		}
		if t := os.Getenv("DAYTONA_TARGET"); t != "" {
			cfg["target"] = t
		}
		target = "Daytona at " + cli.ShownURL(apiURL)
	}
	w, err := startWorker(ctx, *workerBin, stdout)
	if err != nil {
		return err
	}
	defer w.kill()
	fmt.Fprintf(stdout, "daytona-demo: a lease lifecycle against %s\n", target)
	d := &demo{w: w, out: stdout, cfg: cfg, verbose: *verbose}
	start := time.Now()
	err = d.run(ctx)
	d.summary(time.Since(start), err)
	return err
}

// defaultAPIURL is the worker's endpoint when the config names none.
const defaultAPIURL = "https://app.daytona.io/api"

type demo struct {
	w       *worker
	out     io.Writer
	cfg     map[string]any
	methods []string
	verbose bool
	steps   int
	failed  string
}

// Progress lines: a step still running after progressAfter says so, and
// again every progressEvery.
const (
	progressAfter = time.Second
	progressEvery = 5 * time.Second
)

func (d *demo) step(ctx context.Context, name, method string, params any, timeout time.Duration, show func(json.RawMessage) string) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	stop := d.progress(name, start)
	res, err := d.w.call(ctx, method, params)
	stop()
	took := time.Since(start)
	d.steps++
	if err != nil {
		if d.failed == "" {
			d.failed = name
		}
		fmt.Fprintf(d.out, "  FAIL %-22s %8.1f ms  %v\n", name, ms(took), err)
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	detail := ""
	if show != nil {
		detail = show(res)
	}
	fmt.Fprintf(d.out, "  ok   %-22s %8.1f ms  %s\n", name, ms(took), detail)
	if d.verbose {
		fmt.Fprintf(d.out, "       %s\n", res)
	}
	return res, nil
}

// progress prints a line while a step runs longer than progressAfter; the
// returned stop ends it before the step's own line is printed.
func (d *demo) progress(name string, start time.Time) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTimer(progressAfter)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(d.out, "  ...  %-22s still running after %.0f s\n", name, time.Since(start).Seconds())
				t.Reset(progressEvery)
			}
		}
	}()
	return func() { close(done); <-finished }
}

// summary is the closing line: how many steps, the outcome, the total time.
func (d *demo) summary(total time.Duration, err error) {
	if err == nil {
		fmt.Fprintf(d.out, "daytona-demo: %d steps ok in %.1f s\n", d.steps, total.Seconds())
		return
	}
	fmt.Fprintf(d.out, "daytona-demo: failed at %q after %d steps in %.1f s\n", d.failed, d.steps, total.Seconds())
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
	if err != nil {
		// An uncertain create: finish the cleanup the host would.
		var re *rpcError
		if errors.As(err, &re) {
			if env := re.envelope(); env != nil {
				return errors.Join(err, d.finishFailedCreate(ctx, base(cfg), env))
			}
		}
		return err
	}
	if l.ProviderLeaseID == nil {
		return errors.New("acquire lease: the worker returned no lease")
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
		"workspace", map[string]any{"remotePath": l.Metadata["remoteCwd"]}), budget, field("cwd")); err != nil {
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
		field("state")); err != nil {
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
		field("state")); err != nil {
		return err
	}
	destroyed = true
	if _, err = d.step(ctx, "health", "health", map[string]any{}, 30*time.Second, field("status")); err != nil {
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
	counts := func(r json.RawMessage) string {
		var v struct {
			Operations []struct {
				FilesTransferred int64 `json:"filesTransferred"`
				BytesTransferred int64 `json:"bytesTransferred"`
			} `json:"operations"`
		}
		_ = json.Unmarshal(r, &v)
		var files, size int64
		for _, op := range v.Operations {
			files, size = files+op.FilesTransferred, size+op.BytesTransferred
		}
		return fmt.Sprintf("%d files, %d bytes", files, size)
	}
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

// field shows one top-level field of a result as name=value.
func field(name string) func(json.RawMessage) string {
	return func(r json.RawMessage) string {
		var v map[string]any
		_ = json.Unmarshal(r, &v)
		return fmt.Sprintf("%s %v", name, v[name])
	}
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

// lockedWriter serialises writes from the demo's goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
