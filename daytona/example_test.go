package daytona_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
)

// Example creates a sandbox on the local emulator, runs a command in a
// session with its output followed over WebSocket, and deletes the sandbox.
func Example() {
	emu := daytonatest.New()
	defer emu.Close()
	apiURL, err := emu.Start("127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	ctx := context.Background()
	c, err := daytona.NewClient(daytona.WithAPIURL(apiURL), daytona.WithAPIKey(emu.APIKey()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}

	sb, _, err := c.Sandboxes.Create(ctx, &daytona.CreateSandboxRequest{
		Name: "example-sandbox", Snapshot: "base", Labels: map[string]string{"purpose": "example"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	if sb, err = c.Sandboxes.WaitUntilStarted(ctx, sb.ID); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	ref := sb.Ref()
	if _, err := c.Toolbox.CreateSession(ctx, ref, "main"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	ex, _, err := c.Toolbox.ExecuteSessionCommand(ctx, ref, "main", &daytona.SessionExecuteRequest{
		Command: "( echo hello; echo warning >&2 )", RunAsync: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	var out, errs strings.Builder
	err = c.Toolbox.FollowSessionCommandLogs(ctx, ref, "main", ex.CmdID, nil, func(ch daytona.LogChunk) error {
		if ch.Stream == daytona.Stdout {
			out.Write(ch.Data)
		} else {
			errs.Write(ch.Data)
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Printf("stdout %q, stderr %q\n", out.String(), errs.String())

	if err := c.Sandboxes.DeleteAndWait(ctx, sb.ID); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	_, _, err = c.Sandboxes.Get(ctx, sb.ID)
	fmt.Println("gone:", errors.Is(err, daytona.ErrNotFound))
	// Output:
	// stdout "hello\n", stderr "warning\n"
	// gone: true
}
