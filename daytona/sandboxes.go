package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// SandboxesService is the control plane (docs/daytona.md#sandboxes).
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox
type SandboxesService service

// SandboxState is a sandbox's state (docs/daytona.md#states).
type SandboxState string

// Sandbox states.
const (
	StateCreating         SandboxState = "creating"
	StateRestoring        SandboxState = "restoring"
	StateDestroyed        SandboxState = "destroyed"
	StateDestroying       SandboxState = "destroying"
	StateStarted          SandboxState = "started"
	StateStopped          SandboxState = "stopped"
	StateStarting         SandboxState = "starting"
	StateStopping         SandboxState = "stopping"
	StateError            SandboxState = "error"
	StateBuildFailed      SandboxState = "build_failed"
	StatePendingBuild     SandboxState = "pending_build"
	StateBuildingSnapshot SandboxState = "building_snapshot"
	StateUnknown          SandboxState = "unknown"
	StatePullingSnapshot  SandboxState = "pulling_snapshot"
	StateArchived         SandboxState = "archived"
	StateArchiving        SandboxState = "archiving"
	StateResizing         SandboxState = "resizing"
	StateSnapshotting     SandboxState = "snapshotting"
	StateForking          SandboxState = "forking"
	StatePausing          SandboxState = "pausing"
	StatePaused           SandboxState = "paused"
	StateResuming         SandboxState = "resuming"
)

// Sandbox is the sandbox DTO of GET /sandbox/{id} and of list items
// (docs/daytona.md#sandbox-object). Interval fields are minutes; nil means absent.
type Sandbox struct {
	ID                  string            `json:"id"`
	OrganizationID      string            `json:"organizationId,omitempty"`
	Name                string            `json:"name"`
	Snapshot            string            `json:"snapshot,omitempty"`
	User                string            `json:"user,omitempty"`
	Env                 map[string]string `json:"env,omitempty"`
	Labels              map[string]string `json:"labels"`
	Public              bool              `json:"public"`
	Target              string            `json:"target,omitempty"`
	CPU                 float64           `json:"cpu"`
	GPU                 float64           `json:"gpu"`
	Memory              float64           `json:"memory"`
	Disk                float64           `json:"disk"`
	GPUType             string            `json:"gpuType,omitempty"`
	State               SandboxState      `json:"state"`
	DesiredState        SandboxState      `json:"desiredState,omitempty"`
	ErrorReason         string            `json:"errorReason,omitempty"`
	Recoverable         bool              `json:"recoverable"`
	BackupState         string            `json:"backupState,omitempty"`
	AutoStopInterval    *int              `json:"autoStopInterval,omitempty"`
	AutoArchiveInterval *int              `json:"autoArchiveInterval,omitempty"`
	AutoDeleteInterval  *int              `json:"autoDeleteInterval,omitempty"`
	BuildInfo           *BuildInfo        `json:"buildInfo,omitempty"`
	CreatedAt           string            `json:"createdAt,omitempty"`
	UpdatedAt           string            `json:"updatedAt,omitempty"`
	LastActivityAt      string            `json:"lastActivityAt,omitempty"`
	SandboxClass        string            `json:"sandboxClass,omitempty"`
	DaemonVersion       string            `json:"daemonVersion,omitempty"`
	RunnerID            string            `json:"runnerId,omitempty"`
	ToolboxProxyURL     string            `json:"toolboxProxyUrl"`
	// AutoDestroyAt is the wall-clock destroy deadline. NOT in v0.190.0:
	// proposed by docs/behavior.md#ttl, unconfirmed (see rSetTTL).
	AutoDestroyAt string `json:"autoDestroyAt,omitempty"`
}

// BuildInfo is the image build a sandbox came from.
type BuildInfo struct {
	DockerfileContent string   `json:"dockerfileContent,omitempty"`
	ContextHashes     []string `json:"contextHashes,omitempty"`
	SnapshotRef       string   `json:"snapshotRef,omitempty"`
}

