package rpc

// Wire types of the environment methods beyond wire.go's: interactive
// setup, templates, runner ingress and the idle evidence of health.

// SetupStartParams are environmentStartInteractiveSetup's params.
type SetupStartParams struct {
	EnvironmentBase
	SessionID                  string   `json:"sessionId"`
	SourceTemplateRef          *string  `json:"sourceTemplateRef"`
	SourceTemplateKind         *string  `json:"sourceTemplateKind"`
	ConnectionExpiresInMinutes *float64 `json:"connectionExpiresInMinutes"`
	ExpiresAt                  *string  `json:"expiresAt"`
}

// SetupGetParams are environmentGetInteractiveSetup's params.
type SetupGetParams struct {
	EnvironmentBase
	ProviderLeaseID            *string        `json:"providerLeaseId"`
	SetupMetadata              map[string]any `json:"setupMetadata"`
	IncludeConnectionPayload   *bool          `json:"includeConnectionPayload"`
	ConnectionExpiresInMinutes *float64       `json:"connectionExpiresInMinutes"`
}

// SetupCancelParams are environmentCancelInteractiveSetup's params.
type SetupCancelParams struct {
	EnvironmentBase
	ProviderLeaseID *string        `json:"providerLeaseId"`
	SetupMetadata   map[string]any `json:"setupMetadata"`
	Reason          *string        `json:"reason"`
}

// SetupSession is PluginEnvironmentInteractiveSetupSession.
type SetupSession struct {
	ProviderLeaseID   *string        `json:"providerLeaseId"`
	Status            string         `json:"status"`
	ConnectionSummary map[string]any `json:"connectionSummary"`
	ConnectionPayload map[string]any `json:"connectionPayload"`
	ExpiresAt         *string        `json:"expiresAt,omitempty"`
	Metadata          map[string]any `json:"metadata,omitempty"`
}

// SetupCancelResult is environmentCancelInteractiveSetup's result.
type SetupCancelResult struct {
	Status   string         `json:"status"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// CaptureParams are environmentCaptureTemplate's params.
type CaptureParams struct {
	EnvironmentBase
	ProviderLeaseID     *string        `json:"providerLeaseId"`
	SetupMetadata       map[string]any `json:"setupMetadata"`
	SourceTemplateRef   *string        `json:"sourceTemplateRef"`
	PreviousTemplateRef *string        `json:"previousTemplateRef"`
	TemplateLabel       *string        `json:"templateLabel"`
	TimeoutMs           *float64       `json:"timeoutMs"`
}

// CaptureResult is environmentCaptureTemplate's result.
type CaptureResult struct {
	TemplateRef  string         `json:"templateRef"`
	TemplateKind string         `json:"templateKind"`
	Metadata     map[string]any `json:"metadata,omitempty"`
}

// DeleteTemplateParams are environmentDeleteTemplate's params.
type DeleteTemplateParams struct {
	EnvironmentBase
	TemplateRef  string         `json:"templateRef"`
	TemplateKind *string        `json:"templateKind"`
	Metadata     map[string]any `json:"metadata"`
	Reason       *string        `json:"reason"`
}

// DeleteTemplateResult is environmentDeleteTemplate's result.
type DeleteTemplateResult struct {
	Deleted  bool           `json:"deleted"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// IngressParams are environmentRunnerIngressEndpoint's params.
type IngressParams struct {
	EnvironmentBase
	Lease Lease   `json:"lease"`
	Port  float64 `json:"port"`
	Path  string  `json:"path"`
}

// SecretHeader is a header whose value is a secret (the host stores and
// logs it as one).
type SecretHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// IngressEndpoint is the result: an authenticated WebSocket endpoint.
type IngressEndpoint struct {
	Kind          string         `json:"kind"`
	WebsocketURL  string         `json:"websocketUrl"`
	SecretHeaders []SecretHeader `json:"secretHeaders"`
	Generation    string         `json:"generation"`
}

// IdleReport is health's details.idle (docs/host.md#newer-contract, proposed shape).
type IdleReport struct {
	SleepAllowed      bool `json:"sleepAllowed"`
	PendingHooks      int  `json:"pendingHooks"`
	ProviderRequests  int  `json:"providerRequests"`
	OpenTerminals     int  `json:"openTerminals"`
	Allocations       int  `json:"allocations"`
	UncertainCleanups int  `json:"uncertainCleanups"`
}
