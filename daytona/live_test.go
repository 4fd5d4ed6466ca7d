package daytona

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/livetest"
)

// The client's live test (test tier 3) labels every sandbox it creates
// with liveLabel=client and liveRunLabel=liveRun; liveMain, which TestMain
// runs the tests through, sweeps this run's sandboxes after them and,
// shortly before a -timeout would kill the binary, from a watchdog.
const (
	liveLabel    = "daytona-worker-test"
	liveRunLabel = "daytona-worker-test-run"
	// liveSweepReserve is how long before the binary's -timeout the
	// watchdog sweeps; liveSweepBound bounds one sweep.
	liveSweepReserve = 3 * time.Minute
	liveSweepBound   = 5 * time.Minute
)

var liveRun = "live-" + uuid.NewString()

func liveLabels() map[string]string {
	return map[string]string{liveLabel: "client", liveRunLabel: liveRun}
}

// liveMain runs the tests (run) and, when the live tier is on, sweeps this
// run's sandboxes afterwards; a passing run that left one behind fails.
func liveMain(run func() int, getenv func(string) string, log io.Writer) int {
	acct, skip, err := livetest.Gate(getenv)
	if err != nil || skip != "" {
		return run()
	}
	c, err := liveClient(acct)
	if err != nil {
		fmt.Fprintln(log, "live sweeper:", err)
		return 1
	}
	var once sync.Once
	left := 0
	sweep := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), liveSweepBound)
			defer cancel()
			deleted, err := liveSweep(ctx, c.Sandboxes, liveLabels())
			if len(deleted) > 0 || err != nil {
				fmt.Fprintf(log, "live sweeper: deleted %v, errors: %v\n", deleted, err)
			}
			left = len(deleted)
		})
	}
	if !flag.Parsed() {
		flag.Parse() // m.Run would; the timeout is needed before it
	}
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > liveSweepReserve {
			w := time.AfterFunc(d-liveSweepReserve, sweep)
			defer w.Stop()
		}
	}
	code := run()
	sweep()
	if left > 0 && code == 0 {
		fmt.Fprintf(log, "live test left %d sandboxes behind (now swept)\n", left)
		code = 1
	}
	return code
}

// liveSweep deletes (and waits for) every sandbox that carries all of
// labels, re-checking each listed sandbox's labels itself.
func liveSweep(ctx context.Context, s *SandboxesService, labels map[string]string) ([]string, error) {
	found, err := s.ListAll(ctx, &ListOptions{Labels: labels})
	if err != nil {
		return nil, err
	}
	var deleted []string
	var errs []error
	for _, sb := range found {
		match := true
		for k, v := range labels {
			match = match && sb.Labels[k] == v
		}
		if !match {
			continue
		}
		if err := s.DeleteAndWait(ctx, sb.ID); err != nil {
			errs = append(errs, fmt.Errorf("sweep %s: %w", sb.ID, err))
			continue
		}
		deleted = append(deleted, sb.ID)
	}
	return deleted, errors.Join(errs...)
}

func liveClient(a livetest.Account) (*Client, error) {
	opts := []Option{WithAPIKey(a.APIKey)}
	if a.APIURL != "" {
		opts = append(opts, WithAPIURL(a.APIURL))
	}
	if a.Target != "" {
		opts = append(opts, WithTarget(a.Target))
	}
	return NewClient(opts...)
}

