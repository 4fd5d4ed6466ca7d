package daytona

import (
	"context"
	"fmt"
	"strings"
)

// Snapshot routes: creating one from a sandbox (control plane, sandbox
// tag) and reading or deleting one (snapshots tag).
var (
	rCreateSandboxSnapshot = newRoute(route{name: "createSandboxSnapshot", method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/snapshot", retry: retryNever,
		reqSchema: "CreateSandboxSnapshot", req: createSnapshotBody{}, respSchema: "Sandbox", resp: Sandbox{}})
	rGetSnapshot = newRoute(route{name: "getSnapshot", method: "GET", tmpl: "/snapshots/{id}", retry: retryIdempotent,
		respSchema: "SnapshotDto", resp: Snapshot{}})
	rDeleteSnapshot = newRoute(route{name: "removeSnapshot", method: "DELETE", tmpl: "/snapshots/{id}", retry: retryIdempotent})
)

// SnapshotsService reads and deletes snapshots.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/snapshots
type SnapshotsService service

// Snapshot is a snapshot (SnapshotDto), the fields a provider reads.
type Snapshot struct {
	ID             string        `json:"id"`
	OrganizationID string        `json:"organizationId,omitempty"`
	General        bool          `json:"general"`
	Name           string        `json:"name"`
	ImageName      string        `json:"imageName,omitempty"`
	State          SnapshotState `json:"state"`
	ErrorReason    *string       `json:"errorReason"`
	CreatedAt      string        `json:"createdAt,omitempty"`
	UpdatedAt      string        `json:"updatedAt,omitempty"`
}

// SnapshotState is a snapshot's state (SnapshotState).
type SnapshotState string

// The snapshot states a provider acts on. Daytona's others (building,
// pending, pulling, inactive, removing) are transitional or not usable for
// a sandbox start: a provider waits them out or reports them as they are.
const (
	SnapshotActive      SnapshotState = "active"
	SnapshotError       SnapshotState = "error"
	SnapshotBuildFailed SnapshotState = "build_failed"
)

type createSnapshotBody struct {
	Name string `json:"name"`
}

// CreateSnapshot starts capturing a snapshot named name from a sandbox:
// the answer has state snapshotting; wait with
// [SandboxesService.WaitForState] until it leaves that state, then read the
// snapshot. Never retried (a second capture under the same name is a 409).
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/POST/sandbox/{sandboxIdOrName}/snapshot
func (s *SandboxesService) CreateSnapshot(ctx context.Context, idOrName, name string) (*Sandbox, *Response, error) {
	if strings.TrimSpace(name) == "" {
		return nil, nil, fmt.Errorf("%w: a snapshot name is required", ErrInvalidArgument)
	}
	return s.sandboxCall(ctx, &call{rt: rCreateSandboxSnapshot, args: []string{idOrName}, body: jsonBody(createSnapshotBody{Name: name})})
}

// Get reads a snapshot by ID or name; ErrNotFound when there is none.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/snapshots/GET/snapshots/{id}
func (s *SnapshotsService) Get(ctx context.Context, idOrName string) (*Snapshot, *Response, error) {
	if strings.TrimSpace(idOrName) == "" {
		return nil, nil, fmt.Errorf("%w: a snapshot id or name is required", ErrInvalidArgument)
	}
	out := new(Snapshot)
	r, err := s.client.do(ctx, &call{rt: rGetSnapshot, args: []string{idOrName}}, out)
	if err != nil {
		return nil, r, err
	}
	return out, r, nil
}

// Delete deletes a snapshot by its ID (not its name: read it with Get
// first); ErrNotFound when there is none.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/snapshots/DELETE/snapshots/{id}
func (s *SnapshotsService) Delete(ctx context.Context, id string) (*Response, error) {
	if strings.TrimSpace(id) == "" {
		return nil, fmt.Errorf("%w: a snapshot id is required", ErrInvalidArgument)
	}
	return s.client.do(ctx, &call{rt: rDeleteSnapshot, args: []string{id}}, nil)
}
