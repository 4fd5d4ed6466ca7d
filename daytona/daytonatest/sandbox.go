package daytonatest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Sandbox states (SandboxState in api.openapi.yaml) the emulator uses.
const (
	StateCreating     = "creating"
	StatePendingBuild = "pending_build"
	StateStarting     = "starting"
	StateStarted      = "started"
	StateStopping     = "stopping"
	StateStopped      = "stopped"
	StateArchiving    = "archiving"
	StateArchived     = "archived"
	StateRestoring    = "restoring"
	StateDestroying   = "destroying"
	StateDestroyed    = "destroyed"
	StateError        = "error"
	StateBuildFailed  = "build_failed"
)

// MissingContainerReason is the exact errorReason Daytona sets when the
// runner lost the sandbox's container (docs/daytona.md#missing-container).
func MissingContainerReason(id string) string {
	return fmt.Sprintf("not found: failed to inspect sandbox container %s: Error response from daemon: No such container: %s", id, id)
}

type buildInfo struct {
	DockerfileContent string   `json:"dockerfileContent"`
	ContextHashes     []string `json:"contextHashes,omitempty"`
	CreatedAt         string   `json:"createdAt"`
	UpdatedAt         string   `json:"updatedAt"`
	SnapshotRef       string   `json:"snapshotRef"`
}

type volume struct {
	VolumeID  string `json:"volumeId"`
	MountPath string `json:"mountPath"`
	Subpath   string `json:"subpath,omitempty"`
}

