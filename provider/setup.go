package provider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/jsvalue"
	"github.com/daytonaworker/daytona-worker/internal/shell"
	"github.com/daytonaworker/daytona-worker/provider/config"
)

// Workspace layout inside a sandbox (docs/behavior.md#workdir-and-shell, docs/behavior.md#sentinel).
const (
	workspaceDirName = "paperclip-workspace"
	sentinelRelPath  = ".paperclip-runtime/reusable-sandbox-lease.json"
	fallbackRoot     = "/home/daytona"
	setupMarker      = "paperclip-setup"
)

// The setup steps of a fresh acquisition run as separate toolbox commands,
// in the order the acquisition reports its phases (workspace, shell, then
// after the expiry the sentinel): a budget that runs out must name the step
// it ran out in, and a step merged into another could not be told apart. The
// probe reports no phase and runs the first two as one command.

// makeWorkspace resolves the root the way /work-dir does (the toolbox runs
// commands in its work dir), falls back to $HOME and then /home/daytona, and
// creates <root>/paperclip-workspace (755) as $ws.
const makeWorkspace = `root=$(pwd 2>/dev/null)
if [ -z "$root" ] || [ "$root" = / ]; then root=${HOME:-}; fi
if [ -z "$root" ] || [ "$root" = / ]; then root=` + fallbackRoot + `; fi
ws="$root/` + workspaceDirName + `"
mkdir -p "$ws" && chmod 755 "$ws" || { echo "cannot create $ws" >&2; exit 41; }
`

// printSetup is the marker line parseSetup reads: the workspace and, when
// detected, the shell.
const printSetup = `printf '` + setupMarker + `\t%s\t%s\n' "$ws" "${sh:-}"
`

// workspaceScript is the workspace step; probeScript adds shell detection.
const (
	workspaceScript = makeWorkspace + printSetup
	probeScript     = makeWorkspace + detectShell + printSetup
)

// detectShell sets $sh to bash when bash exists, else sh.
const detectShell = `if command -v bash >/dev/null 2>&1; then sh=bash; else sh=sh; fi
`

// shellScript is the shell detection step on its own.
const shellScript = detectShell + `printf '%s\n' "$sh"
`

// parseShell reads shellScript's output: bash only when it said so.
func parseShell(out string) string {
	if strings.TrimSpace(out) == "bash" {
		return "bash"
	}
	return "sh"
}

// sentinelScript writes the sentinel file atomically (temporary file, then
// rename) after creating its folder (755).
func sentinelScript(file string, content []byte) string {
	dir := shell.Quote(path.Dir(file))
	return `mkdir -p ` + dir + ` && chmod 755 ` + dir + ` || exit 42
f=` + shell.Quote(file) + `
printf '%s\n' ` + shell.Quote(string(content)) + ` > "$f.tmp.$$" && mv -f "$f.tmp.$$" "$f" || { rm -f "$f.tmp.$$"; exit 43; }
`
}

// resumeScript verifies the sentinel and detects the shell in one round
// trip, without creating anything (resume never creates the workspace).
func resumeScript(sentinelPath string) string {
	return detectShell + `printf '` + setupMarker + `\t%s\n' "$sh"
cat -- ` + shell.Quote(sentinelPath) + ` 2>/dev/null || printf '\n` + setupMarker + `-missing\n'
`
}

type setupResult struct {
	remoteCwd string
	shell     string
}

// parseSetup reads the marker line of setupScript's output.
func parseSetup(out string) (setupResult, error) {
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, setupMarker+"\t"); ok {
			ws, sh, ok := strings.Cut(rest, "\t")
			if ok && strings.HasPrefix(ws, "/") {
				if sh != "bash" {
					sh = "sh"
				}
				return setupResult{remoteCwd: ws, shell: sh}, nil
			}
		}
	}
	//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
	return setupResult{}, errors.New("Daytona workspace setup returned no workspace path")
}

// runSetup runs a script with the one-shot execute API and fails on a
// non-zero exit.
func runScript(ctx context.Context, c *account, sb *daytona.Sandbox, script string, timeoutSec int64) (string, error) {
	res, _, err := c.client.Toolbox.Execute(ctx, sb.Ref(), &daytona.ExecuteRequest{Command: script, Timeout: int(timeoutSec)})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
		return res.Result, fmt.Errorf("Daytona sandbox %s workspace setup failed with exit code %d", sb.ID, res.ExitCode)
	}
	return res.Result, nil
}

// sentinelInputs are the identity fields of a lease's workspace sentinel.
type sentinelInputs struct {
	companyID, environmentID, agentID, executionWorkspaceID, issueID, adapterType string
	runID, sandboxID                                                              string
	reuse                                                                         bool
	cfg                                                                           config.Config
}

// sentinelToken is the identity proof of docs/behavior.md#sentinel, bit-for-bit
// the reference's so leases made by the TypeScript plugin resume here. It
// is "" when the lease carries no identity to prove.
func sentinelToken(in sentinelInputs) string {
	if (!in.reuse && in.runID == "") || in.agentID == "" || (in.executionWorkspaceID == "" && in.issueID == "") {
		return ""
	}
	m := map[string]any{
		"provider": DriverKey, "companyId": in.companyID, "environmentId": in.environmentID,
		"agentId": in.agentID, "adapterType": nullable(in.adapterType),
		"image": nullable(in.cfg.Image), "snapshot": nullable(in.cfg.Snapshot), "target": nullable(in.cfg.Target),
		"cpu": in.cfg.CPU, "memory": in.cfg.Memory, "disk": in.cfg.Disk, "gpu": in.cfg.GPU,
	}
	if in.executionWorkspaceID != "" {
		m["executionWorkspaceId"] = in.executionWorkspaceID
	} else {
		m["executionWorkspaceId"] = nil
		m["projectlessIssueId"] = in.issueID
	}
	if !in.reuse {
		m["ephemeralRunId"] = in.runID
		m["ephemeralProviderLeaseId"] = in.sandboxID
	}
	b, err := jsvalue.StableStringify(m)
	if err != nil {
		panic(err) // strings and numbers only
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// sentinelFile is the file content: pretty JSON in the reference's key order.
func sentinelFile(in sentinelInputs, token, writtenAt string) []byte {
	type kv struct {
		k string
		v any
	}
	fields := []kv{{"version", 1}, {"token", token}, {"companyId", in.companyID}, {"environmentId", in.environmentID},
		{"agentId", in.agentID}, {"executionWorkspaceId", nullable(in.executionWorkspaceID)}}
	if in.executionWorkspaceID == "" {
		fields = append(fields, kv{"projectlessIssueId", in.issueID})
	}
	fields = append(fields, kv{"adapterType", nullable(in.adapterType)}, kv{"provider", DriverKey})
	if !in.reuse {
		fields = append(fields, kv{"runId", in.runID}, kv{"providerLeaseId", in.sandboxID})
	}
	fields = append(fields, kv{"writtenAt", writtenAt})
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, f := range fields {
		v, _ := json.Marshal(f.v)
		fmt.Fprintf(&b, "  %q: %s", f.k, v)
		if i < len(fields)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}")
	return b.Bytes()
}
