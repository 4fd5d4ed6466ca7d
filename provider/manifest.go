package provider

import (
	"encoding/json"
	"fmt"
	"strings"

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

// ManifestVersion is the plugin version declared in manifest.json, which is
// the compat-2026.916 profile's; ManifestJSON gives each profile's own.
func ManifestVersion() string {
	var m Manifest
	if err := json.Unmarshal(daytonaworker.ManifestJSON, &m); err != nil {
		return "unknown"
	}
	return m.Version
}

// currentVersionTag marks the current profile's version. The host refreshes a
// saved manifest only when its version string changes, and npm keys packages
// by version, so the two profiles must never share one: manifest.json's
// version is the compat profile's, and the current profile's is the same
// version with this prerelease identifier (0.1.0 -> 0.1.0-current). A
// prerelease, not build metadata: npm and semver ignore build metadata when
// comparing versions, so 0.1.0+current could not be published next to 0.1.0;
// and a prerelease is never what a plain `npm install <name>` picks, which
// keeps the package the published host accepts the default.
const currentVersionTag = "current"

// profileVersion is the manifest (and npm package) version of profile p for
// manifest.json's version v.
func profileVersion(v string, p Profile) string {
	if p != ProfileCurrent {
		return v
	}
	core, build, hasBuild := strings.Cut(v, "+")
	sep := "-"
	if strings.Contains(core, "-") {
		sep = "." // already a prerelease: add an identifier to it
	}
	out := core + sep + currentVersionTag
	if hasBuild {
		out += "+" + build
	}
	return out
}

// ManifestJSON returns the manifest of a profile as compact JSON, with the
// profile's own version.
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
	if v, ok := doc["version"].(string); ok {
		doc["version"] = profileVersion(v, p)
	}
	return json.Marshal(doc)
}
