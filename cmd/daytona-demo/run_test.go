package main

import (
	"bytes"
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// bin holds the worker and emulator binaries, built once for the package.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "daytona-demo-test-")
	if err != nil {
		panic(err)
	}
	bin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildErr  error
	buildOut  []byte
)

// hangGuard ends a demo that hangs; the demo's own steps carry their
// budgets (acquire 330 s), so a slow machine fails on them, not here.
const hangGuard = 6 * time.Minute

func binaries(t *testing.T) []string {
	t.Helper()
	buildOnce.Do(func() {
		for name, pkg := range map[string]string{"daytona-worker": "../daytona-worker", "daytona-sim": "../daytona-sim"} {
			if buildOut, buildErr = osexec.Command("go", "build", "-o", filepath.Join(bin, name), pkg).CombinedOutput(); buildErr != nil {
				return
			}
		}
	})
	require.NoError(t, buildErr, "%s", buildOut)
	return []string{"-worker", filepath.Join(bin, "daytona-worker"), "-sim", filepath.Join(bin, "daytona-sim")}
}

// TestDemoRunsAFullLifecycle is `make demo` in a test: the worker and the
// emulator as built binaries, every step answered, the sandbox destroyed,
// the worker exiting 0, a closing summary, and no raw JSON without -v.
// (DAYTONA_API_KEY is cleared: tests never reach real Daytona.)
func TestDemoRunsAFullLifecycle(t *testing.T) {
	t.Setenv("DAYTONA_API_KEY", "")
	// Built before the hang guard starts: a build on a busy machine is
	// not the demo's time.
	bins := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var out bytes.Buffer
	err := Run(ctx, bins, &out, os.Stderr)
	require.NoError(t, err, "%s", out.String())
	for _, step := range []string{"initialize", "acquire lease", "realize workspace", "execute", "sync in", "sync out",
		"release lease", "resume lease", "destroy lease", "health", "shutdown"} {
		require.Regexp(t, `(?m)^  ok   `+step+` `, out.String())
	}
	require.Regexp(t, `(?m)^daytona-demo: a lease lifecycle against the Daytona emulator at http://127\.0\.0\.1:\d+/api$`, out.String())
	require.Regexp(t, `(?m)^  ok   destroy lease .* state destroyed$`, out.String())
	require.Regexp(t, `(?m)^  ok   sync in .* 2 files, \d+ bytes$`, out.String())
	require.Contains(t, out.String(), "exit code 0")
	require.Regexp(t, `(?m)^daytona-demo: 12 steps ok in [0-9.]+ s$`, out.String())
	require.NotContains(t, out.String(), "FAIL")
	require.NotRegexp(t, `(?m)^\s*[{\[]`, out.String(), "raw JSON only with -v")
}

// watched is an output the test can wait on.
type watched struct {
	mu      sync.Mutex
	b       strings.Builder
	changed chan struct{}
}

func (w *watched) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
	return w.b.Write(p)
}

func (w *watched) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func (w *watched) await(ctx context.Context, t *testing.T, re *regexp.Regexp) {
	t.Helper()
	for !re.MatchString(w.String()) {
		select {
		case <-w.changed:
		case <-ctx.Done():
			t.Fatalf("never printed %s:\n%s", re, w.String())
		}
	}
}

// TestDemoFinishesAnUncertainCreate: a create Daytona carried out but
// answered with 500, whose inline cleanup also failed, is finished as the
// host would (destroy with the envelope) and leaves no sandbox; a step
// over a second gets a progress line; -v adds the raw JSON; the API URL
// and a closing summary are printed.
func TestDemoFinishesAnUncertainCreate(t *testing.T) {
	env := testenv.New(t)
	t.Setenv("DAYTONA_API_KEY", env.Server.APIKey())
	t.Setenv("DAYTONA_API_URL", env.Server.URL())
	gate := make(chan struct{})
	env.Server.Inject(daytonatest.Fault{Method: "POST", Route: "/sandbox", Gate: gate, Perform: true, Status: 500, Times: 1})
	env.Server.Inject(daytonatest.Fault{Method: "DELETE", Route: "/sandbox/{sandboxIdOrName}", Status: 500, Times: 1})
	args := append(binaries(t), "-v") // built before the hang guard starts
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	out := &watched{changed: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, args, out, os.Stderr) }()
	out.await(ctx, t, regexp.MustCompile(`(?m)^  \.\.\.  acquire lease\s+still running after 1 s$`))
	close(gate)
	err := <-done
	require.Error(t, err)
	s := out.String()
	assert.Contains(t, s, "daytona-demo: a lease lifecycle against Daytona at "+env.Server.URL()+"\n")
	assert.Regexp(t, `(?m)^  FAIL acquire lease `, s)
	assert.Regexp(t, `(?m)^       the create is uncertain: finishing the host's cleanup of paperclip-create-[0-9a-f-]+$`, s)
	assert.Regexp(t, `(?m)^  ok   cleanup failed create .* state destroyed$`, s)
	assert.Regexp(t, `(?m)^       \{"ok":true,"supportedMethods":\[`, s, "-v prints the raw results")
	assert.Regexp(t, `(?m)^daytona-demo: failed at "acquire lease" after \d+ steps in [0-9.]+ s$`, s)
	assert.NotContains(t, s, "may still exist")
	assert.Empty(t, env.Server.Sandboxes(), "the uncertain create left nothing")
}
