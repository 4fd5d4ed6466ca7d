package provider

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSyncInReportsTheWayOfEachDirectory: an inbound directory mapping's
// operation says in metadata.directorySync whether the whole tree went
// (the first sync: the target did not exist) or only what differed, and
// filesTransferred counts what really moved.
func TestSyncInReportsTheWayOfEachDirectory(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	remote := l.Metadata["remoteCwd"].(string)
	src := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		require.NoError(t, os.WriteFile(filepath.Join(src, n), []byte(n), 0o644))
	}
	type dirSync struct {
		TargetPath       string `json:"targetPath"`
		Way              string `json:"way"`
		Reason           string `json:"reason"`
		ListedEntries    int64  `json:"listedEntries"`
		UnchangedEntries int64  `json:"unchangedEntries"`
	}
	syncIn := func() (int64, dirSync) {
		op := map[string]any{"operationId": "in", "files": []any{map[string]any{"sourcePath": src, "targetPath": remote + "/proj", "kind": "directory"}}}
		raw, err := e.call("environmentSyncIn", with(e.base(nil), "lease", l, "operations", []any{op}))
		require.NoError(t, err)
		var res struct {
			Operations []struct {
				FilesTransferred int64 `json:"filesTransferred"`
				Metadata         struct {
					DirectorySync []dirSync `json:"directorySync"`
				} `json:"metadata"`
			} `json:"operations"`
		}
		require.NoError(t, json.Unmarshal(raw, &res), string(raw))
		require.Len(t, res.Operations, 1)
		require.Len(t, res.Operations[0].Metadata.DirectorySync, 1, string(raw))
		return res.Operations[0].FilesTransferred, res.Operations[0].Metadata.DirectorySync[0]
	}
	n, d := syncIn()
	assert.EqualValues(t, 3, n)
	assert.Equal(t, dirSync{TargetPath: remote + "/proj", Way: "full", Reason: "the target does not exist yet"}, d)

	require.NoError(t, os.WriteFile(filepath.Join(src, "b"), []byte("B"), 0o644))
	n, d = syncIn()
	assert.EqualValues(t, 1, n)
	assert.Equal(t, dirSync{TargetPath: remote + "/proj", Way: "delta", ListedEntries: 4, UnchangedEntries: 2}, d)
}
