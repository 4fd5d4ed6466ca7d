package chaos

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/daytonaworker/daytona-worker/cleanup"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
)

// The invariants, by the name a violation and the statistics use.
const (
	invNoLeak        = "no-leak"          // no sandbox of the run survives the cleanup
	invOnceDispatch  = "dispatched-once"  // no command dispatched twice
	invOutput        = "output-exact"     // an answered execute carries exactly what the command wrote
	invLogPrefix     = "log-prefix"       // the execute.log chunks are a prefix of the answer
	invOwnedDeletion = "owned-deletion"   // nothing deleted without the full ownership label set
	invReceipt       = "receipt-after"    // a receipt only after Daytona recorded the stop / deletion
	invTree          = "tree-not-torn"    // a synced tree is one generation, whole
	invDecoys        = "decoys-untouched" // look-alike sandboxes survive
)

// live reports whether an emulated sandbox still counts as existing.
func live(sb daytonatest.SandboxInfo) bool {
	return sb.State != daytonatest.StateDestroyed && sb.DesiredState != daytonatest.StateDestroyed
}

// checkLeaks runs after the host destroyed every lease and resolved every
// envelope: what is left of the run must come from an acquire a kill
// interrupted (the sweep that follows removes it); the sweep is then
// checked to have left nothing.
func (r *run) checkLeaks() {
	for _, sb := range r.srv.Sandboxes() {
		if !live(sb) || slices.Contains(r.decoys, sb.ID) || sb.Labels[cleanup.LabelCompanyID] != company {
			continue
		}
		if !r.killedRuns[sb.Labels[cleanup.LabelRunID]] {
			r.violate(invNoLeak, "sandbox %s (%s, run %s, state %s) survived the host's cleanup and no kill explains it",
				sb.ID, sb.Name, sb.Labels[cleanup.LabelRunID], sb.State)
		}
	}
}

func (r *run) checkAll() {
	// After the sweep: nothing of the run, every decoy intact.
	for _, sb := range r.srv.Sandboxes() {
		if live(sb) && !slices.Contains(r.decoys, sb.ID) && sb.Labels[cleanup.LabelCompanyID] == company {
			r.violate(invNoLeak, "sandbox %s (%s) survived the sweep", sb.ID, sb.Name)
		}
	}
	r.checked(invNoLeak, 1)
	for _, id := range r.decoys {
		if sb, ok := r.srv.Sandbox(id); !ok || !live(sb) {
			r.violate(invDecoys, "decoy %s was deleted", id)
		}
	}
	r.checked(invDecoys, len(r.decoys))
	r.checkExecs()
	r.checkDeletions()
	r.checkReceipts()
}

func (r *run) checkExecs() {
	dispatches := r.srv.Dispatches()
	for _, e := range r.execs {
		n := 0
		for _, d := range dispatches {
			if strings.Contains(d.Command, e.Token) {
				n++
			}
		}
		if n > 1 {
			r.violate(invOnceDispatch, "command %s dispatched %d times", e.Token, n)
		}
		r.checked(invOnceDispatch, 1)
		if !e.Answered || e.ExitCode == nil || e.TimedOut {
			continue
		}
		if n == 0 {
			// An answered command that the log never saw would make the
			// at-most-once check above vacuous.
			r.violate(invOnceDispatch, "execute %s answered exit %d but the emulator never dispatched it", e.Token, *e.ExitCode)
		}
		wantOut, wantErr := wantOutput(e.Token+"-o", e.Want.Out), wantOutput(e.Token+"-e", e.Want.Err)
		if *e.ExitCode != e.Want.Exit || e.Stdout != wantOut || e.Stderr != wantErr {
			r.violate(invOutput, "execute %s answered exit %d, %d+%d bytes; the command wrote exit %d, %d+%d bytes (stdout equal: %v, stderr equal: %v)",
				e.Token, *e.ExitCode, len(e.Stdout), len(e.Stderr), e.Want.Exit, len(wantOut), len(wantErr), e.Stdout == wantOut, e.Stderr == wantErr)
		}
		r.checked(invOutput, 1)
		var logOut, logErr strings.Builder
		for _, c := range e.Logs {
			if c.Stream == "stderr" {
				logErr.WriteString(c.Chunk)
			} else {
				logOut.WriteString(c.Chunk)
			}
		}
		if !strings.HasPrefix(e.Stdout, logOut.String()) || !strings.HasPrefix(e.Stderr, logErr.String()) {
			r.violate(invLogPrefix, "execute %s: its %d execute.log chunks are not a prefix of its answer", e.Token, len(e.Logs))
		}
		r.checked(invLogPrefix, 1)
	}
}