// Ref returns the handle toolbox calls need.
func (s *Sandbox) Ref() SandboxRef {
	return SandboxRef{ID: s.ID, ToolboxProxyURL: s.ToolboxProxyURL}
}

// Destroying reports whether the sandbox is being or has been destroyed
// (desiredState destroyed): list results hide these.
func (s *Sandbox) Destroying() bool {
	return s.DesiredState == StateDestroyed || s.State == StateDestroyed || s.State == StateDestroying
}

// ContainerMissing reports the lost-container condition of
// docs/daytona.md#missing-container (state error with the exact Docker errorReason).
func (s *Sandbox) ContainerMissing() bool {
	return s.State == StateError && IsMissingContainerReason(s.ErrorReason, s.ID)
}

// CreateBuildInfo is the image path of a create request.
type CreateBuildInfo struct {
	DockerfileContent string   `json:"dockerfileContent"`
	ContextHashes     []string `json:"contextHashes,omitempty"`
}

// CreateSandboxRequest is the body of POST /sandbox (docs/daytona.md#create).
// Set either Snapshot or Image (or BuildInfo). Resources (CPU, Memory, Disk,
// GPU) are only allowed with an image. Interval pointers: nil = server
// default; new(15) sets one.
type CreateSandboxRequest struct {
	Name                string            `json:"name,omitempty"`
	Snapshot            string            `json:"snapshot,omitempty"`
	User                string            `json:"user,omitempty"`
	Env                 map[string]string `json:"env,omitempty"`
	Labels              map[string]string `json:"labels,omitempty"`
	Public              bool              `json:"public,omitempty"`
	Target              string            `json:"target,omitempty"`
	CPU                 int               `json:"cpu,omitempty"`
	GPU                 int               `json:"gpu,omitempty"`
	Memory              int               `json:"memory,omitempty"` // GiB
	Disk                int               `json:"disk,omitempty"`   // GiB
	GPUType             []string          `json:"gpuType,omitempty"`
	AutoStopInterval    *int              `json:"autoStopInterval,omitempty"`
	AutoArchiveInterval *int              `json:"autoArchiveInterval,omitempty"`
	AutoDeleteInterval  *int              `json:"autoDeleteInterval,omitempty"`
	BuildInfo           *CreateBuildInfo  `json:"buildInfo,omitempty"`
	// TTLMinutes is a wall-clock lifetime. NOT in v0.190.0: the field name
	// is the one proposed by docs/behavior.md#ttl, unconfirmed.
	TTLMinutes *int `json:"ttlMinutes,omitempty"`

	// Image is a convenience: a non-empty Image becomes
	// BuildInfo{DockerfileContent: "FROM <image>\n"} as the TS SDK does.
	Image string `json:"-"`
}

// Create creates a sandbox. It is never retried: after a timeout or 5xx,
// look the sandbox up by the request's unique Name (docs/daytona.md#quotas-rate-limits-and-names).
// With a snapshot the server waits up to 30 s for started; use
// [SandboxesService.WaitUntilStarted] for the rest.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/POST/sandbox
func (s *SandboxesService) Create(ctx context.Context, req *CreateSandboxRequest) (*Sandbox, *Response, error) {
	if req == nil {
		req = &CreateSandboxRequest{}
	}
	body := *req
	if body.Image != "" {
		if body.BuildInfo != nil || body.Snapshot != "" {
			return nil, nil, fmt.Errorf("%w: set one of Image, BuildInfo or Snapshot", ErrInvalidArgument)
		}
		body.BuildInfo = &CreateBuildInfo{DockerfileContent: "FROM " + body.Image + "\n"}
	}
	if body.BuildInfo != nil && body.Snapshot != "" {
		return nil, nil, fmt.Errorf("%w: set one of Image, BuildInfo or Snapshot", ErrInvalidArgument)
	}
	if body.BuildInfo == nil && (body.CPU != 0 || body.Memory != 0 || body.Disk != 0 || body.GPU != 0) {
		return nil, nil, fmt.Errorf("%w: resources (cpu, memory, disk, gpu) need an image, not a snapshot", ErrInvalidArgument)
	}
	for _, p := range []*int{body.AutoStopInterval, body.AutoArchiveInterval} {
		if p != nil && *p < 0 {
			return nil, nil, fmt.Errorf("%w: auto-stop and auto-archive intervals must be non-negative", ErrInvalidArgument)
		}
	}
	if body.TTLMinutes != nil && *body.TTLMinutes <= 0 {
		return nil, nil, fmt.Errorf("%w: ttlMinutes must be a positive whole number of minutes", ErrInvalidArgument)
	}
	if body.Target == "" {
		body.Target = s.client.target
	}
	sb := new(Sandbox)
	r, err := s.client.do(ctx, &call{rt: rCreateSandbox, body: jsonBody(&body)}, sb)
	if err != nil {
		return nil, r, err
	}
	return sb, r, nil
}

