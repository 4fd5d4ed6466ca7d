package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/cli"
	"github.com/daytonaworker/daytona-worker/internal/jsvalue"
)

const sweepUsage = `usage: daytona-worker sweep [filters] [--delete] [account flags]

List the Daytona sandboxes this plugin created (the full set of its
ownership labels under its creation name) that match the filters, as a
table of name, state, age and labels. Nothing is changed unless --delete
is given: then each is deleted, at most --concurrency at a time, and waited
for until Daytona reports it gone. A sandbox without every ownership label,
or whose labels changed since it was listed, is never touched.

Filters (at least one, or --all):
  --company ID        paperclip-company-id
  --environment ID    paperclip-environment-id
  --run ID            paperclip-run-id
  --older-than AGE    created at least AGE ago (e.g. 90m, 24h, 7d)
  --state S[,S...]    in one of these states (started, stopped, error, ...)
  --all               every sandbox of this plugin in the account

  --delete            delete them (default: list only)
  --concurrency N     deletions at once (default 4)
`

// sweepOptions is the parsed command line.
type sweepOptions struct {
	filter      cleanup.SweepFilter
	delete      bool
	concurrency int
	account     accountFlags
}

func parseSweep(args []string, stdout io.Writer) (o sweepOptions, helped bool, err error) {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&o.filter.CompanyID, "company", "", "")
	fs.StringVar(&o.filter.EnvironmentID, "environment", "", "")
	fs.StringVar(&o.filter.RunID, "run", "", "")
	fs.Func("older-than", "", func(v string) error {
		d, err := parseAge(v)
		o.filter.OlderThan = d
		return err
	})
	fs.Func("state", "", func(v string) error {
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				o.filter.States = append(o.filter.States, daytona.SandboxState(s))
			}
		}
		return nil
	})
	fs.BoolVar(&o.filter.All, "all", false, "")
	fs.BoolVar(&o.delete, "delete", false, "")
	fs.IntVar(&o.concurrency, "concurrency", cleanup.DefaultSweepConcurrency, "")
	o.account.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, sweepUsage+accountHelp+envHelp)
			return o, true, nil
		}
		return o, false, usagef("sweep: %v", err)
	}
	switch {
	case fs.NArg() > 0:
		return o, false, usagef("sweep takes no arguments, got %q", fs.Arg(0))
	case o.concurrency < 1 || o.concurrency > 64:
		return o, false, usagef("sweep: --concurrency must be 1 to 64")
	}
	if o.filter.Check() != nil {
		return o, false, usagef("sweep: give a filter (--company, --environment, --run, --older-than, --state) or --all")
	}
	return o, false, nil
}

// parseAge reads a Go duration, or whole days as "7d".
func parseAge(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 {
			return 0, errors.New("want a positive age such as 90m, 24h or 7d")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, errors.New("want a positive age such as 90m, 24h or 7d")
	}
	return d, nil
}

// stdoutIsTerminal reports whether w is a terminal (the progress bar's
// condition); a variable so tests can pretend.
var stdoutIsTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f.Fd())
}

