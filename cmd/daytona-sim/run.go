package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
)

// usageError is a command-line mistake (exit code 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func exitCode(err error) int {
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// ready is the one line printed on stdout once the emulator listens.
type ready struct {
	APIURL          string `json:"apiUrl"`
	APIKey          string `json:"apiKey"`
	ToolboxProxyURL string `json:"toolboxProxyUrl"`
	OrganizationID  string `json:"organizationId"`
	Dir             string `json:"dir"`
}

// Run serves the emulator until ctx ends or stdin reaches EOF (unless
// -stdin-eof=false). It returns nil on a clean stop.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("daytona-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", 0, "TCP port on 127.0.0.1 (0 picks a free one)")
	apiKey := fs.String("api-key", "", "bearer token to accept (default: random)")
	dir := fs.String("dir", "", "directory for the sandbox trees (default: a temp dir removed on exit)")
	delay := fs.Duration("transition-delay", 0, "duration of each intermediate lifecycle state (default 5ms)")
	disk := fs.Int64("disk-bytes", 0, "disk allocation of every new sandbox in bytes (default: its disk GiB)")
	stdinEOF := fs.Bool("stdin-eof", true, "stop when stdin reaches EOF")
	verbose := fs.Bool("v", false, "log emulator events to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return &usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if *port < 0 || *port > 65535 {
		return &usageError{fmt.Sprintf("invalid -port %d", *port)}
	}
	var opts []daytonatest.Option
	if *apiKey != "" {
		opts = append(opts, daytonatest.WithAPIKey(*apiKey))
	}
	if *dir != "" {
		opts = append(opts, daytonatest.WithDir(*dir))
	}
	if *delay > 0 {
		opts = append(opts, daytonatest.WithTransitionDelay(*delay))
	}
	if *disk > 0 {
		opts = append(opts, daytonatest.WithDiskBytes(*disk))
	}
	if *verbose {
		opts = append(opts, daytonatest.WithLogf(func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }))
	}
	srv := daytonatest.New(opts...)
	defer srv.Close()
	apiURL, err := srv.Start("127.0.0.1:" + strconv.Itoa(*port))
	if err != nil {
		return err
	}
	line, _ := json.Marshal(ready{
		APIURL: apiURL, APIKey: srv.APIKey(), ToolboxProxyURL: srv.ToolboxURL(),
		OrganizationID: srv.OrganizationID(), Dir: srv.Dir(),
	})
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "daytona-sim: serving %s\n", apiURL)

	eof := make(chan struct{})
	if *stdinEOF && stdin != nil {
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
