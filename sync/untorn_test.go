package sync

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSyncInDiskFullLeavesTargetUntouched: a directory syncIn whose
// extraction runs out of sandbox disk leaves the target as it was, never a
// mix of old files and truncated new ones (fault schedule seed 1078 found
// the truncated file).
func TestSyncInDiskFullLeavesTargetUntouched(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := t.TempDir()
	target := filepath.Join(e.root, "tree")
	for _, n := range []string{"f0", "f1"} {
		writeFile(t, filepath.Join(target, n), "old "+n, 0o644)
		writeFile(t, filepath.Join(host, n), "new "+n+strings.Repeat("z", 8000), 0o644)
	}
	used, err := e.srv.DiskUsage(e.sb.ID)
	require.NoError(t, err)
	// Room for the uploaded archive (about 19 KB) but not for its files
	// once extracted next to it.
	require.NoError(t, e.srv.SetDiskAllocation(e.sb.ID, used+20000))
	_, err = e.syncIn(t, Options{}, dirMapping(host, target))
	require.ErrorContains(t, err, "Daytona syncIn extract command failed", "the extraction, not the upload, ran out of disk")
	for _, n := range []string{"f0", "f1"} {
		assert.Equal(t, "old "+n, readFile(t, filepath.Join(target, n)), "untouched")
	}
	assert.Empty(t, e.scratchLeft(t), "every reserved name swept")
}
