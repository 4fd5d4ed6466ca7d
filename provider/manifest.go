package provider

import (
	"encoding/json"
	"fmt"
	"slices"

	daytonaworker "github.com/daytonaworker/daytona-worker"
)

// Profile selects the manifest variant for a host generation (docs/host.md,
// Target).
type Profile string

const (
	// ProfileCurrent is for hosts of the newer contract: it declares
	// defaultAcquireTimeoutMs and creationOperationVersion.
	ProfileCurrent Profile = "current"
	// ProfileCompat2026916 is for the published host 2026.916.1, whose strict
	// driver validator rejects the newer keys.
	ProfileCompat2026916 Profile = "compat-2026.916"
)

// Profiles lists every profile, for help texts and tests.
var Profiles = []Profile{ProfileCurrent, ProfileCompat2026916}

// newerDriverKeys are the environment-driver keys only the current profile
// carries. Keep the list here and nowhere else.
var newerDriverKeys = []string{"defaultAcquireTimeoutMs", "creationOperationVersion"}

// CompatDriverKeys are the environment-driver keys the 2026.916.1 validator
// accepts (docs/host.md, Target table).
var CompatDriverKeys = []string{
	"driverKey", "kind", "displayName", "description", "configSchema",
	"supportsReusableLeases", "sandboxCapabilities", "supportsInteractiveSetup",
	"interactiveSetupConnectionTypes", "supportsTemplateCapture", "templateRefKind",
	"templateConfigBinding", "templateIdentityPaths", "supportsTemplateDelete",
	"supportsLoginPty", "supportsSetupTokenLogin",
}

// CompatCapabilityKeys are the sandboxCapabilities keys 2026.916.1 accepts.
var CompatCapabilityKeys = []string{
	"reusableLeases", "nativeSyncIn", "nativeSyncOut", "persistentProcessSessions",
	"independentControlCommands", "incrementalSessionOutput", "concurrentSyncOperations",
	"duplexCommandStream", "runnerWebSocketIngress",
}

// CapabilityMethods maps each sandbox capability to the worker methods the
// host requires before it counts the capability as verified (docs/host.md#capabilities).
var CapabilityMethods = map[string][]string{
	"reusableLeases":             {"environmentResumeLease", "environmentReleaseLease", "environmentDestroyLease"},
	"nativeSyncIn":               {"environmentSyncIn"},
	"nativeSyncOut":              {"environmentSyncOut"},
	"persistentProcessSessions":  {"environmentExecute"},
	"independentControlCommands": {"environmentExecute"},
	"incrementalSessionOutput":   {"environmentExecute"},
	"concurrentSyncOperations":   {"environmentSyncIn", "environmentSyncOut"},
	"duplexCommandStream":        {"duplexChannelOpen"},
	"runnerWebSocketIngress":     {"environmentRunnerIngressEndpoint"},
}

// Manifest is the decoded manifest, enough of it for the worker and tests.
type Manifest struct {
	ID                 string           `json:"id"`
	Version            string           `json:"version"`
	EnvironmentDrivers []map[string]any `json:"environmentDrivers"`
}

// ManifestVersion is the plugin version declared in manifest.json.
func ManifestVersion() string {
	var m Manifest
	if err := json.Unmarshal(daytonaworker.ManifestJSON, &m); err != nil {
		return "unknown"
	}
	return m.Version
}

// ManifestJSON returns the manifest of a profile as compact JSON.
func ManifestJSON(p Profile) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(daytonaworker.ManifestJSON, &doc); err != nil {
		return nil, fmt.Errorf("embedded manifest.json: %w", err)
	}
	switch p {
	case ProfileCurrent:
	case ProfileCompat2026916:
		drivers, _ := doc["environmentDrivers"].([]any)
		for _, d := range drivers {
			if dm, ok := d.(map[string]any); ok {
				for _, k := range newerDriverKeys {
					delete(dm, k)
				}
			}
		}
	default:
		return nil, fmt.Errorf("unknown manifest profile %q (want one of %v)", p, Profiles)
	}
	return json.Marshal(doc)
}

// DeclaredCapabilities returns the sandboxCapabilities declared true by the
// manifest's first driver, sorted.
func DeclaredCapabilities() ([]string, error) {
	var m Manifest
	if err := json.Unmarshal(daytonaworker.ManifestJSON, &m); err != nil {
		return nil, err
	}
	if len(m.EnvironmentDrivers) == 0 {
		return nil, fmt.Errorf("manifest declares no environment driver")
	}
	caps, _ := m.EnvironmentDrivers[0]["sandboxCapabilities"].(map[string]any)
	var out []string
	for k, v := range caps {
		if b, _ := v.(bool); b {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}
