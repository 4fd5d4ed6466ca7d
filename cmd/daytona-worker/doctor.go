package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/clamp"
	"github.com/daytonaworker/daytona-worker/internal/cli"
)

const doctorUsage = `usage: daytona-worker doctor [--create] [--json] [account flags]

Check a Daytona account before saving it in an environment: the config is
validated by the worker's own validator, then each check prints one line
with ✓ or ✗, the time it took and, when it fails, how to fix it:
  DNS, TCP, TLS   the API URL is reachable (each step named separately)
  API key         Daytona accepts the key
  quota           the organization and its quota in the region are readable
  snapshot/image  the configured snapshot exists and is active

  --create        also run one lease exactly as a run would: create a
                  sandbox, run "echo ok", sync a small tree in and back
                  out, destroy it; prints a timing table. Interrupted
                  (Ctrl-C), it still deletes the sandbox, or prints its
                  name and the sweep command that removes it.
  --json          print everything as one JSON object instead
  --snapshot S, --image I   override the config's sandbox source

Exit code 0 only when every check passed; 1 when one failed; 2 for a
mistake on the command line.
`

// doctorReport is the --json output (and what the text output shows).
type doctorReport struct {
	OK     bool          `json:"ok"`
	APIURL string        `json:"apiUrl"`
	Target string        `json:"target,omitempty"`
	Checks []check       `json:"checks"`
	Create *createReport `json:"create,omitempty"`
}

type createReport struct {
	RunID    string       `json:"runId"`
	Steps    []createStep `json:"steps"`
	Leftover string       `json:"leftover,omitempty"`
	Sweep    string       `json:"sweep,omitempty"`
}

type createStep struct {
	Name   string  `json:"name"`
	OK     bool    `json:"ok"`
	Ms     float64 `json:"ms"`
	Detail string  `json:"detail,omitempty"`
	Error  string  `json:"error,omitempty"`
}

func doctor(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	create := fs.Bool("create", false, "")
	asJSON := fs.Bool("json", false, "")
	acctFlags := accountFlags{withSandboxes: true}
	acctFlags.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, err = fmt.Fprint(stdout, doctorUsage+accountHelp+envHelp)
			return err
		}
		return usagef("doctor: %v", err)
	}
	if fs.NArg() > 0 {
		return usagef("doctor takes no arguments, got %q", fs.Arg(0))
	}
	cfg, err := acctFlags.config(os.Getenv)
	if err != nil {
		return err
	}
	out := &doctorOutput{w: stdout, json: *asJSON}
	acct, err := openAccount(cfg)
	if err != nil {
		// The validator's messages, as the host would show them.
		apiURL, _ := cfg["apiUrl"].(string)
		if apiURL == "" {
			apiURL = daytona.DefaultAPIURL
		}
		rep := doctorReport{APIURL: cli.ShownURL(apiURL), Checks: []check{{Name: "config", Detail: clamp.Echo(err.Error()),
			Fix: "correct the fields named above (the same rules as the environment form)"}}}
		out.header(rep)
		out.check(rep.Checks[0])
		if *create {
			out.line("--create skipped: the config check failed")
		}
		return out.end(rep)
	}
	rep := doctorReport{APIURL: cli.ShownURL(acct.apiURL()), Target: acct.cfg.Target}
	out.header(rep)
	c := &checker{acct: acct, each: out.check}
	c.run(ctx, "config", func(context.Context) (string, string, error) { return "valid", "", nil })
	c.runChecks(ctx)
	rep.Checks = c.checks
	if *create && c.firstFailed == "" {
		rep.Create = out.trial(ctx, acct, acctFlags)
	} else if *create {
		out.line("--create skipped: the " + c.firstFailed + " check failed")
	}
	return out.end(rep)
}

// doctorOutput prints the report as it goes (text) or once at the end
// (JSON).
type doctorOutput struct {
	w    io.Writer
	json bool
}

func (o *doctorOutput) line(s string) {
	if !o.json {
		fmt.Fprintln(o.w, s)
	}
}

func (o *doctorOutput) header(r doctorReport) {
	target := "the organization's default region"
	if r.Target != "" {
		target = "region " + r.Target
	}
	o.line(fmt.Sprintf("daytona-worker doctor: Daytona API at %s, %s", clamp.Echo(r.APIURL), target))
}

func (o *doctorOutput) check(c check) {
	if o.json {
		return
	}
	mark := "✓"
	if !c.OK {
		mark = "✗"
	}
	fmt.Fprintf(o.w, "%s %-15s %9.1f ms  %s\n", mark, c.Name, c.Ms, c.Detail)
	if c.Fix != "" {
		fmt.Fprintf(o.w, "  %-15s              fix: %s\n", "", c.Fix)
	}
}

// trial runs --create and prints its timing table.
func (o *doctorOutput) trial(ctx context.Context, acct *account, flags accountFlags) *createReport {
	o.line("\n--create: one lease as a run would take it")
	o.line(fmt.Sprintf("  %-16s %10s  %s", "STEP", "TIME", "RESULT"))
	told := false
	rep := runTrial(ctx, acct.driver, acct.raw, func(s trialStep) {
		if ctx.Err() != nil && !told {
			told = true
			o.line("  interrupted: deleting the sandbox (at most a few minutes; its name is printed if that fails)")
		}
		detail := s.Detail
		if s.Err != nil {
			detail = "✗ " + clamp.Echo(s.Err.Error())
		}
		o.line(fmt.Sprintf("  %-16s %7.1f ms  %s", s.Name, ms(s.Took), detail))
	})
	cr := &createReport{RunID: rep.RunID}
	for _, s := range rep.Steps {
		st := createStep{Name: s.Name, OK: s.Err == nil, Ms: ms(s.Took), Detail: s.Detail}
		if s.Err != nil {
			st.Error = clamp.Echo(s.Err.Error())
		}
		cr.Steps = append(cr.Steps, st)
	}
	if rep.Leftover != "" {
		cr.Leftover, cr.Sweep = rep.Leftover, sweepCommand(rep.RunID, flags)
		o.line(fmt.Sprintf("✗ sandbox %s may still exist; remove it with:\n    %s", rep.Leftover, cr.Sweep))
	}
	return cr
}

// end prints the summary (or the JSON object) and returns the exit status.
func (o *doctorOutput) end(r doctorReport) error {
	r.OK = len(r.Checks) > 0
	failed := 0
	for _, c := range r.Checks {
		if !c.OK {
			r.OK = false
			failed++
		}
	}
	if r.Create != nil {
		for _, s := range r.Create.Steps {
			if !s.OK {
				r.OK = false
				failed++
			}
		}
		if r.Create.Leftover != "" {
			r.OK = false
		}
	}
	if o.json {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(o.w, "%s\n", b); err != nil {
			return err
		}
	} else if r.OK {
		o.line("\nall checks passed")
	}
	if !r.OK {
		if failed <= 1 {
			return errors.New("doctor: 1 check failed")
		}
		return fmt.Errorf("doctor: %d checks failed", failed)
	}
	return nil
}
