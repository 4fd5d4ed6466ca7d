package sync

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/shell"
)

// cleanupBudget bounds best-effort sandbox cleanup (scratch removal, the
// deleted-sandbox check), under its own context so a cancelled or timed-out
// sync still cleans up.
const cleanupBudget = 30 * time.Second

// CleanupOverrun is how far cleanup may run past the caller's deadline.
// A caller must set its deadline at least this much (and some spare)
// before whoever waits on it stops waiting: the provider's is 15 s before
// the host's (its test checks the sum), so however many cleanups follow a
// failure, the answer still reaches the host with 5 s to spare. A scratch
// file left by a cleanup cut short is swept once stale (sweep.go).
const CleanupOverrun = 10 * time.Second

// cleanupContext is the context of one best-effort cleanup step: it
// survives a cancel of ctx, and ends after budget or CleanupOverrun past
// ctx's deadline, whichever comes first. The end is absolute, so cleanups
// in a row share the overrun instead of adding theirs up: a sync returns
// by its deadline + CleanupOverrun.
func cleanupContext(ctx context.Context, budget time.Duration) (context.Context, context.CancelFunc) {
	end := time.Now().Add(budget)
	if dl, ok := ctx.Deadline(); ok && dl.Add(CleanupOverrun).Before(end) {
		end = dl.Add(CleanupOverrun)
	}
	return context.WithDeadline(context.WithoutCancel(ctx), end)
}

// scratchPrefix names every reserved sandbox scratch file (docs/behavior.md#sync): always a
// direct child of the root, so no swappable intermediate directory exists.
const scratchPrefix = ".paperclip-upload-"

// scratchName returns a fresh reserved name under root.
func scratchName(root, suffix string) string {
	return path.Join(root, scratchPrefix+uuid.NewString()+suffix)
}

// cleanRoot validates the lease's remote dir.
func cleanRoot(root string) (string, error) {
	if root == "" || !path.IsAbs(root) || strings.ContainsRune(root, 0) {
		return "", ErrNoRemoteDir
	}
	return path.Clean(root), nil
}

// confine checks a sandbox path lexically (docs/behavior.md#sync-out-files, lexical check): absolute, no ".."
// component, equal to or under root. It returns the cleaned path. what is
// "source" (outbound, the upstream wording) or "target" (inbound).
func confineAs(what, root, p string) (string, error) {
	if p == "" || !path.IsAbs(p) || strings.ContainsRune(p, 0) {
		return "", &PathError{Msg: "Daytona sync " + what + " path is not a confined absolute path", Path: p}
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", &PathError{Msg: "Daytona sync " + what + " path is not a confined absolute path", Path: p}
		}
	}
	c := path.Clean(p)
	if c != root && !strings.HasPrefix(c, strings.TrimSuffix(root, "/")+"/") {
		return "", &PathError{Msg: "Daytona sync " + what + " path escapes the workspace remote dir", Path: p}
	}
	return c, nil
}

func confine(root, p string) (string, error) { return confineAs("source", root, p) }

// canonPrelude defines canon() (realpath, else readlink -f, else exit 40)
// and resolves the root into $root (exit 41). Every guard script starts
// with it so sandbox-side checks compare canonical paths.
func canonPrelude(root string) string {
	return `if command -v realpath >/dev/null 2>&1; then canon() { realpath -e -- "$1"; }
elif command -v readlink >/dev/null 2>&1; then canon() { readlink -f -- "$1"; }
else echo "no path canonicalizer" >&2; exit 40; fi
root=$(canon ` + shell.Quote(root) + `) || exit 41
[ -n "$root" ] || exit 41
inroot() { case "$1" in "$root"|"$root"/*) return 0;; *) return 1;; esac; }
# mkconf DIR: create DIR only if its nearest existing ancestor resolves
# inside the root (so mkdir -p never follows a symlink out of it), then
# print DIR's canonical path.
mkconf() {
  a=$1
  while [ ! -e "$a" ] && [ ! -L "$a" ]; do a=$(dirname -- "$a"); done
  ca=$(canon "$a") || return 42
  inroot "$ca" || return 42
  mkdir -p -- "$1" || return 43
  c=$(canon "$1") || return 42
  inroot "$c" || return 42
  printf '%s' "$c"
}
`
}