// Get fetches a sandbox by ID or name. 404 (ErrNotFound) once destroyed;
// by name right after delete.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/GET/sandbox/{sandboxIdOrName}
func (s *SandboxesService) Get(ctx context.Context, idOrName string) (*Sandbox, *Response, error) {
	return s.sandboxCall(ctx, &call{rt: rGetSandbox, args: []string{idOrName}})
}

func (s *SandboxesService) sandboxCall(ctx context.Context, cl *call) (*Sandbox, *Response, error) {
	sb := new(Sandbox)
	r, err := s.client.do(ctx, cl, sb)
	if err != nil {
		return nil, r, err
	}
	return sb, r, nil
}

// Delete asks for deletion (asynchronous: the answer has desiredState
// destroyed and the name rewritten). A 404 is returned as ErrNotFound;
// [SandboxesService.DeleteAndWait] treats it as success.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/DELETE/sandbox/{sandboxIdOrName}
func (s *SandboxesService) Delete(ctx context.Context, idOrName string) (*Sandbox, *Response, error) {
	return s.sandboxCall(ctx, &call{rt: rDeleteSandbox, args: []string{idOrName}})
}

// DeleteAndWait deletes a sandbox and waits, under ctx, until GET by ID
// answers 404 or state destroyed. Deleting an unknown sandbox succeeds.
// Pass the ID when you have it: by name, a 404 right after delete is not
// proof that the sandbox is gone.
func (s *SandboxesService) DeleteAndWait(ctx context.Context, idOrName string) error {
	sb, _, err := s.Delete(ctx, idOrName)
	id := idOrName
	switch {
	case errors.Is(err, ErrNotFound):
		// Already gone (or never existed); still confirm by the given key below.
	case err != nil:
		return err
	default:
		if sb.ID != "" {
			id = sb.ID
		}
	}
	return s.WaitUntilGone(ctx, id)
}

// Start starts a sandbox (no-op if started). From stopped the server waits
// up to 30 s; use WaitUntilStarted for the rest.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/POST/sandbox/{sandboxIdOrName}/start
func (s *SandboxesService) Start(ctx context.Context, idOrName string) (*Sandbox, *Response, error) {
	return s.sandboxCall(ctx, &call{rt: rStartSandbox, args: []string{idOrName}})
}

// Stop stops a sandbox (asynchronous). force sends SIGKILL instead of
// SIGTERM. Ephemeral sandboxes are deleted by stop.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/POST/sandbox/{sandboxIdOrName}/stop
func (s *SandboxesService) Stop(ctx context.Context, idOrName string, force bool) (*Sandbox, *Response, error) {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	return s.sandboxCall(ctx, &call{rt: rStopSandbox, args: []string{idOrName}, query: q})
}

// Recover recovers a sandbox in state error with recoverable true. Unless
// skipStart, the server waits up to 30 s for started.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/POST/sandbox/{sandboxIdOrName}/recover
func (s *SandboxesService) Recover(ctx context.Context, idOrName string, skipStart bool) (*Sandbox, *Response, error) {
	var q url.Values
	if skipStart {
		q = url.Values{"skipStart": {"true"}}
	}
	return s.sandboxCall(ctx, &call{rt: rRecoverSandbox, args: []string{idOrName}, query: q})
}

