package daytonaworker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// manifestRecord holds the version the manifest last changed under and a
// digest of everything else in it.
const manifestRecord = "testdata/manifest-version.txt"

// manifestDigest is the SHA-256 of the manifest without its version, in
// canonical JSON (encoding/json sorts map keys), so formatting does not count.
func manifestDigest(t *testing.T, raw []byte) (version, digest string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	version, _ = m["version"].(string)
	delete(m, "version")
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return version, hex.EncodeToString(sum[:])
}

// The host reconciles a plugin's stored manifest only when the version
// changes: a new capability, flag or config field under an old version
// never reaches an installed host. This test fails when manifest.json
// changed but its version did not, and when the record is stale.
func TestManifestChangesBumpTheVersion(t *testing.T) {
	version, digest := manifestDigest(t, ManifestJSON)
	rec, err := os.ReadFile(manifestRecord)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(rec))
	if len(f) != 2 {
		t.Fatalf("%s: want one line \"<version> <digest>\", got %q", manifestRecord, rec)
	}
	switch {
	case f[0] == version && f[1] != digest:
		t.Fatalf("manifest.json changed but its version is still %s: bump the version (and npm/package.json), then write %q to %s",
			version, "<new version> "+digest, manifestRecord)
	case f[0] != version:
		t.Fatalf("manifest.json is at version %s, %s records %s: write %q to it", version, manifestRecord, f[0], version+" "+digest)
	}
}
