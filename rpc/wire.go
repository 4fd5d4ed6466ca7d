package rpc

import "encoding/json"

// Wire types of the environment methods (docs/host.md#environment-methods). Params are decoded
// leniently ([Typed]); nullable and optional host fields are pointers, so the
// provider can tell "absent" from a zero value. Results are encoded exactly
// as the host validates them: no omitempty on fields the host requires.

// EnvironmentBase is shared by every environment method but validate.
type EnvironmentBase struct {
	DriverKey     string          `json:"driverKey"`
	CompanyID     string          `json:"companyId"`
	EnvironmentID string          `json:"environmentId"`
	IssueID       *string         `json:"issueId"`
	Config        json.RawMessage `json:"config"`
}

// ValidateConfigParams are environmentValidateConfig's params (docs/host.md#validate-config).
type ValidateConfigParams struct {
	DriverKey string          `json:"driverKey"`
	Config    json.RawMessage `json:"config"`
}

// ValidateConfigResult is environmentValidateConfig's result.
type ValidateConfigResult struct {
	OK               bool     `json:"ok"`
	Warnings         []string `json:"warnings,omitempty"`
	Errors           []string `json:"errors,omitempty"`
	NormalizedConfig any      `json:"normalizedConfig,omitempty"`
}

// ProbeDiagnostic is one probe finding.
type ProbeDiagnostic struct {
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Code     string `json:"code,omitempty"`
}

// ProbeResult is environmentProbe's result (docs/host.md#probe).
type ProbeResult struct {
	OK          bool              `json:"ok"`
	Summary     string            `json:"summary,omitempty"`
	Diagnostics []ProbeDiagnostic `json:"diagnostics,omitempty"`
	Metadata    map[string]any    `json:"metadata,omitempty"`
}

// AcquireParams are environmentAcquireLease's params (docs/host.md#acquire, docs/host.md#newer-contract).
type AcquireParams struct {
	EnvironmentBase
	RunID                string  `json:"runId"`
	WorkspaceMode        *string `json:"workspaceMode"`
	RequestedCwd         *string `json:"requestedCwd"`
	AgentID              *string `json:"agentId"`
	ExecutionWorkspaceID *string `json:"executionWorkspaceId"`
	AdapterType          *string `json:"adapterType"`
	RequestedExpiresAt   *string `json:"requestedExpiresAt"`
	// CreationOperationID is the newer contract's creation operation UUID
	// (proposed wire name, docs/host.md#newer-contract); absent on 2026.916.1.
	CreationOperationID *string `json:"creationOperationId"`
}

// Lease is PluginEnvironmentLease (docs/host.md#lease). ProviderLeaseID null means "not
// resumable" in a resume result.
type Lease struct {
	ProviderLeaseID *string        `json:"providerLeaseId"`
	Metadata        map[string]any `json:"metadata,omitempty"`
	ExpiresAt       *string        `json:"expiresAt,omitempty"`
}

// ResumeParams are environmentResumeLease's params (docs/host.md#resume).
type ResumeParams struct {
	EnvironmentBase
	ProviderLeaseID string         `json:"providerLeaseId"`
	LeaseMetadata   map[string]any `json:"leaseMetadata"`
}

// ReleaseParams are the params of release, destroy and stop (docs/host.md#release, docs/host.md#destroy,
// docs/host.md#newer-contract).
type ReleaseParams struct {
	EnvironmentBase
	ProviderLeaseID     *string        `json:"providerLeaseId"`
	LeaseMetadata       map[string]any `json:"leaseMetadata"`
	CancelActiveWork    bool           `json:"cancelActiveWork"`
	ResourceDisposition string         `json:"resourceDisposition"`
}

// Receipt is PluginEnvironmentTerminationReceipt.
type Receipt struct {
	ProviderLeaseID string `json:"providerLeaseId"`
	State           string `json:"state"` // "stopped" | "destroyed"
}

// Workspace is environmentRealizeWorkspace's workspace.
type Workspace struct {
	LocalPath  *string         `json:"localPath"`
	RemotePath *string         `json:"remotePath"`
	Mode       *string         `json:"mode"`
	Metadata   json.RawMessage `json:"metadata"`
}

// RealizeParams are environmentRealizeWorkspace's params (docs/host.md#realize-workspace).
type RealizeParams struct {
	EnvironmentBase
	Lease     Lease     `json:"lease"`
	Workspace Workspace `json:"workspace"`
}

// RealizeResult is environmentRealizeWorkspace's result.
type RealizeResult struct {
	Cwd      string         `json:"cwd"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// ExecuteParams are environmentExecute's params (docs/host.md#execute).
type ExecuteParams struct {
	EnvironmentBase
	Lease         Lease             `json:"lease"`
	Command       string            `json:"command"`
	Args          []string          `json:"args"`
	Cwd           *string           `json:"cwd"`
	Env           map[string]string `json:"env"`
	Stdin         *string           `json:"stdin"`
	TimeoutMs     *float64          `json:"timeoutMs"`
	BypassSession bool              `json:"bypassSession"`
}

// ExecuteResult is environmentExecute's result.
type ExecuteResult struct {
	ExitCode *int           `json:"exitCode"`
	Signal   *string        `json:"signal"`
	TimedOut bool           `json:"timedOut"`
	Stdout   string         `json:"stdout"`
	Stderr   string         `json:"stderr"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// SyncFileMapping is PluginSyncFileMapping (docs/host.md#sync).
type SyncFileMapping struct {
	SourcePath     string   `json:"sourcePath"`
	TargetPath     string   `json:"targetPath"`
	Kind           string   `json:"kind"`
	Mode           *float64 `json:"mode"`
	Exclude        []string `json:"exclude"`
	FollowSymlinks bool     `json:"followSymlinks"`
	Access         *string  `json:"access"`
	WritablePath   *string  `json:"writablePath"`
}

// SyncCommand is a post-upload command.
type SyncCommand struct {
	Command   string   `json:"command"`
	Cwd       *string  `json:"cwd"`
	TimeoutMs *float64 `json:"timeoutMs"`
}

// SyncOperation is PluginSyncOperation.
type SyncOperation struct {
	OperationID        string            `json:"operationId"`
	Files              []SyncFileMapping `json:"files"`
	PostUploadCommands []SyncCommand     `json:"postUploadCommands"`
}

// SyncParams are the params of environmentSyncIn and environmentSyncOut.
type SyncParams struct {
	EnvironmentBase
	Lease      Lease           `json:"lease"`
	Operations []SyncOperation `json:"operations"`
	// MinimumTimeoutMs is the newer contract's file-transfer floor (proposed
	// position, docs/host.md#newer-contract).
	MinimumTimeoutMs *float64 `json:"minimumTimeoutMs"`
}

// SyncOperationResult is one operation's counts.
type SyncOperationResult struct {
	OperationID      string `json:"operationId"`
	FilesTransferred int64  `json:"filesTransferred"`
	BytesTransferred int64  `json:"bytesTransferred"`
	// Metadata is optional detail; set only when there is something to say
	// (e.g. symlinks a directory export omitted).
	Metadata map[string]any `json:"metadata,omitempty"`
}

// SyncResult is the result of environmentSyncIn and environmentSyncOut.
type SyncResult struct {
	Operations []SyncOperationResult `json:"operations"`
}