// Archive archives a stopped sandbox.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/POST/sandbox/{sandboxIdOrName}/archive
func (s *SandboxesService) Archive(ctx context.Context, idOrName string) (*Sandbox, *Response, error) {
	return s.sandboxCall(ctx, &call{rt: rArchiveSandbox, args: []string{idOrName}})
}

// SetAutoStopInterval sets the auto-stop interval in minutes (0 disables).
// Any 2xx is success (the server answers 201); the returned sandbox is nil
// when the answer carried no DTO. Re-read the sandbox to confirm the value.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/POST/sandbox/{sandboxIdOrName}/autostop/{interval}
func (s *SandboxesService) SetAutoStopInterval(ctx context.Context, idOrName string, minutes int) (*Sandbox, *Response, error) {
	if minutes < 0 {
		return nil, nil, fmt.Errorf("%w: auto-stop interval must be non-negative", ErrInvalidArgument)
	}
	return s.setter(ctx, rSetAutostop, idOrName, minutes)
}

// SetAutoArchiveInterval sets the auto-archive interval in minutes
// (0 = the server maximum). Any 2xx is success; the returned sandbox is nil
// when the answer carried no DTO.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/POST/sandbox/{sandboxIdOrName}/autoarchive/{interval}
func (s *SandboxesService) SetAutoArchiveInterval(ctx context.Context, idOrName string, minutes int) (*Sandbox, *Response, error) {
	if minutes < 0 {
		return nil, nil, fmt.Errorf("%w: auto-archive interval must be non-negative", ErrInvalidArgument)
	}
	return s.setter(ctx, rSetAutoarchive, idOrName, minutes)
}

// SetAutoDeleteInterval sets the auto-delete interval in minutes (-1
// disables, 0 = delete when stopped; values below -1 are sent as -1). Any
// 2xx is success; the returned sandbox is nil when the answer carried no DTO.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/POST/sandbox/{sandboxIdOrName}/autodelete/{interval}
func (s *SandboxesService) SetAutoDeleteInterval(ctx context.Context, idOrName string, minutes int) (*Sandbox, *Response, error) {
	if minutes < -1 {
		minutes = -1
	}
	return s.setter(ctx, rSetAutodelete, idOrName, minutes)
}

// SetTTL sets a wall-clock lifetime in minutes: POST /sandbox/{id}/ttl/{ttlMinutes},
// official since the 0.218 clients, not in the v0.190.0 documents
// (docs/daytona.md#ttl, docs/behavior.md#ttl);
// against a server without it, expect ErrNotFound. Read the deadline back
// from [Sandbox.AutoDestroyAt].
func (s *SandboxesService) SetTTL(ctx context.Context, idOrName string, minutes int) (*Sandbox, *Response, error) {
	if minutes < 0 {
		return nil, nil, fmt.Errorf("%w: ttl must be non-negative", ErrInvalidArgument)
	}
	return s.setter(ctx, rSetTTL, idOrName, minutes)
}

// setter calls a POST …/{interval} route. The answer body is the full DTO
// in the code but tolerated empty: any 2xx counts as success.
func (s *SandboxesService) setter(ctx context.Context, rt *route, idOrName string, minutes int) (*Sandbox, *Response, error) {
	resp, r, err := s.client.send(ctx, &call{rt: rt, args: []string{idOrName, strconv.Itoa(minutes)}})
	if err != nil {
		return nil, r, err
	}
	defer resp.Body.Close()
	sb := new(Sandbox)
	if err := json.NewDecoder(limitJSON(resp.Body)).Decode(sb); err != nil || sb.ID == "" {
		return nil, r, nil
	}
	drain(resp.Body)
	return sb, r, nil
}

type labelsBody struct {
	Labels map[string]string `json:"labels"`
}