func sweep(ctx context.Context, args []string, stdout io.Writer) error {
	o, helped, err := parseSweep(args, stdout)
	if helped || err != nil {
		return err
	}
	cfg, err := o.account.config(os.Getenv)
	if err != nil {
		return err
	}
	acct, err := openAccount(cfg)
	if err != nil {
		return err
	}
	api := acct.client.Sandboxes
	found, err := cleanup.FindOrphans(ctx, api, o.filter)
	if err != nil {
		return fmt.Errorf("listing sandboxes at %s: %w", cli.ShownURL(acct.apiURL()), err)
	}
	fmt.Fprintf(stdout, "Daytona at %s: %d sandboxes of this plugin match\n", cli.ShownURL(acct.apiURL()), len(found))
	if len(found) == 0 {
		return nil
	}
	printSandboxes(stdout, found, time.Now())
	if !o.delete {
		fmt.Fprintf(stdout, "dry run: nothing was deleted; add --delete to delete these %d sandboxes\n", len(found))
		return nil
	}
	start := time.Now()
	p := newProgress(stdout, len(found), stdoutIsTerminal(stdout))
	results := cleanup.DeleteOrphans(ctx, api, found, o.filter, o.concurrency, p.done)
	p.finish()
	failed := 0
	for _, r := range results {
		if r.Err != nil {
			failed++
		}
	}
	fmt.Fprintf(stdout, "swept %d of %d sandboxes in %.1f s", len(found)-failed, len(found), time.Since(start).Seconds())
	if failed == 0 {
		fmt.Fprintln(stdout)
		return nil
	}
	fmt.Fprintf(stdout, "; %d failed:\n", failed)
	for _, r := range results {
		if r.Err != nil {
			fmt.Fprintf(stdout, "  %s (%s): %v\n", r.Sandbox.Name, r.Sandbox.ID, r.Err)
		}
	}
	return fmt.Errorf("%d of %d sandboxes could not be deleted", failed, len(found))
}

// printSandboxes writes the table of name, state, age and labels.
func printSandboxes(w io.Writer, sbs []daytona.Sandbox, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tAGE\tLABELS")
	for i := range sbs {
		sb := &sbs[i]
		age := "?"
		if d, ok := cleanup.Age(sb, now); ok {
			age = formatAge(d)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", sb.Name, sb.State, age, formatLabels(sb.Labels))
	}
	_ = tw.Flush()
}

// formatLabels lists the plugin's labels as key=value without the
// paperclip- prefix, in a stable order.
func formatLabels(labels map[string]string) string {
	var parts []string
	for _, k := range jsvalue.SortedKeys(labels) {
		if short, ok := strings.CutPrefix(k, "paperclip-"); ok && k != cleanup.LabelProvider {
			parts = append(parts, short+"="+labels[k])
		}
	}
	return strings.Join(parts, ",")
}

func formatAge(d time.Duration) string {
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// progress reports deletions: one redrawn bar on a terminal, one line per
// sandbox otherwise (logs, pipes, CI).
type progress struct {
	w          io.Writer
	total, n   int
	terminal   bool
	start      time.Time
	lastFailed []string
}

func newProgress(w io.Writer, total int, terminal bool) *progress {
	p := &progress{w: w, total: total, terminal: terminal, start: time.Now()}
	p.draw()
	return p
}

// done is DeleteOrphans' callback (called one at a time).
func (p *progress) done(r cleanup.SweepResult) {
	p.n++
	if !p.terminal {
		if r.Err != nil {
			fmt.Fprintf(p.w, "failed  %s (%d/%d): %v\n", r.Sandbox.Name, p.n, p.total, r.Err)
		} else {
			fmt.Fprintf(p.w, "deleted %s (%d/%d)\n", r.Sandbox.Name, p.n, p.total)
		}
		return
	}
	if r.Err != nil {
		p.lastFailed = append(p.lastFailed, r.Sandbox.Name)
	}
	p.draw()
}

const barWidth = 30

func (p *progress) draw() {
	if !p.terminal {
		return
	}
	filled := barWidth * p.n / max(1, p.total)
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d deleted, %d failed, %.0f s", strings.Repeat("=", filled), strings.Repeat(" ", barWidth-filled),
		p.n-len(p.lastFailed), p.total, len(p.lastFailed), time.Since(p.start).Seconds())
}

func (p *progress) finish() {
	if p.terminal {
		fmt.Fprintln(p.w)
	}
}

// sweepCommand is the sweep that removes what a doctor --create trial
// could not, for the operator to run.
func sweepCommand(runID string, a accountFlags) string {
	args := []string{"daytona-worker", "sweep", "--company", trialCompany, "--run", runID, "--delete"}
	if a.file != "" {
		args = append(args, "--config", a.file)
	}
	if a.apiURL != "" {
		args = append(args, "--api-url", a.apiURL)
	}
	return strings.Join(args, " ")
}
