package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/daytonaworker/daytona-worker/provider"
	"github.com/stretchr/testify/require"
)

// packed is what a test needs from one npm tarball.
type packed struct {
	pkg      map[string]any
	manifest map[string]any
	files    map[string]bool
}

func readPackage(t *testing.T, path string) packed {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	p := packed{files: map[string]bool{}}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		name := strings.TrimPrefix(h.Name, "package/")
		p.files[name] = true
		switch name {
		case "package.json":
			require.NoError(t, json.NewDecoder(tr).Decode(&p.pkg))
		case "manifest.js":
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			_, body, ok := strings.Cut(string(b), "export default ")
			require.True(t, ok, "manifest.js has no default export:\n%s", b)
			require.NoError(t, json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimSpace(body), ";")), &p.manifest))
		}
	}
	return p
}

// TestPackageProfilesAreDistinctPackages runs scripts/package.sh (`make
// package` and `PROFILE=current make package`, for this platform only) and
// checks that the two tarballs carry different versions, each the same in
// package.json and in the manifest, and the license.
func TestPackageProfilesAreDistinctPackages(t *testing.T) {
	for _, tool := range []string{"bash", "node", "npm"} {
		if _, err := osexec.LookPath(tool); err != nil {
			t.Skipf("%s not installed; packaging is covered by the interop test where it is", tool)
		}
	}
	tmp := t.TempDir()
	tarballs := map[provider.Profile]string{}
	for _, profile := range []provider.Profile{provider.ProfileCompat2026916, provider.ProfileCurrent} {
		dist := filepath.Join(tmp, string(profile))
		cmd := osexec.Command("bash", "../../scripts/package.sh")
		cmd.Env = append(os.Environ(),
			"PROFILE="+string(profile), "DIST_DIR="+dist,
			"HOST_BIN="+filepath.Join(tmp, "host", "daytona-worker"),
			"PLATFORMS="+runtime.GOOS+"/"+runtime.GOARCH,
			"npm_config_cache="+filepath.Join(tmp, "npm-cache"), "npm_config_update_notifier=false")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "PROFILE=%s scripts/package.sh:\n%s", profile, stderr.String())
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		tarballs[profile] = lines[len(lines)-1]
		require.Equal(t, dist, filepath.Dir(tarballs[profile]))
	}
	compat := readPackage(t, tarballs[provider.ProfileCompat2026916])
	current := readPackage(t, tarballs[provider.ProfileCurrent])
	require.NotEqual(t, filepath.Base(tarballs[provider.ProfileCompat2026916]), filepath.Base(tarballs[provider.ProfileCurrent]))
	require.Equal(t, "paperclip-plugin-daytona-go-"+provider.ManifestVersion()+".tgz", filepath.Base(tarballs[provider.ProfileCompat2026916]),
		"make package names the compat tarball after the plain version")
	require.Equal(t, provider.ManifestVersion(), compat.pkg["version"])
	require.Equal(t, provider.ManifestVersion()+"-current", current.pkg["version"])
	for _, p := range []packed{compat, current} {
		require.Equal(t, p.pkg["version"], p.manifest["version"], "package and manifest versions agree")
		require.Equal(t, "MIT", p.pkg["license"])
		require.True(t, p.files["LICENSE"], "the tarball carries LICENSE: %v", p.files)
		require.True(t, p.files["worker.mjs"])
		nodeArch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
		require.True(t, p.files["bin/"+runtime.GOOS+"-"+nodeArch+"/daytona-worker"], "%v", p.files)
	}
	require.NotContains(t, compat.manifest["environmentDrivers"].([]any)[0], "defaultAcquireTimeoutMs")
	require.Contains(t, current.manifest["environmentDrivers"].([]any)[0], "defaultAcquireTimeoutMs")
}
