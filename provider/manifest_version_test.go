package provider

import (
	"encoding/json"
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