// sandbox is one emulated sandbox. Control-plane fields are guarded by
// Server.mu; the toolbox state has its own lock (tb.mu).
type sandbox struct {
	s *Server

	id, name, orgID  string
	snapshot, user   string
	env, labels      map[string]string
	public           bool
	networkBlockAll  bool
	networkAllowList *string
	domainAllowList  *string
	target           string
	cpu, gpu         int
	memory, disk     int
	gpuType          string
	state, desired   string
	errorReason      string
	recoverable      bool
	backupState      string
	autoStop         int
	autoArchive      int
	autoDelete       int
	autoDestroyAt    time.Time // proposed wall-clock expiry (docs/behavior.md#ttl); zero = none
	build            *buildInfo
	volumes          []volume
	createdAt        time.Time
	updatedAt        time.Time
	lastActivity     time.Time
	gen              int // transition generation; a newer transition cancels older ones
	pending          bool
	containerLost    bool
	diskBytes        int64
	previewToken     string

	root, home string // host directories

	tb toolbox
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
	// Root is the sandbox's tree on the host; HomeDir (= WorkDir) lies inside.
	Root, HomeDir, WorkDir    string
	CreatedAt, LastActivityAt time.Time
	Pending                   bool // a transition is in progress
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (sb *sandbox) infoLocked() SandboxInfo {
	return SandboxInfo{
		ID: sb.id, Name: sb.name, State: sb.state, DesiredState: sb.desired,
		ErrorReason: sb.errorReason, Recoverable: sb.recoverable,
		Labels: copyMap(sb.labels), Env: copyMap(sb.env),
		Snapshot: sb.snapshot, User: sb.user, Public: sb.public,
		AutoStopInterval: sb.autoStop, AutoArchiveInterval: sb.autoArchive, AutoDeleteInterval: sb.autoDelete,
		CPU: sb.cpu, Memory: sb.memory, Disk: sb.disk,
		ContainerLost: sb.containerLost, DiskBytes: sb.diskBytes,
		Root: sb.root, HomeDir: sb.home, WorkDir: sb.home,
		CreatedAt: sb.createdAt, LastActivityAt: sb.lastActivity, Pending: sb.pending,
	}
}

// lookupLocked finds a visible sandbox by id, then by name (docs/daytona.md#get-by-id-or-name).
func (s *Server) lookupLocked(idOrName string) *sandbox {
	if sb, ok := s.sandboxes[idOrName]; ok && sb.visibleLocked() {
		return sb
	}
	for _, id := range s.order {
		sb := s.sandboxes[id]
		if sb.name == idOrName && sb.visibleLocked() {
			return sb
		}
	}
	return nil
}

// visibleLocked: destroyed sandboxes, and errored ones being deleted, 404.
func (sb *sandbox) visibleLocked() bool {
	if sb.state == StateDestroyed {
		return false
	}
	if (sb.state == StateError || sb.state == StateBuildFailed) && sb.desired == StateDestroyed {
		return false
	}
	return true
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

func (s *Server) heldLocked(sb *sandbox) bool {
	return s.holds[""] > 0 || s.holds[sb.id] > 0 || s.holds[sb.name] > 0
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
	sb.state = StateError
	sb.errorReason = reason
	sb.recoverable = recoverable
	sb.updatedAt = s.cfg.now()
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

// newSandboxLocked allocates a sandbox record and its host tree.
func (s *Server) newSandboxLocked(name, user string) (*sandbox, error) {
	id := uuid.NewString()
	if name == "" {
		name = id
	}
	if user == "" {
		user = "daytona"
	}
	now := s.cfg.now()
	sb := &sandbox{
		s: s, id: id, name: name, orgID: s.cfg.orgID, user: user,
		env: map[string]string{}, labels: map[string]string{},
		target: "us", cpu: 1, memory: 1, disk: 3,
		backupState: "None", autoStop: 15, autoArchive: 10080, autoDelete: -1,
		createdAt: now, updatedAt: now, lastActivity: now,
		previewToken: randHex(12),
	}
	sb.root = filepath.Join(s.cfg.dir, id)
	sb.home = filepath.Join(sb.root, "home", user)
	for _, d := range []string{sb.home, filepath.Join(sb.root, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	sb.tb.init()
	return sb, nil
}

// transitionLocked moves sb through states, one TransitionDelay apart, in
// the background. first is set now; the others follow. A later transition
// (gen bump) cancels this one.
func (s *Server) transitionLocked(sb *sandbox, desired, first string, rest ...string) {
	sb.gen++
	gen := sb.gen
	sb.state = first
	sb.desired = desired
	sb.pending = len(rest) > 0
	sb.updatedAt = s.cfg.now()
	sb.lastActivity = sb.updatedAt
	s.notifyLocked()
	if len(rest) == 0 || s.closed {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for i, next := range rest {
			if !s.sleep(context.Background(), s.cfg.transitionDelay) {
				return
			}
			// Wait while held.
			for {
				s.mu.Lock()
				if sb.gen != gen || s.closed {
					s.mu.Unlock()
					return
				}
				if !s.heldLocked(sb) {
					break
				}
				ch := s.changed
				s.mu.Unlock()
				select {
				case <-ch:
				case <-s.done:
					return
				}
			}
			// s.mu held here.
			last := i == len(rest)-1
			if next == StateStarted && sb.containerLost {
				sb.state = StateError
				sb.errorReason = MissingContainerReason(sb.id)
				sb.recoverable = false
				sb.pending = false
				sb.updatedAt = s.cfg.now()
				s.notifyLocked()
				s.mu.Unlock()
				return
			}
			if next == StateDestroyed {
				// Tear down first, so "destroyed" means the tree is gone.
				s.mu.Unlock()
				sb.killAll("sandbox destroyed")
				_ = os.RemoveAll(sb.root)
				_ = os.RemoveAll(filepath.Join(s.stateDir, sb.id))
				s.mu.Lock()
			}
			sb.state = next
			sb.updatedAt = s.cfg.now()
			sb.lastActivity = sb.updatedAt
			if last {
				sb.pending = false
			}
			s.notifyLocked()
			s.mu.Unlock()
		}
	}()
}

// beginStopLocked starts a stop (or, for ephemeral sandboxes, a delete).
func (s *Server) beginStopLocked(sb *sandbox) {
	if sb.autoDelete == 0 {
		s.beginDeleteLocked(sb)
		s.transitionLocked(sb, StateDestroyed, StateStopping, StateDestroying, StateDestroyed)
		return
	}
	s.transitionLocked(sb, StateStopped, StateStopping, StateStopped)
}

// beginDeleteLocked renames the record, freeing the name at once (docs/daytona.md#delete).
func (s *Server) beginDeleteLocked(sb *sandbox) {
	if !strings.HasPrefix(sb.name, "DESTROYED_") {
		sb.name = fmt.Sprintf("DESTROYED_%s_%d", sb.name, s.cfg.now().UnixMilli())
	}
	sb.desired = StateDestroyed
}

// awaitSettled waits (bounded by startWait and ctx) until a start-like
// transition ends or is held.
func (s *Server) awaitSettled(ctx context.Context, sb *sandbox) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.startWait)
	defer cancel()
	_ = s.Await(ctx, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !sb.pending || sb.state == StateError || sb.state == StateBuildFailed || s.heldLocked(sb) || s.closed
	})
}

// RunAutoLifecycle applies Daytona's auto-stop / auto-archive / auto-delete
// rules once (the server's 10 s cron, docs/daytona.md#auto-intervals) as if the time were now: a
// stable started sandbox idle for autoStopInterval minutes (> 0) is
// stopped (deleted when autoDeleteInterval is 0); a stable stopped one idle
// for autoDeleteInterval minutes (>= 0) is deleted, else after
// autoArchiveInterval minutes archived. Idle time counts from
// lastActivityAt. The emulator never runs this by itself; tests call it
// with a time of their choosing. It returns how many sandboxes it changed.
func (s *Server) RunAutoLifecycle(now time.Time) int {
	s.init()
	s.mu.Lock()
	var killed []*sandbox
	n := 0
	for _, id := range s.order {
		sb := s.sandboxes[id]
		if sb.pending || !sb.visibleLocked() || sb.desired == StateDestroyed {
			continue
		}
		idle := now.Sub(sb.lastActivity)
		mins := func(m int) time.Duration { return time.Duration(m) * time.Minute }
		switch {
		case sb.state == StateStarted && sb.autoStop > 0 && idle >= mins(sb.autoStop):
			s.beginStopLocked(sb)
		case sb.state == StateStopped && sb.autoDelete >= 0 && idle >= mins(sb.autoDelete):
			old := sb.state
			s.beginDeleteLocked(sb)
			s.transitionLocked(sb, StateDestroyed, old, StateDestroying, StateDestroyed)
		case sb.state == StateStopped && sb.autoArchive > 0 && idle >= mins(sb.autoArchive):
			s.transitionLocked(sb, StateArchived, StateArchiving, StateArchived)
		default:
			continue
		}
		killed = append(killed, sb)
		n++
	}
	s.mu.Unlock()
	for _, sb := range killed {
		sb.killAll("auto lifecycle")
	}
	return n
}
