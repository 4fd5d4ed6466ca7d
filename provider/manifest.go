package provider

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	daytonaworker "github.com/daytonaworker/daytona-worker"
)

// Profile selects the manifest variant for a host generation (docs/host.md,
// Manifest profiles). Each profile is valid for exactly the hosts it names
// (ProfileHosts): every host's strict driver validator rejects a key it does
// not know, so a key one generation added is a key another refuses.
type Profile string

const (
	// ProfileCompat2026916 is for the published host 2026.916.1: no key
	// newer than it. It also installs on the October 2026 hosts.
	ProfileCompat2026916 Profile = "compat-2026.916"
	// ProfileCompat202610 is for the October 2026 hosts (plugin SDK and
	// shared validators at paperclip ce51d868): it adds
	// defaultAcquireTimeoutMs, which they accept, and not
	// creationOperationVersion, which they refuse.
	ProfileCompat202610 Profile = "compat-2026.10"
	// ProfileCurrent is for the host the requirement seeds describe, the
	// only one known to accept creationOperationVersion: it declares
	// defaultAcquireTimeoutMs and creationOperationVersion.
	ProfileCurrent Profile = "current"
)

// Profiles lists every profile, for help texts and tests.
var Profiles = []Profile{ProfileCompat2026916, ProfileCompat202610, ProfileCurrent}

// HostSchema is what a host generation's strict environment-driver
// validator accepts: the driver keys and the sandboxCapabilities keys.
type HostSchema struct {
	Name           string
	DriverKeys     []string
	CapabilityKeys []string
}

// The host generations the profiles name. 2026.916.1's lists are its
// published validator's (the interop test runs that validator itself); the
// others are the schema facts of docs/host.md#manifest-profiles.
var (
	Host2026916 = HostSchema{"2026.916.1", CompatDriverKeys, CompatCapabilityKeys}
	Host202610  = HostSchema{"October 2026 (ce51d868)",
		append(slices.Clone(CompatDriverKeys), "defaultAcquireTimeoutMs", "supportsTasks"), CompatCapabilityKeys}
	HostSeeds = HostSchema{"creation-operation host (seeds)",
		append(slices.Clone(CompatDriverKeys), "defaultAcquireTimeoutMs", "creationOperationVersion"), CompatCapabilityKeys}
)

// ProfileHosts names the hosts each profile is for.
var ProfileHosts = map[Profile][]HostSchema{
	ProfileCompat2026916: {Host2026916, Host202610},
	ProfileCompat202610:  {Host202610},
	ProfileCurrent:       {HostSeeds},
}

// profileDrops are the driver keys of manifest.json a profile leaves out.
// Keep the lists here and nowhere else.
var profileDrops = map[Profile][]string{
	ProfileCompat2026916: {"defaultAcquireTimeoutMs", "creationOperationVersion"},
	ProfileCompat202610:  {"creationOperationVersion"},
	ProfileCurrent:       nil,
}

// CompatDriverKeys are the environment-driver keys the 2026.916.1 validator
// accepts (docs/host.md, Target table).
var CompatDriverKeys = []string{
	"driverKey", "kind", "displayName", "description", "configSchema",
	"supportsReusableLeases", "sandboxCapabilities", "supportsInteractiveSetup",
	"interactiveSetupConnectionTypes", "supportsTemplateCapture", "templateRefKind",
	"templateConfigBinding", "templateIdentityPaths", "supportsTemplateDelete",
	"supportsLoginPty", "supportsSetupTokenLogin",
}

// CompatCapabilityKeys are the sandboxCapabilities keys 2026.916.1 accepts
// (and the October 2026 hosts: the list did not change).
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

// versionTags mark the versions of the profiles other than compat. The host
// refreshes a saved manifest only when its version string changes, and npm
// keys packages by version, so two profiles must never share one:
// manifest.json's version is the compat profile's, and another profile's is
// the same version with its prerelease identifier (0.1.0 -> 0.1.0-current).
// A prerelease, not build metadata: npm and semver ignore build metadata
// when comparing versions, so 0.1.0+current could not be published next to
// 0.1.0; and a prerelease is never what a plain `npm install <name>` picks,
// which keeps the package the published host accepts the default.
var versionTags = map[Profile]string{
	ProfileCompat202610: "oct2026",
	ProfileCurrent:      "current",
}

// profileVersion is the manifest (and npm package) version of profile p for
// manifest.json's version v.
func profileVersion(v string, p Profile) string {
	tag := versionTags[p]
	if tag == "" {
		return v
	}
	core, build, hasBuild := strings.Cut(v, "+")
	sep := "-"
	if strings.Contains(core, "-") {
		sep = "." // already a prerelease: add an identifier to it
	}
	out := core + sep + tag
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
	drops, ok := profileDrops[p]
	if !ok {
		return nil, fmt.Errorf("unknown manifest profile %q (want one of %v)", p, Profiles)
	}
	drivers, _ := doc["environmentDrivers"].([]any)
	for _, d := range drivers {
		if dm, ok := d.(map[string]any); ok {
			for _, k := range drops {
				delete(dm, k)
			}
		}
	}
	if v, ok := doc["version"].(string); ok {
		doc["version"] = profileVersion(v, p)
	}
	return json.Marshal(doc)
}
