package daytonatest

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// CommandResult is a finished (or running) session command as the
// emulator recorded it.
type CommandResult struct {
	ID, Command    string
	ExitCode       *int
	Stdout, Stderr []byte
	Raw            []byte // the log with markers
}

// Command returns a session command's state and output.
func (s *Server) Command(sandboxID, sessionID, commandID string) (CommandResult, bool) {
	cm, res, ok := s.command(sandboxID, sessionID, commandID)
	if !ok {
		return CommandResult{}, false
	}
	res.Raw, _ = os.ReadFile(cm.logPath)
	res.Stdout, res.Stderr = demux(res.Raw)
	return res, true
}

// command finds a session command and returns its state without its
// output.
func (s *Server) command(sandboxID, sessionID, commandID string) (*command, CommandResult, bool) {
	ss := s.liveSession(sandboxID, sessionID)
	if ss == nil {
		return nil, CommandResult{}, false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	cm := ss.commands[commandID]
	if cm == nil {
		return nil, CommandResult{}, false
	}
	res := CommandResult{ID: cm.id, Command: cm.text}
	if cm.exitCode != nil {
		v := *cm.exitCode
		res.ExitCode = &v
	}
	return cm, res, true
}

// AwaitCommand waits until a session command has an exit code and returns
// it with its output. The wait looks at the exit code alone: the log is
// read once, at the end, where reading it at every change the emulator
// announces (each batch of output lines) made waiting for a command that
// prints megabytes quadratic.
func (s *Server) AwaitCommand(ctx context.Context, sandboxID, sessionID, commandID string) (CommandResult, error) {
	err := s.Await(ctx, func() bool {
		_, r, ok := s.command(sandboxID, sessionID, commandID)
		return ok && r.ExitCode != nil
	})
	res, _ := s.Command(sandboxID, sessionID, commandID)
	return res, err
}

// Sessions lists the ids of a sandbox's live process sessions.
func (s *Server) Sessions(sandboxID string) []string {
	return s.toolboxIDs(sandboxID, false)
}

// PTYs lists the ids of a sandbox's PTY sessions.
func (s *Server) PTYs(sandboxID string) []string {
	return s.toolboxIDs(sandboxID, true)
}

func (s *Server) toolboxIDs(sandboxID string, ptys bool) []string {
	s.init()
	s.mu.Lock()
	sb := s.sandboxes[sandboxID]
	s.mu.Unlock()
	if sb == nil {
		return nil
	}
	sb.tb.mu.Lock()
	defer sb.tb.mu.Unlock()
	var out []string
	if ptys {
		for id := range sb.tb.ptys {
			out = append(out, id)
		}
	} else {
		for id := range sb.tb.sessions {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Dispatch records one command handed to a shell: a session exec or a
// one-shot execute. Tests use it to prove a command ran exactly once.
type Dispatch struct {
	Time      time.Time
	Sandbox   string
	Session   string // "" for POST /process/execute
	CommandID string // "" for POST /process/execute
	Command   string
	Async     bool
	Timeout   int // the timeout in seconds of POST /process/execute (0 = none)
}

// Dispatches returns every command dispatch so far, in order.
func (s *Server) Dispatches() []Dispatch {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Dispatch(nil), s.dispatch...)
}

// CountDispatches counts dispatched commands whose text contains substr
// ("" counts all).
func (s *Server) CountDispatches(substr string) int {
	n := 0
	for _, d := range s.Dispatches() {
		if strings.Contains(d.Command, substr) {
			n++
		}
	}
	return n
}

// DiskUsage reports the bytes used in a sandbox's tree.
func (s *Server) DiskUsage(idOrName string) (int64, error) {
	s.init()
	s.mu.Lock()
	sb := s.lookupLocked(idOrName)
	s.mu.Unlock()
	if sb == nil {
		return 0, fmt.Errorf("daytonatest: no sandbox %q", idOrName)
	}
	return sb.diskUsage(), nil
}

// SandboxInfo is a snapshot of an emulated sandbox for test assertions.
type SandboxInfo struct {
	ID, Name            string
	State, DesiredState string
	ErrorReason         string
	Recoverable         bool
	Labels, Env         map[string]string
	Snapshot, User      string
	Public              bool
	AutoStopInterval    int
	AutoArchiveInterval int
	AutoDeleteInterval  int
	CPU, Memory, Disk   int
	ContainerLost       bool
	// DiskBytes is the disk allocation toolbox writes and commands are held to.
	DiskBytes int64
	// Root is the sandbox's tree on the host.
	// HomeDir and WorkDir are as the sandbox names them: /home/daytona
	// in a namespace (HostPath maps them onto Root), else host paths.
	Root, HomeDir, WorkDir    string
	CreatedAt, LastActivityAt time.Time
	Pending                   bool // a transition is in progress

	view *pathView
}

// Sandbox returns a snapshot of the sandbox with this id or name (any
// state except destroyed).
func (s *Server) Sandbox(idOrName string) (SandboxInfo, bool) {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookupLocked(idOrName)
	if sb == nil {
		if sb2, ok := s.sandboxes[idOrName]; ok {
			return sb2.infoLocked(), true
		}
		return SandboxInfo{}, false
	}
	return sb.infoLocked(), true
}

// Sandboxes returns snapshots of all sandboxes not yet destroyed, in
// creation order.
func (s *Server) Sandboxes() []SandboxInfo {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SandboxInfo
	for _, id := range s.order {
		if sb := s.sandboxes[id]; sb.state != StateDestroyed {
			out = append(out, sb.infoLocked())
		}
	}
	return out
}

// AwaitState waits until the sandbox (by id or name) is in state. It fails
// early if the sandbox is destroyed (unless state is "destroyed").
func (s *Server) AwaitState(ctx context.Context, idOrName, state string) error {
	var gone bool
	err := s.Await(ctx, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		sb := s.lookupLocked(idOrName)
		if sb == nil {
			sb = s.sandboxes[idOrName]
		}
		if sb == nil {
			gone = true
			return true
		}
		if sb.state == state {
			return true
		}
		if sb.state == StateDestroyed {
			gone = true
			return true
		}
		return false
	})
	if err != nil {
		return err
	}
	if gone && state != StateDestroyed {
		return fmt.Errorf("daytonatest: sandbox %s is gone", idOrName)
	}
	return nil
}

// AwaitGone waits until GET /sandbox/{id} answers 404.
func (s *Server) AwaitGone(ctx context.Context, id string) error {
	return s.Await(ctx, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.lookupLocked(id) == nil
	})
}

// HoldTransitions freezes lifecycle transitions of one sandbox (by id or
// name; a name may be held before the sandbox is created), or of every
// sandbox when idOrName is "", until the returned
// release func is called: intermediate states (creating, stopping, ...)
// stay observable for as long as the test needs. While held, create,
// start and recover answer at once with the intermediate state instead of
// waiting for "started" (as Daytona does after its 30 s server wait).
func (s *Server) HoldTransitions(idOrName string) (release func()) {
	s.init()
	s.mu.Lock()
	key := idOrName
	if key != "" {
		if sb := s.lookupLocked(idOrName); sb != nil {
			key = sb.id
		}
	}
	s.holds[key]++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.holds[key]--
			if s.holds[key] <= 0 {
				delete(s.holds, key)
			}
			s.notifyLocked()
			s.mu.Unlock()
		})
	}
}