// script starts a sandbox script: set -u, the canonical-path prelude and,
// in the call's first script, the stale-scratch sweep.
func (t Target) script(o Options) *strings.Builder {
	b := &strings.Builder{}
	b.WriteString("set -u\n")
	b.WriteString(canonPrelude(t.Root))
	b.WriteString(o.sandboxSweep())
	return b
}

// canonSource resolves the sandbox source src into $s and refuses it
// (exit 42, "ESCAPE") unless it exists and lies inside the canonical root.
//
// A source that does not exist at all fails the same way, with the detail
// MissingSource instead, so a caller can tell it from an escape (the sync
// error diagnostic reports it as ENOENT).
func canonSource(src string) string {
	q := shell.Quote(src)
	return "s=$(canon " + q + ") || { if [ -e " + q + " ] || [ -L " + q + " ]; then echo ESCAPE; else echo " + MissingSource + "; fi; exit 42; }\ninroot \"$s\" || { echo ESCAPE; exit 42; }\n"
}

// MissingSource is the detail of a *SandboxCommandError whose source does
// not exist (exit 42, like an escape).
const MissingSource = "MISSING"

// diskFullSignatures are the texts of ENOSPC, EDQUOT and EFBIG (docs/behavior.md#streaming-export),
// plus GNU tar's "Wrote only N of M bytes": a short write to a regular file,
// which is how tar reports hitting the file-size limit or a full disk
// mid-block (the write returns a count, not an errno).
var diskFullSignatures = []string{"no space left on device", "disk quota exceeded", "file too large", "wrote only "}

func isDiskFull(out string) bool {
	l := strings.ToLower(out)
	for _, s := range diskFullSignatures {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// execResult is a one-shot script's outcome.
type execResult struct {
	exit int
	out  string
}

// run executes a POSIX sh script through the toolbox's one-shot execute
// (sh -c, so the daemon's choice of zsh/bash/sh does not matter).
func (t Target) run(ctx context.Context, script string, timeoutSec int) (execResult, error) {
	res, _, err := t.Client.Toolbox.Execute(ctx, t.Sandbox, &daytona.ExecuteRequest{
		Command: "sh -c " + shell.Quote(script),
		Timeout: timeoutSec,
	})
	if err != nil {
		return execResult{}, err
	}
	return execResult{exit: res.ExitCode, out: strings.TrimSpace(res.Result)}, nil
}

// removeScratch deletes scratch names best-effort, under its own bounded
// context so a cancelled or timed-out sync still cleans up (docs/behavior.md#sync: scratch
// cleanup on every path).
func (t Target) removeScratch(ctx context.Context, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	cctx, cancel := cleanupContext(ctx, cleanupBudget)
	defer cancel()
	var b strings.Builder
	b.WriteString("rm -f --")
	for _, n := range names {
		b.WriteString(" " + shell.Quote(n))
	}
	res, _, err := t.Client.Toolbox.Execute(cctx, t.Sandbox, &daytona.ExecuteRequest{Command: b.String(), Timeout: seconds(cleanupBudget)})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("sync: scratch cleanup exit %d", res.ExitCode)
	}
	return nil
}

// classifyOut maps an outbound failure caused by a deleted sandbox to the
// stable ErrSandboxNotFound (no provider detail). A toolbox 404 can also be
// a missing file, so the control plane decides.
func (t Target) classifyOut(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, ErrSandboxNotFound) {
		return err
	}
	if !errors.Is(err, daytona.ErrNotFound) && !errors.Is(err, daytona.ErrContainerMissing) {
		return err
	}
	cctx, cancel := cleanupContext(ctx, cleanupBudget)
	defer cancel()
	sb, _, gerr := t.Client.Sandboxes.Get(cctx, t.Sandbox.ID)
	if errors.Is(gerr, daytona.ErrNotFound) || (gerr == nil && (sb.State == daytona.StateDestroyed || sb.Destroying() || sb.ContainerMissing())) {
		return ErrSandboxNotFound
	}
	return err
}
