package exec

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/daytonaworker/daytona-worker/internal/clamp"
	"github.com/daytonaworker/daytona-worker/internal/shell"
)

var envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// gitDefaults are the non-interactive git/ssh settings every command gets
// unless the caller's env overrides them (docs/behavior.md#command-script), in the reference's order.
var gitDefaults = [][2]string{
	{"GIT_TERMINAL_PROMPT", "0"},
	{"GCM_INTERACTIVE", "Never"},
	{"GIT_ASKPASS", "echo"},
	{"SSH_ASKPASS", "echo"},
	{"SSH_ASKPASS_REQUIRE", "force"},
}

// validateEnv rejects keys a shell `env K=v` prefix cannot carry, before
// any provider call (docs/behavior.md#command-script).
func validateEnv(env map[string]string) error {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !envKeyRE.MatchString(k) {
			return &InvalidEnvKeyError{Key: k}
		}
	}
	return nil
}

// profilePrelude sources the login profiles the daemon's non-login shell
// skips (docs/daytona.md#process): each only if present, output discarded,
// failures ignored; .bash_profile or else .bashrc.
const profilePrelude = `if [ -f /etc/profile ]; then . /etc/profile >/dev/null 2>&1 || true; fi` +
	` && if [ -f "$HOME/.profile" ]; then . "$HOME/.profile" >/dev/null 2>&1 || true; fi` +
	` && if [ -f "$HOME/.bash_profile" ]; then . "$HOME/.bash_profile" >/dev/null 2>&1 || true; elif [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc" >/dev/null 2>&1 || true; fi` +
	` && if [ -f "$HOME/.zprofile" ]; then . "$HOME/.zprofile" >/dev/null 2>&1 || true; fi`

// commandScript is the one-line command script of
// docs/behavior.md#command-script, with where its final `env` word and its
// stdin redirection (if any) start.
type commandScript struct {
	text    string
	envAt   int
	stdinAt int // len(text) without a redirection
}

// line is the script without its stdin redirection, whose file name is
// new every time: the same command line gives the same text.
func (s commandScript) line() string { return s.text[:s.stdinAt] }

// hasStdin reports whether the script redirects stdin from a file.
func (s commandScript) hasStdin() bool { return s.stdinAt < len(s.text) }

// String is the script exactly as the reference composes it, sent as is
// on the one-shot path: profiles && cd 'cwd' && env K='v'… 'command' 'arg'…
// [< 'stdinPath'].
func (s commandScript) String() string { return s.text }

// execLast is the same script with `exec` before its final env, for the
// subshell the session wrapper runs it in: bash forks a subshell's last
// command of an && list, and each process creation costs milliseconds in
// a sandbox (docs/exec.md#end-markers). The command, its arguments, its
// redirection and its exit status are the same; only its parent differs.
func (s commandScript) execLast() string {
	return s.text[:s.envAt] + "exec " + s.text[s.envAt:]
}

// buildScript composes the command script. Caller env keys that are not
// git defaults follow in sorted order (Go maps have no insertion order;
// sorting keeps the script deterministic).
func buildScript(command string, args []string, cwd string, env map[string]string, stdinPath string) commandScript {
	var b strings.Builder
	b.WriteString(profilePrelude)
	if cwd != "" {
		b.WriteString(" && cd ")
		b.WriteString(shell.Quote(cwd))
	}
	b.WriteString(" && ")
	envAt := b.Len()
	b.WriteString("env")
	seen := map[string]bool{}
	for _, kv := range gitDefaults {
		v := kv[1]
		if ov, ok := env[kv[0]]; ok {
			v = ov
		}
		seen[kv[0]] = true
		fmt.Fprintf(&b, " %s=%s", kv[0], shell.Quote(v))
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		if !seen[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, shell.Quote(env[k]))
	}
	b.WriteString(" ")
	b.WriteString(shell.Quote(command))
	for _, a := range args {
		b.WriteString(" ")
		b.WriteString(shell.Quote(a))
	}
	stdinAt := b.Len()
	if stdinPath != "" {
		b.WriteString(" < ")
		b.WriteString(shell.Quote(stdinPath))
	}
	return commandScript{text: b.String(), envAt: envAt, stdinAt: stdinAt}
}

// oneShot is the script sent to POST /process/execute. The daemon answers
// only once every holder of its output pipe has closed it, so a command
// that leaves a background job running (`server & echo started`) would
// hold the answer until the job ends or the timeout, which then loses all
// the output (docs/exec.md#what-bash-gives). So the command's combined output
// goes to a file (outPath, in /tmp) and the shell prints the file once the
// command itself has ended: the background job holds only the file, and
// what it prints later is not part of the result, as with bash. The
// subshell is quiet (quietSubshell: a signal death prints no script) and
// reads /dev/null unless stdin was given. When the file cannot be created
// the command runs on the pipe as before. On a timeout the daemon kills
// the group before the file is printed: the runner downloads it instead.
func (s commandScript) oneShot(outPath string) string {
	q := shell.Quote(outPath)
	noStdin := " </dev/null"
	if s.hasStdin() {
		noStdin = ""
	}
	return `if : 2>/dev/null >` + q + `; then { ( ` + s.execLast() + ` )` + noStdin + ` >` + q + ` 2>&1; } 2>/dev/null; ` +
		statusVar + `=$?; cat ` + q + `; rm -f ` + q + `; exit "$` + statusVar + `"; else ` +
		quietSubshell(s.execLast(), !s.hasStdin()) + `; fi`
}

// GitNetworkTimeout caps the timeout of git commands that talk to a remote
// (docs/behavior.md#command-script): a missing credential helper must not hang a run for hours.
const GitNetworkTimeout = 120 * time.Second

// isGitNetworkCommand reports whether command+args is a git network
// operation: basename git, first positional argument (skipping -C, -c,
// --git-dir, --work-tree with their values and other flags) push, fetch,
// pull, ls-remote, clone, or remote update / submodule update.
func isGitNetworkCommand(command string, args []string) bool {
	if path.Base(command) != "git" {
		return false
	}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-C" || a == "-c" || a == "--git-dir" || a == "--work-tree":
			i++ // skip the value
		case strings.HasPrefix(a, "-"):
		default:
			pos = append(pos, a)
		}
		if len(pos) == 2 {
			break
		}
	}
	if len(pos) == 0 {
		return false
	}
	switch pos[0] {
	case "push", "fetch", "pull", "ls-remote", "clone":
		return true
	case "remote", "submodule":
		return len(pos) > 1 && pos[1] == "update"
	}
	return false
}

// gitTimeoutMessage is the actionable text of a timed-out git network command.
func gitTimeoutMessage(seconds int64) string {
	return fmt.Sprintf("Git network operation timed out after %d s — the remote may be unreachable or noninteractive credentials are not configured.", seconds)
}

// toTimeoutSeconds is max(1, ceil(ms/1000)) (docs/behavior.md#small-functions).
func toTimeoutSeconds(d time.Duration) int {
	d = min(d, clamp.MaxDuration) // never an absurd value for the daemon
	s := int((d + time.Second - 1) / time.Second)
	return max(1, s)
}
