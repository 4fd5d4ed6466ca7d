package daytonatest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
)

func (c *call) reply(status int) {
	c.s.mu.Lock()
	d := c.sb.dtoLocked(c.s.baseFor(c.r) + ToolboxPrefix)
	c.s.mu.Unlock()
	writeJSON(c.w, status, d)
}

func (c *call) apiErr(status int, msg string) { writeAPIError(c.w, c.r, status, msg) }

// msgInProgress is Daytona's 409 refusal of a lifecycle call during a
// transition.
const msgInProgress = "Sandbox state change in progress"

// refuseLocked releases the server lock a lifecycle handler holds and
// answers with an API error.
func (c *call) refuseLocked(status int, msg string) {
	c.s.mu.Unlock()
	c.apiErr(status, msg)
}

// needSandbox writes 404 unless the path named a visible sandbox.
func (c *call) needSandbox() bool {
	if c.sb != nil {
		c.s.mu.Lock()
		ok := c.sb.visibleLocked()
		c.s.mu.Unlock()
		if ok {
			return true
		}
	}
	key := c.param("sandboxIdOrName")
	if key == "" {
		key = c.param("sandboxId")
	}
	c.apiErr(http.StatusNotFound, fmt.Sprintf("Sandbox with ID or name %s not found", key))
	return false
}

var badName = regexp.MustCompile(`(?i)<[a-z/!][^>]*>|[a-z][a-z0-9+.-]*://|www\.`)