// SetError puts a sandbox into the error state with this reason, as a
// runner failure would; its processes are killed.
func (s *Server) SetError(idOrName, reason string, recoverable bool) error {
	s.init()
	s.mu.Lock()
	sb := s.lookupLocked(idOrName)
	if sb == nil {
		s.mu.Unlock()
		return fmt.Errorf("daytonatest: no sandbox %q", idOrName)
	}
	sb.gen++
	sb.pending = false
	from := sb.state
	sb.state = StateError
	s.recordStateLocked(sb, from)
	sb.errorReason = reason
	sb.recoverable = recoverable
	sb.updatedAt = time.Now()
	s.notifyLocked()
	s.mu.Unlock()
	sb.killAll("sandbox error")
	return nil
}

// LoseContainer makes the runner lose the sandbox's container: toolbox
// calls then fail with the 404 of docs/daytona.md#missing-container, and starting it ends in state
// error with MissingContainerReason (recoverable false).
func (s *Server) LoseContainer(idOrName string) error {
	s.init()
	s.mu.Lock()
	sb := s.lookupLocked(idOrName)
	if sb == nil {
		s.mu.Unlock()
		return fmt.Errorf("daytonatest: no sandbox %q", idOrName)
	}
	sb.containerLost = true
	s.notifyLocked()
	s.mu.Unlock()
	sb.killAll("container lost")
	return nil
}

// StopSandbox stops a started sandbox server-side, as auto-stop does.
func (s *Server) StopSandbox(idOrName string) error {
	s.init()
	s.mu.Lock()
	sb := s.lookupLocked(idOrName)
	if sb == nil || sb.state != StateStarted {
		s.mu.Unlock()
		return fmt.Errorf("daytonatest: sandbox %q is not started", idOrName)
	}
	s.beginStopLocked(sb)
	s.mu.Unlock()
	sb.killAll("sandbox stopped")
	return nil
}

// SetDiskAllocation changes a sandbox's disk allocation in bytes.
func (s *Server) SetDiskAllocation(idOrName string, bytes int64) error {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookupLocked(idOrName)
	if sb == nil {
		return fmt.Errorf("daytonatest: no sandbox %q", idOrName)
	}
	sb.diskBytes = bytes
	return nil
}

// liveSession finds a live session of a sandbox.
func (s *Server) liveSession(sandboxID, sessionID string) *session {
	s.init()
	s.mu.Lock()
	sb := s.sandboxes[sandboxID]
	s.mu.Unlock()
	if sb == nil {
		return nil
	}
	sb.tb.mu.Lock()
	defer sb.tb.mu.Unlock()
	return sb.tb.sessions[sessionID]
}

// KillSessionShell sends sig to a session's shell process alone, as the
// OOM killer or a `kill -9` of it would: the command it runs is left
// behind (docs/emulator.md#lost-sessions-and-dead-shells). It reports
// whether the session exists.
func (s *Server) KillSessionShell(sandboxID, sessionID string, sig syscall.Signal) bool {
	ss := s.liveSession(sandboxID, sessionID)
	if ss == nil {
		return false
	}
	return syscall.Kill(ss.cmd.Process.Pid, sig) == nil
}

// SessionShellExited reports whether a session's shell process has exited
// (false for an unknown session).
func (s *Server) SessionShellExited(sandboxID, sessionID string) bool {
	ss := s.liveSession(sandboxID, sessionID)
	if ss == nil {
		return false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.shellGone
}
