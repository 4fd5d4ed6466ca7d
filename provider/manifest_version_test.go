package provider

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProfileVersions: the profiles never share a version (the host
// refreshes a saved manifest only when the version string changes), and the
// current profile's stays a valid semver whatever manifest.json holds.
func TestProfileVersions(t *testing.T) {
	cases := [][2]string{ // manifest.json's version, the current profile's
		{"0.1.0", "0.1.0-current"},
		{"1.2.3-beta.1", "1.2.3-beta.1.current"},
		{"1.2.3+build.5", "1.2.3-current+build.5"},
		{"1.2.3-rc.1+b.2", "1.2.3-rc.1.current+b.2"},
	}
	for _, c := range cases {
		require.Equal(t, c[0], profileVersion(c[0], ProfileCompat2026916))
		require.Equal(t, c[1], profileVersion(c[0], ProfileCurrent), c[0])
		require.Equal(t, strings.ReplaceAll(c[1], "current", "oct2026"), profileVersion(c[0], ProfileCompat202610), c[0])
	}
	versions := map[string]Profile{}
	for _, p := range Profiles {
		b, err := ManifestJSON(p)
		require.NoError(t, err)
		var m Manifest
		require.NoError(t, json.Unmarshal(b, &m))
		require.NotContains(t, versions, m.Version, "%s and %s share version %s", p, versions[m.Version], m.Version)
		versions[m.Version] = p
	}
	require.Equal(t, ProfileCompat2026916, versions[ManifestVersion()], "manifest.json's version is the compat profile's")
}

// schemaIssues checks a manifest against a host generation's schema facts
// (docs/host.md#manifest-profiles): the strict driver and capability key
// lists, and the value rules of the keys we declare. It returns one line
// per refusal, as the host's validator would refuse the install.
func schemaIssues(h HostSchema, m map[string]any) []string {
	var out []string
	semver := regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)
	if v, _ := m["version"].(string); !semver.MatchString(v) {
		out = append(out, "version is not semver")
	}
	if id, _ := m["id"].(string); !regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`).MatchString(id) {
		out = append(out, "bad id")
	}
	if d, _ := m["description"].(string); d == "" || len([]rune(d)) > 500 {
		out = append(out, "description length")
	}
	drivers, _ := m["environmentDrivers"].([]any)
	for _, raw := range drivers {
		d, _ := raw.(map[string]any)
		for k := range d {
			if !slices.Contains(h.DriverKeys, k) {
				out = append(out, "unrecognized driver key "+k)
			}
		}
		caps, _ := d["sandboxCapabilities"].(map[string]any)
		for k, v := range caps {
			if _, ok := v.(bool); !ok || !slices.Contains(h.CapabilityKeys, k) {
				out = append(out, "bad capability "+k)
			}
		}
		if n, _ := d["displayName"].(string); n == "" || len([]rune(n)) > 100 {
			out = append(out, "displayName length")
		}
		if v, ok := d["defaultAcquireTimeoutMs"]; ok {
			if f, ok := v.(float64); !ok || f != float64(int64(f)) || f <= 0 || f > 86_400_000 {
				out = append(out, "defaultAcquireTimeoutMs must be a positive integer up to 86400000")
			}
		}
		if v, ok := d["creationOperationVersion"]; ok && v != 1.0 {
			out = append(out, "creationOperationVersion must be 1")
		}
	}
	return out
}

// Each profile installs on every host it names, and every host the worker
// targets has a profile. A profile carrying a key a host does not know is
// refused there, which is why each profile names only the hosts it does.
func TestProfilesInstallOnTheHostsTheyName(t *testing.T) {
	covered := map[string]bool{}
	for _, p := range Profiles {
		b, err := ManifestJSON(p)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		require.NotEmpty(t, ProfileHosts[p], p)
		for _, h := range ProfileHosts[p] {
			require.Empty(t, schemaIssues(h, m), "%s on %s", p, h.Name)
			covered[h.Name] = true
		}
	}
	for _, h := range []HostSchema{Host2026916, Host202610, HostSeeds} {
		require.True(t, covered[h.Name], "no profile names %s", h.Name)
	}
	// The refusals the profiles exist for (docs/host.md#manifest-profiles).
	issues := func(p Profile, h HostSchema) []string {
		b, err := ManifestJSON(p)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		return schemaIssues(h, m)
	}
	require.ElementsMatch(t, []string{"unrecognized driver key defaultAcquireTimeoutMs", "unrecognized driver key creationOperationVersion"},
		issues(ProfileCurrent, Host2026916))
	require.Equal(t, []string{"unrecognized driver key creationOperationVersion"}, issues(ProfileCurrent, Host202610),
		"the October hosts refuse creationOperationVersion")
	require.Equal(t, []string{"unrecognized driver key defaultAcquireTimeoutMs"}, issues(ProfileCompat202610, Host2026916))
}
