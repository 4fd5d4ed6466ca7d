package daytonatest

import (
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
)

// StateSnapshotting is the sandbox state while a snapshot of it is taken.
const StateSnapshotting = "snapshotting"

// snapshot is a snapshot captured from a sandbox.
type snapshot struct {
	id, name, sourceID string
	source             *sandbox
	gen                int // the source's transition generation of the capture
	createdAt          time.Time
}

// SnapshotInfo is what a test sees of a captured snapshot.
type SnapshotInfo struct {
	ID, Name, State string
	SourceSandboxID string
}

// stateLocked: pending while its source is still snapshotting for it.
func (sn *snapshot) stateLocked() string {
	if sn.source != nil && sn.source.gen == sn.gen && sn.source.state == StateSnapshotting {
		return "pending"
	}
	return "active"
}

// apiCreateSandboxSnapshot is POST /sandbox/{sandboxIdOrName}/snapshot: the
// sandbox goes to snapshotting and back to its state; the snapshot is
// pending until then, active after.
func apiCreateSandboxSnapshot(c *call) {
	if !c.needSandbox() {
		return
	}
	var req struct {
		Name          *string `json:"name"`
		IncludeMemory bool    `json:"includeMemory"`
	}
	body, _ := io.ReadAll(io.LimitReader(c.r.Body, 1<<20))
	if err := json.Unmarshal(body, &req); err != nil || req.Name == nil || strings.TrimSpace(*req.Name) == "" {
		c.apiErr(http.StatusBadRequest, "name must be a non-empty string")
		return
	}
	if req.IncludeMemory {
		c.apiErr(http.StatusBadRequest, "Container sandboxes do not support memory snapshots")
		return
	}
	name := *req.Name
	s := c.s
	s.mu.Lock()
	sb := c.sb
	if sb.pending || (sb.state != StateStarted && sb.state != StateStopped) {
		c.refuseLocked(http.StatusConflict, msgInProgress)
		return
	}
	for _, sn := range s.access.snapshots {
		if sn.name == name {
			c.refuseLocked(http.StatusConflict, "Snapshot with name "+name+" already exists")
			return
		}
	}
	old := sb.state
	s.transitionLocked(sb, old, StateSnapshotting, old)
	if s.access.snapshots == nil {
		s.access.snapshots = map[string]*snapshot{}
	}
	sn := &snapshot{id: uuid.NewString(), name: name, sourceID: sb.id, source: sb, gen: sb.gen, createdAt: time.Now()}
	s.access.snapshots[sn.id] = sn
	delete(s.access.deleted, name)
	s.mu.Unlock()
	c.reply(http.StatusOK)
}

// findSnapshotLocked finds a captured snapshot by id, then by name.
func (s *Server) findSnapshotLocked(idOrName string) *snapshot {
	if sn := s.access.snapshots[idOrName]; sn != nil {
		return sn
	}
	for _, sn := range s.access.snapshots {
		if sn.name == idOrName {
			return sn
		}
	}
	return nil
}

// implicitSnapshotID is the id of a snapshot the emulator was never asked
// to capture: it creates sandboxes from any snapshot name, so every such
// name is an active snapshot until it is deleted.
const implicitSnapshotID = "snap-"

// apiGetSnapshot is GET /snapshots/{id} (id or name).
func apiGetSnapshot(c *call) {
	key := c.param("id")
	c.s.mu.Lock()
	sn := c.s.findSnapshotLocked(key)
	var dto map[string]any
	switch {
	case sn != nil:
		dto = snapshotDTO(sn.id, sn.name, sn.stateLocked(), sn.createdAt)
	case strings.TrimSpace(key) != "" && !c.s.access.deleted[strings.TrimPrefix(key, implicitSnapshotID)]:
		name := strings.TrimPrefix(key, implicitSnapshotID)
		dto = snapshotDTO(implicitSnapshotID+name, name, "active", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	c.s.mu.Unlock()
	if dto == nil {
		c.apiErr(http.StatusNotFound, "Snapshot "+key+" not found")
		return
	}
	writeJSON(c.w, http.StatusOK, dto)
}

// apiDeleteSnapshot is DELETE /snapshots/{id} (by id only).
func apiDeleteSnapshot(c *call) {
	id := c.param("id")
	s := c.s
	s.mu.Lock()
	name := ""
	if sn := s.access.snapshots[id]; sn != nil {
		name = sn.name
		delete(s.access.snapshots, id)
	} else if n, ok := strings.CutPrefix(id, implicitSnapshotID); ok && n != "" && !s.access.deleted[n] {
		name = n
	}
	if name == "" {
		s.mu.Unlock()
		c.apiErr(http.StatusNotFound, "Snapshot with ID "+id+" not found")
		return
	}
	if s.access.deleted == nil {
		s.access.deleted = map[string]bool{}
	}
	s.access.deleted[name] = true
	s.notifyLocked()
	s.mu.Unlock()
	writeEmpty(c.w, http.StatusOK)
}

func snapshotDTO(id, name, state string, created time.Time) map[string]any {
	return map[string]any{"id": id, "organizationId": DefaultOrganizationID, "general": false,
		"name": name, "imageName": name, "state": state, "entrypoint": nil, "errorReason": nil,
		"cpu": 1, "gpu": 0, "mem": 1, "disk": 3, "size": nil,
		"createdAt": isoTime(created), "updatedAt": isoTime(created), "lastUsedAt": nil}
}

// Snapshots returns the snapshots captured from sandboxes and not deleted,
// by name.
func (s *Server) Snapshots() []SnapshotInfo {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SnapshotInfo
	for _, sn := range s.access.snapshots {
		out = append(out, SnapshotInfo{ID: sn.id, Name: sn.name, State: sn.stateLocked(), SourceSandboxID: sn.sourceID})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