type createReq struct {
	Name                *string           `json:"name"`
	Snapshot            *string           `json:"snapshot"`
	User                string            `json:"user"`
	Env                 map[string]string `json:"env"`
	Labels              map[string]string `json:"labels"`
	Public              bool              `json:"public"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	NetworkAllowList    *string           `json:"networkAllowList"`
	DomainAllowList     *string           `json:"domainAllowList"`
	Target              string            `json:"target"`
	CPU                 *int              `json:"cpu"`
	GPU                 *int              `json:"gpu"`
	Memory              *int              `json:"memory"`
	Disk                *int              `json:"disk"`
	AutoStopInterval    *int              `json:"autoStopInterval"`
	AutoArchiveInterval *int              `json:"autoArchiveInterval"`
	AutoDeleteInterval  *int              `json:"autoDeleteInterval"`
	// TTLMinutes is the proposed create field of docs/behavior.md#ttl.
	TTLMinutes *int     `json:"ttlMinutes"`
	Volumes    []volume `json:"volumes"`
	BuildInfo  *struct {
		DockerfileContent string   `json:"dockerfileContent"`
		ContextHashes     []string `json:"contextHashes"`
	} `json:"buildInfo"`
}

func apiCreate(c *call) {
	s := c.s
	var req createReq
	if err := json.NewDecoder(c.r.Body).Decode(&req); err != nil {
		c.apiErr(http.StatusBadRequest, "Invalid request body")
		return
	}
	name := ""
	if req.Name != nil {
		name = *req.Name
		if badName.MatchString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0 {
			c.apiErr(http.StatusBadRequest, "name must not contain HTML tags, URLs, or control characters")
			return
		}
	}
	if req.BuildInfo != nil && req.Snapshot != nil && *req.Snapshot != "" {
		c.apiErr(http.StatusBadRequest, "Cannot specify a snapshot when using a build info entry")
		return
	}
	if req.BuildInfo == nil && (req.CPU != nil || req.Memory != nil || req.Disk != nil || req.GPU != nil) {
		c.apiErr(http.StatusBadRequest, "Cannot specify Sandbox resources when using a snapshot")
		return
	}
	if req.BuildInfo != nil && strings.TrimSpace(req.BuildInfo.DockerfileContent) == "" {
		c.apiErr(http.StatusBadRequest, "dockerfileContent should not be empty")
		return
	}
	for _, iv := range []struct {
		v   *int
		msg string
	}{{req.AutoStopInterval, "Auto-stop interval must be non-negative"}, {req.AutoArchiveInterval, "Auto-archive interval must be non-negative"}} {
		if iv.v != nil && *iv.v < 0 {
			c.apiErr(http.StatusBadRequest, iv.msg)
			return
		}
	}
	for k := range req.Env {
		if !envKeyRE.MatchString(k) {
			c.apiErr(http.StatusBadRequest, fmt.Sprintf("Invalid environment variable name: %s", k))
			return
		}
	}

	s.mu.Lock()
	if name != "" {
		for _, id := range s.order {
			if o := s.sandboxes[id]; o.name == name && o.state != StateDestroyed {
				c.refuseLocked(http.StatusConflict, fmt.Sprintf("Sandbox with name %s already exists", name))
				return
			}
		}
	}
	sb, err := s.newSandboxLocked(name, req.User)
	if err != nil {
		c.refuseLocked(http.StatusInternalServerError, "An unexpected error occurred.")
		return
	}
	if req.Env != nil {
		sb.env = copyMap(req.Env)
	}
	if req.Labels != nil {
		sb.labels = copyMap(req.Labels)
	}
	sb.public = req.Public
	sb.networkBlockAll = req.NetworkBlockAll
	sb.networkAllowList = req.NetworkAllowList
	sb.domainAllowList = req.DomainAllowList
	if req.Target != "" {
		sb.target = req.Target
	}
	if req.AutoStopInterval != nil {
		sb.autoStop = *req.AutoStopInterval
	}
	if req.AutoArchiveInterval != nil {
		sb.autoArchive = clampArchive(*req.AutoArchiveInterval)
	}
	if req.AutoDeleteInterval != nil {
		sb.autoDelete = *req.AutoDeleteInterval
		if sb.autoDelete < 0 {
			sb.autoDelete = -1
		}
	}
	if req.TTLMinutes != nil && *req.TTLMinutes > 0 {
		sb.autoDestroyAt = time.Now().Add(time.Duration(*req.TTLMinutes) * time.Minute)
	}
	sb.volumes = req.Volumes
	first, rest := StateCreating, []string{StateStarted}
	if req.BuildInfo != nil {
		if req.CPU != nil {
			sb.cpu = *req.CPU
		}
		if req.Memory != nil {
			sb.memory = *req.Memory
		}
		if req.Disk != nil {
			sb.disk = *req.Disk
		}
		if req.GPU != nil {
			sb.gpu = *req.GPU
		}
		now := isoTime(time.Now())
		sb.build = &buildInfo{DockerfileContent: req.BuildInfo.DockerfileContent, ContextHashes: req.BuildInfo.ContextHashes,
			CreatedAt: now, UpdatedAt: now, SnapshotRef: "daytonatest-build-" + sb.id[:8]}
		sb.snapshot = sb.build.SnapshotRef
		first, rest = StatePendingBuild, []string{StateCreating, StateStarted}
	} else {
		sb.snapshot = "daytonaio/sandbox:latest"
		if req.Snapshot != nil && *req.Snapshot != "" {
			sb.snapshot = *req.Snapshot
		}
	}
	sb.diskBytes = int64(sb.disk) << 30
	if s.cfg.diskBytes > 0 {
		sb.diskBytes = s.cfg.diskBytes
	}
	s.sandboxes[sb.id] = sb
	s.order = append(s.order, sb.id)
	c.sb = sb
	c.rec.Sandbox = sb.id
	s.transitionLocked(sb, StateStarted, first, rest...)
	s.mu.Unlock()

	if req.BuildInfo == nil {
		s.awaitSettled(c.ctx(), sb)
		s.mu.Lock()
		st, reason := sb.state, sb.errorReason
		s.mu.Unlock()
		if st == StateError || st == StateBuildFailed {
			c.apiErr(http.StatusBadRequest, "Sandbox failed to start: "+reason)
			return
		}
	}
	c.reply(http.StatusOK)
}

func clampArchive(v int) int {
	if v == 0 || v > 43200 {
		return 43200
	}
	return v
}

func apiGet(c *call) {
	if c.needSandbox() {
		c.reply(http.StatusOK)
	}
}

func apiDelete(c *call) {
	if !c.needSandbox() {
		return
	}
	s := c.s
	s.mu.Lock()
	sb := c.sb
	switch sb.state {
	case StateDestroying, StateStopped, StateStarted, StateArchived, StateError, StateBuildFailed, StateArchiving, StatePendingBuild:
	default:
		c.refuseLocked(http.StatusConflict, msgInProgress)
		return
	}
	if sb.pending && sb.state != StatePendingBuild && sb.state != StateArchiving && sb.desired != StateDestroyed {
		c.refuseLocked(http.StatusConflict, msgInProgress)
		return
	}
	old := sb.state
	s.beginDeleteLocked(sb)
	d := sb.dtoLocked(s.baseFor(c.r) + ToolboxPrefix)
	switch old {
	case StateDestroying:
	case StateError, StateBuildFailed:
		// Already hidden (errored + desired destroyed, docs/daytona.md#get-by-id-or-name): no visible
		// destroying phase, so GET by id stays 404 from now on.
		s.transitionLocked(sb, StateDestroyed, old, StateDestroyed)
	default:
		s.transitionLocked(sb, StateDestroyed, old, StateDestroying, StateDestroyed)
	}
	s.mu.Unlock()
	sb.killAll("sandbox deleted")
	writeJSON(c.w, http.StatusOK, d)
}

func apiStart(c *call) {
	if !c.needSandbox() {
		return
	}
	s := c.s
	s.mu.Lock()
	sb := c.sb
	if f := c.fault; f != nil && f.RefuseStartWhileStopping && sb.state == StateStarted {
		s.beginStopLocked(sb)
		s.mu.Unlock()
		sb.killAll("sandbox stopped")
		if f.Status != 0 {
			writeFaultStatus(c.w, c.r, c.plane, f)
		} else {
			c.apiErr(http.StatusConflict, msgInProgress)
		}
		return
	}
	switch {
	case sb.state == StateStarted && !sb.pending:
		s.mu.Unlock()
		c.reply(http.StatusOK)
		return
	case sb.state == StateError || sb.state == StateBuildFailed:
		c.refuseLocked(http.StatusBadRequest, "Sandbox is in an errored state")
		return
	case sb.pending:
		c.refuseLocked(http.StatusConflict, msgInProgress)
		return
	case sb.state == StateStopped:
		s.transitionLocked(sb, StateStarted, StateStarting, StateStarted)
	case sb.state == StateArchived:
		s.transitionLocked(sb, StateStarted, StateRestoring, StateStarted)
		s.mu.Unlock()
		c.reply(http.StatusOK)
		return
	default:
		c.refuseLocked(http.StatusBadRequest, "Sandbox is not in valid state")
		return
	}
	s.mu.Unlock()
	c.replyAfterStart()
}

// replyAfterStart waits for started (bounded) and answers like Daytona.
func (c *call) replyAfterStart() {
	c.s.awaitSettled(c.ctx(), c.sb)
	c.s.mu.Lock()
	st, reason := c.sb.state, c.sb.errorReason
	c.s.mu.Unlock()
	if st == StateError || st == StateBuildFailed {
		c.apiErr(http.StatusBadRequest, "Sandbox failed to start: "+reason)
		return
	}
	c.reply(http.StatusOK)
}

func apiStop(c *call) {
	if !c.needSandbox() {
		return
	}
	s := c.s
	s.mu.Lock()
	sb := c.sb
	switch {
	case sb.state == StateError || sb.state == StateBuildFailed:
		c.refuseLocked(http.StatusBadRequest, "Sandbox is in an errored state")
		return
	case sb.pending:
		c.refuseLocked(http.StatusConflict, msgInProgress)
		return
	case sb.state != StateStarted:
		c.refuseLocked(http.StatusBadRequest, "Sandbox is not in a stoppable state")
		return
	}
	s.beginStopLocked(sb)
	s.mu.Unlock()
	sb.killAll("sandbox stopped")
	c.reply(http.StatusOK)
}

func apiRecover(c *call) {
	if !c.needSandbox() {
		return
	}
	s := c.s
	s.mu.Lock()
	sb := c.sb
	switch {
	case sb.state != StateError:
		c.refuseLocked(http.StatusBadRequest, "Sandbox must be in error state to recover")
		return
	case !sb.recoverable:
		c.refuseLocked(http.StatusBadRequest, "Sandbox is not in a recoverable state")
		return
	}
	sb.errorReason = ""
	sb.recoverable = false
	skip := c.r.URL.Query().Get("skipStart") == "true"
	if skip {
		s.transitionLocked(sb, StateStopped, StateStopped)
		s.mu.Unlock()
		c.reply(http.StatusOK)
		return
	}
	s.transitionLocked(sb, StateStarted, StateStopped, StateStarting, StateStarted)
	s.mu.Unlock()
	c.replyAfterStart()
}

func apiArchive(c *call) {
	if !c.needSandbox() {
		return
	}
	s := c.s
	s.mu.Lock()
	sb := c.sb
	switch {
	case sb.pending:
		c.refuseLocked(http.StatusConflict, msgInProgress)
		return
	case sb.state != StateStopped:
		c.refuseLocked(http.StatusBadRequest, "Sandbox is not stopped")
		return
	case sb.autoDelete == 0:
		c.refuseLocked(http.StatusBadRequest, "Ephemeral sandboxes cannot be archived")
		return
	}
	s.transitionLocked(sb, StateArchived, StateArchiving, StateArchived)
	s.mu.Unlock()
	c.reply(http.StatusOK)
}

// applySetter runs set under the lock unless the fault says the setter
// never settles, in which case the reply shows the change but the record
// keeps the old values.
func (c *call) applySetter(status int, set func(sb *sandbox)) {
	s := c.s
	s.mu.Lock()
	if c.fault != nil && c.fault.Unsettled {
		sb := c.sb
		labels, stop, arch, del, pub := copyMap(sb.labels), sb.autoStop, sb.autoArchive, sb.autoDelete, sb.public
		nb, nal, dal := sb.networkBlockAll, sb.networkAllowList, sb.domainAllowList
		set(sb)
		d := sb.dtoLocked(s.baseFor(c.r) + ToolboxPrefix)
		sb.labels, sb.autoStop, sb.autoArchive, sb.autoDelete, sb.public = labels, stop, arch, del, pub
		sb.networkBlockAll, sb.networkAllowList, sb.domainAllowList = nb, nal, dal
		s.mu.Unlock()
		writeJSON(c.w, status, d)
		return
	}
	set(c.sb)
	c.sb.updatedAt = time.Now()
	s.notifyLocked()
	s.mu.Unlock()
	c.reply(status)
}

func apiLabels(c *call) {
	if !c.needSandbox() {
		return
	}
	var body struct {
		Labels map[string]string `json:"labels"`
	}
	if err := json.NewDecoder(c.r.Body).Decode(&body); err != nil || body.Labels == nil {
		c.apiErr(http.StatusBadRequest, "labels must be an object")
		return
	}
	c.applySetter(http.StatusOK, func(sb *sandbox) { sb.labels = copyMap(body.Labels) })
}

func apiInterval(kind string) handlerFunc {
	return func(c *call) {
		if !c.needSandbox() {
			return
		}
		v, err := strconv.Atoi(c.param("interval"))
		if err != nil {
			c.apiErr(http.StatusBadRequest, "Validation failed (numeric string is expected)")
			return
		}
		switch kind {
		case "autostop":
			if v < 0 {
				c.apiErr(http.StatusBadRequest, "Auto-stop interval must be non-negative")
				return
			}
			c.applySetter(http.StatusCreated, func(sb *sandbox) { sb.autoStop = v })
		case "autoarchive":
			if v < 0 {
				c.apiErr(http.StatusBadRequest, "Auto-archive interval must be non-negative")
				return
			}
			c.applySetter(http.StatusCreated, func(sb *sandbox) { sb.autoArchive = clampArchive(v) })
		case "autodelete":
			if v < 0 {
				v = -1
			}
			c.applySetter(http.StatusCreated, func(sb *sandbox) { sb.autoDelete = v })
		case "ttl":
			if v < 0 {
				c.apiErr(http.StatusBadRequest, "TTL must be non-negative")
				return
			}
			now := time.Now()
			c.applySetter(http.StatusCreated, func(sb *sandbox) {
				sb.autoDestroyAt = time.Time{}
				if v > 0 {
					sb.autoDestroyAt = now.Add(time.Duration(v) * time.Minute)
				}
			})
		}
	}
}

func apiPublic(c *call) {
	if !c.needSandbox() {
		return
	}
	v, err := strconv.ParseBool(c.param("isPublic"))
	if err != nil {
		c.apiErr(http.StatusBadRequest, "Validation failed (boolean string is expected)")
		return
	}
	c.applySetter(http.StatusCreated, func(sb *sandbox) { sb.public = v })
}

func apiNetwork(c *call) {
	if !c.needSandbox() {
		return
	}
	var body struct {
		NetworkBlockAll  *bool   `json:"networkBlockAll"`
		NetworkAllowList *string `json:"networkAllowList"`
		DomainAllowList  *string `json:"domainAllowList"`
	}
	if err := json.NewDecoder(c.r.Body).Decode(&body); err != nil ||
		(body.NetworkBlockAll == nil && body.NetworkAllowList == nil && body.DomainAllowList == nil) {
		c.apiErr(http.StatusBadRequest, "At least one network setting must be provided")
		return
	}
	c.applySetter(http.StatusOK, func(sb *sandbox) {
		if body.NetworkBlockAll != nil {
			sb.networkBlockAll = *body.NetworkBlockAll
		}
		if body.NetworkAllowList != nil {
			sb.networkAllowList = body.NetworkAllowList
		}
		if body.DomainAllowList != nil {
			sb.domainAllowList = body.DomainAllowList
		}
	})
}

func apiLastActivity(c *call) {
	if !c.needSandbox() {
		return
	}
	c.s.mu.Lock()
	c.sb.lastActivity = time.Now()
	c.s.notifyLocked()
	c.s.mu.Unlock()
	c.w.WriteHeader(http.StatusCreated)
}

func apiToolboxURL(c *call) {
	if c.needSandbox() {
		writeJSON(c.w, http.StatusOK, map[string]string{"url": c.s.baseFor(c.r) + ToolboxPrefix})
	}
}

func apiPreviewURL(c *call) {
	if !c.needSandbox() {
		return
	}
	port, err := strconv.Atoi(c.param("port"))
	if err != nil || port < 1 || port > 65535 {
		c.apiErr(http.StatusBadRequest, "Invalid port")
		return
	}
	c.s.mu.Lock()
	tok := c.sb.previewToken
	c.s.mu.Unlock()
	writeJSON(c.w, http.StatusOK, map[string]string{
		"sandboxId": c.sb.id,
		"url":       previewURL(port, c.sb.id),
		"token":     tok,
	})
}