// ReplaceLabels replaces the whole label map (SDK-added labels disappear
// unless resent) and returns the labels the server now holds.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/PUT/sandbox/{sandboxIdOrName}/labels
func (s *SandboxesService) ReplaceLabels(ctx context.Context, idOrName string, labels map[string]string) (map[string]string, *Response, error) {
	if labels == nil {
		labels = map[string]string{}
	}
	var out labelsBody
	r, err := s.client.do(ctx, &call{rt: rReplaceLabels, args: []string{idOrName}, body: jsonBody(labelsBody{Labels: labels})}, &out)
	if err != nil {
		return nil, r, err
	}
	return out.Labels, r, nil
}

// UpdateLastActivity resets the sandbox's inactivity clock (keep-alive).
// Any 2xx is success.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/POST/sandbox/{sandboxId}/last-activity
func (s *SandboxesService) UpdateLastActivity(ctx context.Context, sandboxID string) (*Response, error) {
	return s.client.do(ctx, &call{rt: rLastActivity, args: []string{sandboxID}}, nil)
}

// PreviewURL is the answer of the preview-URL endpoint. Token is a secret:
// send it as X-Daytona-Preview-Token; never log it.
type PreviewURL struct {
	SandboxID string `json:"sandboxId"`
	URL       string `json:"url"`
	Token     string `json:"token"`
}

// SignedPreviewURL is a preview URL with the token embedded; the URL is a
// secret.
type SignedPreviewURL struct {
	SandboxID string `json:"sandboxId"`
	Port      int    `json:"port"`
	Token     string `json:"token"`
	URL       string `json:"url"`
}

// PreviewURL returns the preview URL and token for a port. The token is
// remembered and redacted from every later error of this client.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/GET/sandbox/{sandboxIdOrName}/ports/{port}/preview-url
func (s *SandboxesService) PreviewURL(ctx context.Context, idOrName string, port int) (*PreviewURL, *Response, error) {
	if port <= 0 || port > 65535 {
		return nil, nil, fmt.Errorf("%w: port out of range", ErrInvalidArgument)
	}
	out := new(PreviewURL)
	r, err := s.client.do(ctx, &call{rt: rPreviewURL, args: []string{idOrName, strconv.Itoa(port)}}, out)
	if err != nil {
		return nil, r, err
	}
	s.client.rememberSecret(out.Token)
	return out, r, nil
}

// SignedPreviewURL returns a preview URL with an embedded token valid for
// expiresInSeconds (1 s-24 h; 0 = server default 60 s). Token and URL are
// remembered and redacted from later errors.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/GET/sandbox/{sandboxIdOrName}/ports/{port}/signed-preview-url
func (s *SandboxesService) SignedPreviewURL(ctx context.Context, idOrName string, port, expiresInSeconds int) (*SignedPreviewURL, *Response, error) {
	if port <= 0 || port > 65535 {
		return nil, nil, fmt.Errorf("%w: port out of range", ErrInvalidArgument)
	}
	var q url.Values
	if expiresInSeconds > 0 {
		q = url.Values{"expiresInSeconds": {strconv.Itoa(expiresInSeconds)}}
	}
	out := new(SignedPreviewURL)
	r, err := s.client.do(ctx, &call{rt: rSignedPreviewURL, args: []string{idOrName, strconv.Itoa(port)}, query: q}, out)
	if err != nil {
		return nil, r, err
	}
	s.client.rememberSecret(out.Token)
	s.client.rememberSecret(out.URL)
	return out, r, nil
}

type urlBody struct {
	URL string `json:"url"`
}

// ToolboxProxyURL returns the sandbox's toolbox proxy base (the same value
// as [Sandbox.ToolboxProxyURL]).
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/GET/sandbox/{sandboxId}/toolbox-proxy-url
func (s *SandboxesService) ToolboxProxyURL(ctx context.Context, sandboxID string) (string, *Response, error) {
	var out urlBody
	r, err := s.client.do(ctx, &call{rt: rToolboxProxyURL, args: []string{sandboxID}}, &out)
	if err != nil {
		return "", r, err
	}
	if strings.TrimSpace(out.URL) == "" {
		return "", r, fmt.Errorf("%w: %s: empty url", ErrMalformedResponse, rToolboxProxyURL)
	}
	return out.URL, r, nil
}
