package daytona_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
)

// liveLabel marks every sandbox the live test creates, for sweeps.
const liveLabel = "daytona-worker-test"

// TestLiveDaytona runs the client's main scenario against real Daytona
// (test tier 3). It is skipped unless DAYTONA_API_KEY is set; optional
// DAYTONA_API_URL, DAYTONA_TARGET and DAYTONA_TEST_SNAPSHOT select the
// endpoint, region and snapshot. The sandbox carries the label
// daytona-worker-test=client and is deleted (and waited for) at the end.
func TestLiveDaytona(t *testing.T) {
	key := os.Getenv("DAYTONA_API_KEY")
	if key == "" {
		t.Skip("live Daytona test: set DAYTONA_API_KEY to run it")
	}
	opts := []daytona.Option{daytona.WithAPIKey(key)}
	if u := os.Getenv("DAYTONA_API_URL"); u != "" {
		opts = append(opts, daytona.WithAPIURL(u))
	}
	if tg := os.Getenv("DAYTONA_TARGET"); tg != "" {
		opts = append(opts, daytona.WithTarget(tg))
	}
	c, err := daytona.NewClient(opts...)
	require.NoError(t, err)
	ctx := t.Context()

	sb, _, err := c.Sandboxes.Create(ctx, &daytona.CreateSandboxRequest{
		Name: liveLabel + "-" + testName(), Snapshot: os.Getenv("DAYTONA_TEST_SNAPSHOT"),
		Labels:           map[string]string{liveLabel: "client"},
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
	res, _, err := c.Toolbox.Execute(ctx, ref, &daytona.ExecuteRequest{Command: "echo live-ok"})
	require.NoError(t, err)
	assert.Contains(t, res.Result, "live-ok")

	_, err = c.Toolbox.CreateSession(ctx, ref, "live")
	require.NoError(t, err)
	ex, _, err := c.Toolbox.ExecuteSessionCommand(ctx, ref, "live", &daytona.SessionExecuteRequest{
		Command: "( echo out; echo err >&2 )", RunAsync: true})
	require.NoError(t, err)
	var out, errb bytes.Buffer
	err = c.Toolbox.FollowSessionCommandLogs(ctx, ref, "live", ex.CmdID, nil, splitLogs(t, &out, &errb))
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

	found, err := c.Sandboxes.ListAll(ctx, &daytona.ListOptions{Labels: map[string]string{liveLabel: "client"}})
	require.NoError(t, err)
	var ids []string
	for _, s := range found {
		ids = append(ids, s.ID)
	}
	assert.Contains(t, ids, sb.ID)
}