// checkDeletions: every deletion the emulator began was of a sandbox with
// the full ownership label set of this company and environment, under the
// creation name of its attempt.
func (r *run) checkDeletions() {
	for _, d := range r.srv.Deletions() {
		l := d.Labels
		owned := l[cleanup.LabelProvider] == cleanup.ProviderValue && l[cleanup.LabelCompanyID] == company &&
			l[cleanup.LabelEnvironmentID] == environment && (l[cleanup.LabelReuseLease] == "true" || l[cleanup.LabelReuseLease] == "false") &&
			l[cleanup.LabelCreateAttempt] != "" && d.Name == cleanup.CreationName(l[cleanup.LabelCreateAttempt])
		if !owned {
			r.violate(invOwnedDeletion, "sandbox %s (%s, labels %v) was deleted without the full ownership label set", d.Sandbox, d.Name, l)
		}
		r.checked(invOwnedDeletion, 1)
	}
}

// checkReceipts: a receipt's state is the sandbox's last recorded state
// before the host got it ("stopped" also for an archived one; "destroyed"
// also for an errored sandbox whose deletion had begun, which Daytona hides
// at once).
func (r *run) checkReceipts() {
	trans := r.srv.Transitions()
	dels := r.srv.Deletions()
	byName := map[string]string{} // a cleanup envelope's receipt names the creation name
	for _, d := range dels {
		byName[d.Name] = d.Sandbox
	}
	for _, rc := range r.receipts {
		id := rc.Sandbox
		if byName[id] != "" {
			id = byName[id]
		}
		last, known := "", false
		for _, t := range trans {
			if t.Sandbox == id && !t.Time.After(rc.At) {
				last, known = t.To, true
			}
		}
		deleting := false
		for _, d := range dels {
			if d.Sandbox == id && !d.Time.After(rc.At) {
				deleting = true
			}
		}
		ok := false
		switch rc.State {
		case "stopped":
			ok = last == daytonatest.StateStopped || last == daytonatest.StateArchived || last == daytonatest.StateArchiving
		case "destroyed":
			ok = !known || last == daytonatest.StateDestroyed ||
				(deleting && (last == daytonatest.StateError || last == daytonatest.StateBuildFailed))
		}
		if !ok {
			r.violate(invReceipt, "%s answered %q for %s while the emulator's last recorded state was %q", rc.Method, rc.State, rc.Sandbox, last)
		}
		r.checked(invReceipt, 1)
	}
}

// checkTrees: every synced tree, in the sandbox (while it exists) and on
// the host, is one syncIn generation in full (files beyond that
// generation's count may remain from an older one), or empty, or absent.
func (r *run) checkTrees() {
	for id, gens := range r.gens {
		sb, ok := r.srv.Sandbox(id)
		if !ok || !live(sb) {
			continue
		}
		r.checkTree(filepath.Join(r.remotes[id], "tree"), gens, "sandbox "+id)
	}
	for target, id := range r.hostTrees {
		r.checkTree(target, r.gens[id], "host")
	}
}

func (r *run) checkTree(dir string, gens []generation, where string) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return
	}
	r.checked(invTree, 1)
	if err != nil {
		r.violate(invTree, "%s tree %s: %v", where, dir, err)
		return
	}
	files := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err == nil {
			files[e.Name()] = b
		}
	}
	if len(files) == 0 {
		// A failed first sync may leave the (empty) target directory it
		// made before extracting: no content of any generation, untouched.
		return
	}
	for _, g := range gens {
		whole := true
		for i := range g.Files {
			if !bytes.Equal(files[fmt.Sprintf("f%d", i)], fileContent(g, i)) {
				whole = false
				break
			}
		}
		if whole {
			return
		}
	}
	var names []string
	for n, b := range files {
		names = append(names, fmt.Sprintf("%s=%q(%d bytes)", n, firstLine(b), len(b)))
	}
	slices.Sort(names)
	r.violate(invTree, "%s tree %s is torn: %s", where, dir, strings.Join(names, " "))
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}