// TestLiveSweeperRemovesOnlyThisRun runs the sweeper against the emulator,
// whose listing ignores the label filter: only its own re-check keeps the
// other run's and the unlabelled sandbox alive.
func TestLiveSweeperRemovesOnlyThisRun(t *testing.T) {
	srv := daytonatest.New()
	url, err := srv.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c, err := NewClient(WithAPIKey(srv.APIKey()), WithAPIURL(url))
	require.NoError(t, err)
	ctx := t.Context()
	create := func(labels map[string]string) string {
		sb, _, err := c.Sandboxes.Create(ctx, &CreateSandboxRequest{Name: "t-" + uuid.NewString()[:8], Labels: labels})
		require.NoError(t, err)
		return sb.ID
	}
	mine := create(liveLabels())
	other := create(map[string]string{liveLabel: "client", liveRunLabel: "live-other"})
	plain := create(nil)
	srv.Inject(daytonatest.Fault{Method: "GET", Route: "/sandbox", ListIgnoresLabels: true})

	env := map[string]string{livetest.Env: "1", livetest.KeyEnv: srv.APIKey(), livetest.URLEnv: url}
	var log strings.Builder
	require.Equal(t, 1, liveMain(func() int { return 0 }, func(k string) string { return env[k] }, &log))
	assert.Contains(t, log.String(), "left 1 sandboxes behind")
	info, ok := srv.Sandbox(mine)
	assert.True(t, !ok || info.State == daytonatest.StateDestroyed, "this run's sandbox is swept")
	for _, id := range []string{other, plain} {
		info, ok = srv.Sandbox(id)
		assert.True(t, ok && info.State != daytonatest.StateDestroyed, "sandbox %s survives", id)
	}
	assert.Equal(t, 5, liveMain(func() int { return 5 }, func(string) string { return "" }, io.Discard), "no tier: the tests' code, no sweep")
}

// TestLiveDaytona runs the client's main scenario against real Daytona
// (test tier 3; livetest.Require says when). Optional DAYTONA_API_URL,
// DAYTONA_TARGET and DAYTONA_TEST_SNAPSHOT select the endpoint, region and
// snapshot. The sandbox carries this run's labels, is deleted (and waited
// for) at the end, and is swept by liveMain if that failed.
func TestLiveDaytona(t *testing.T) {
	acct := livetest.Require(t)
	c, err := liveClient(acct)
	require.NoError(t, err)
	ctx := t.Context()

	sb, _, err := c.Sandboxes.Create(ctx, &CreateSandboxRequest{
		Name: liveLabel + "-" + uuid.NewString()[:8], Snapshot: acct.Snapshot,
		Labels:           liveLabels(),
		AutoStopInterval: new(15), AutoDeleteInterval: new(60),
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		// t.Context is already canceled when cleanups run.
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		assert.NoError(t, c.Sandboxes.DeleteAndWait(cctx, sb.ID), "live sandbox %s not deleted", sb.ID)
	})
	sb, err = c.Sandboxes.WaitUntilStarted(ctx, sb.ID)
	require.NoError(t, err)
	ref := sb.Ref()

	home, _, err := c.Toolbox.UserHomeDir(ctx, ref)
	require.NoError(t, err)
	res, _, err := c.Toolbox.Execute(ctx, ref, &ExecuteRequest{Command: "echo live-ok"})
	require.NoError(t, err)
	assert.Contains(t, res.Result, "live-ok")

	_, err = c.Toolbox.CreateSession(ctx, ref, "live")
	require.NoError(t, err)
	ex, _, err := c.Toolbox.ExecuteSessionCommand(ctx, ref, "live", &SessionExecuteRequest{
		Command: "( echo out; echo err >&2 )", RunAsync: true})
	require.NoError(t, err)
	var out, errb bytes.Buffer
	err = c.Toolbox.FollowSessionCommandLogs(ctx, ref, "live", ex.CmdID, nil, func(ch LogChunk) error {
		b := &out
		if ch.Stream != Stdout {
			b = &errb
		}
		assert.EqualValues(t, b.Len(), ch.Offset)
		b.Write(ch.Data)
		return nil
	})
	require.NoError(t, err)
	logs, _, err := c.Toolbox.GetSessionCommandLogs(ctx, ref, "live", ex.CmdID, 0)
	require.NoError(t, err)
	assert.Equal(t, "out\n", logs.Stdout)
	assert.Equal(t, "err\n", logs.Stderr)
	assert.True(t, strings.HasPrefix(logs.Stdout, out.String()))

	_, err = c.Files.UploadFile(ctx, ref, home+"/live.txt", strings.NewReader("payload"))
	require.NoError(t, err)
	body, _, err := c.Files.Download(ctx, ref, home+"/live.txt")
	require.NoError(t, err)
	b, err := io.ReadAll(body)
	body.Close()
	require.NoError(t, err)
	assert.Equal(t, "payload", string(b))

	found, err := c.Sandboxes.ListAll(ctx, &ListOptions{Labels: liveLabels()})
	require.NoError(t, err)
	var ids []string
	for _, s := range found {
		ids = append(ids, s.ID)
	}
	assert.Contains(t, ids, sb.ID)
}
