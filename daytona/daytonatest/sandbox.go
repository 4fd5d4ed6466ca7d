package daytonatest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

	// root is the sandbox's tree on the host and hostHome the home dir
	// in it; home and tmp are those dirs as the sandbox's processes and
	// file APIs name them (/home/daytona and /tmp in a namespace), view
	// maps the one onto the other.
	root, hostHome, home, tmp string
	view                      *pathView

	tb toolbox
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
		Root: sb.root, HomeDir: sb.home, WorkDir: sb.home, view: sb.view,
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

func (s *Server) heldLocked(sb *sandbox) bool {
	return s.holds[""] > 0 || s.holds[sb.id] > 0 || s.holds[sb.name] > 0
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
	now := time.Now()
	sb := &sandbox{
		s: s, id: id, name: name, orgID: DefaultOrganizationID, user: user,
		env: map[string]string{}, labels: map[string]string{},
		target: "us", cpu: 1, memory: 1, disk: 3,
		backupState: "None", autoStop: 15, autoArchive: 10080, autoDelete: -1,
		createdAt: now, updatedAt: now, lastActivity: now,
		previewToken: randHex(12),
	}
	if err := sb.setupTree(s.method, s.cfg.dir, id, user); err != nil {
		return nil, err
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
	from := sb.state
	sb.state = first
	s.recordStateLocked(sb, from)
	sb.desired = desired
	sb.pending = len(rest) > 0
	sb.updatedAt = time.Now()
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
				from := sb.state
				sb.state = StateError
				s.recordStateLocked(sb, from)
				sb.errorReason = MissingContainerReason(sb.id)
				sb.recoverable = false
				sb.pending = false
				sb.updatedAt = time.Now()
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
			from := sb.state
			sb.state = next
			s.recordStateLocked(sb, from)
			sb.updatedAt = time.Now()
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
		s.recordDeletionLocked(sb)
		sb.name = fmt.Sprintf("DESTROYED_%s_%d", sb.name, time.Now().UnixMilli())
	}
	sb.desired = StateDestroyed
}

// awaitSettled waits (bounded by startWait and ctx) until a start-like
// transition ends or is held.
func (s *Server) awaitSettled(ctx context.Context, sb *sandbox) {
	ctx, cancel := context.WithTimeout(ctx, DefaultStartWait)
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

// sandboxListItem is the SandboxListItem schema of api.openapi.yaml: what
// GET /sandbox lists for each sandbox.
type sandboxListItem struct {
	ID                  string            `json:"id"`
	OrganizationID      string            `json:"organizationId"`
	Name                string            `json:"name"`
	Snapshot            string            `json:"snapshot,omitempty"`
	User                string            `json:"user"`
	Labels              map[string]string `json:"labels"`
	Public              bool              `json:"public"`
	Target              string            `json:"target"`
	CPU                 int               `json:"cpu"`
	GPU                 int               `json:"gpu"`
	GPUType             string            `json:"gpuType,omitempty"`
	Memory              int               `json:"memory"`
	Disk                int               `json:"disk"`
	State               string            `json:"state"`
	DesiredState        string            `json:"desiredState"`
	ErrorReason         string            `json:"errorReason,omitempty"`
	Recoverable         bool              `json:"recoverable"`
	BackupState         string            `json:"backupState"`
	AutoStopInterval    int               `json:"autoStopInterval"`
	AutoArchiveInterval int               `json:"autoArchiveInterval"`
	AutoDeleteInterval  int               `json:"autoDeleteInterval"`
	CreatedAt           string            `json:"createdAt"`
	UpdatedAt           string            `json:"updatedAt"`
	LastActivityAt      string            `json:"lastActivityAt"`
	SandboxClass        string            `json:"sandboxClass"`
	DaemonVersion       string            `json:"daemonVersion"`
	RunnerID            string            `json:"runnerId"`
	ToolboxProxyURL     string            `json:"toolboxProxyUrl"`
	// AutoDestroyAt is the proposed wall-clock expiry (docs/behavior.md#ttl); absent
	// without a TTL.
	AutoDestroyAt string `json:"autoDestroyAt,omitempty"`
}

// sandboxDTO is the Sandbox schema: a list item plus what only a full
// answer (get, create, lifecycle calls, the paginated listing) carries.
type sandboxDTO struct {
	sandboxListItem
	Env              map[string]string `json:"env"`
	NetworkBlockAll  bool              `json:"networkBlockAll"`
	NetworkAllowList *string           `json:"networkAllowList,omitempty"`
	DomainAllowList  *string           `json:"domainAllowList,omitempty"`
	Volumes          []volume          `json:"volumes,omitempty"`
	BuildInfo        *buildInfo        `json:"buildInfo,omitempty"`
}

func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// listItemLocked renders the sandbox as a SandboxListItem.
func (sb *sandbox) listItemLocked(toolboxURL string) sandboxListItem {
	d := sandboxListItem{
		ID: sb.id, OrganizationID: sb.orgID, Name: sb.name, Snapshot: sb.snapshot, User: sb.user,
		Labels: copyMap(sb.labels), Public: sb.public, Target: sb.target,
		CPU: sb.cpu, GPU: sb.gpu, GPUType: sb.gpuType, Memory: sb.memory, Disk: sb.disk,
		State: sb.state, DesiredState: sb.desired, ErrorReason: sb.errorReason, Recoverable: sb.recoverable,
		BackupState: sb.backupState, AutoStopInterval: sb.autoStop, AutoArchiveInterval: sb.autoArchive,
		AutoDeleteInterval: sb.autoDelete, CreatedAt: isoTime(sb.createdAt), UpdatedAt: isoTime(sb.updatedAt),
		LastActivityAt: isoTime(sb.lastActivity), SandboxClass: "container", DaemonVersion: daemonVersion,
		RunnerID: "runner-daytonatest", ToolboxProxyURL: toolboxURL,
	}
	if !sb.autoDestroyAt.IsZero() {
		d.AutoDestroyAt = isoTime(sb.autoDestroyAt)
	}
	return d
}

// dtoLocked renders the sandbox as a (full) Sandbox.
func (sb *sandbox) dtoLocked(toolboxURL string) sandboxDTO {
	return sandboxDTO{
		sandboxListItem:  sb.listItemLocked(toolboxURL),
		Env:              copyMap(sb.env),
		NetworkBlockAll:  sb.networkBlockAll,
		NetworkAllowList: sb.networkAllowList,
		DomainAllowList:  sb.domainAllowList,
		Volumes:          sb.volumes,
		BuildInfo:        sb.build,
	}
}
