package sync

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/span"
	"github.com/daytonaworker/daytona-worker/internal/span/spantest"
)

// transferAttrs checks the transfer span's attributes (titles 161-163, 190,
// 191): direction, guard round trips, wall time, provider.
func transferAttrs(t *testing.T, rec *spantest.Recorder, direction string, guards int) {
	t.Helper()
	n := 0
	for _, r := range rec.Records() {
		assert.Equal(t, "daytona", r.Attributes["paperclip.sandbox.startup.provider"], r.Name)
		if r.Name != "transfer" {
			continue
		}
		n++
		assert.Equal(t, direction, r.Attributes["paperclip.sandbox.startup.transfer.direction"])
		assert.Equal(t, guards, r.Attributes["paperclip.sandbox.startup.transfer.guard.count"])
		assert.IsType(t, int64(0), r.Attributes["paperclip.sandbox.startup.transfer.wall_ms"])
	}
	assert.Equal(t, 1, n, "one transfer span")
}

// Titles 161-168, 190, 191: the spans a traced sync emits, in call order,
// with their attributes; failed phases are marked ("!").
func TestSyncSpans(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := t.TempDir()
	writeFile(t, filepath.Join(host, "f"), "f", 0o644)
	writeFile(t, filepath.Join(host, "d", "a.txt"), "a", 0o644)

	t.Run("inbound files with a post-upload command", func(t *testing.T) {
		ctx, rec := spantest.New(t.Context())
		_, err := SyncIn(ctx, e.t, []Operation{{ID: "o",
			Files:              []Mapping{fileMapping(filepath.Join(host, "f"), e.root+"/f")},
			PostUploadCommands: []Command{{Command: "true", Cwd: e.root}},
		}}, Options{})
		require.NoError(t, err)
		// Parents are made by the promote script: no round trip before the
		// upload, no ensureDirectory span, and no pack span for files.
		assert.Equal(t, []string{"transfer", "promote", "postUploadCommand"}, rec.Names())
		transferAttrs(t, rec, "inbound", 0)
	})
	t.Run("inbound directory", func(t *testing.T) {
		dirIn := func(o Options) *spantest.Recorder {
			ctx, rec := spantest.New(t.Context())
			_, err := SyncIn(ctx, e.t, []Operation{{ID: "o", Files: []Mapping{dirMapping(filepath.Join(host, "d"), e.root+"/d")}}}, o)
			require.NoError(t, err)
			return rec
		}
		// The delta sync off: today's spans, no round trip before the upload.
		rec := dirIn(Options{Delta: DeltaOff})
		assert.Equal(t, []string{"pack", "transfer", "extractTarball"}, rec.Names())
		transferAttrs(t, rec, "inbound", 0)
		assert.IsType(t, int64(0), rec.Records()[0].Attributes[span.AttrPackWallMs])
		// A delta sync with a changed file: the listing (the one round trip
		// before the upload) and the comparison come first.
		writeFile(t, filepath.Join(host, "d", "b.txt"), "b", 0o644)
		rec = dirIn(Options{})
		assert.Equal(t, []string{"list", "compare", "pack", "transfer", "extractTarball"}, rec.Names())
		transferAttrs(t, rec, "inbound", 1)
		// Nothing changed: nothing is packed or sent.
		rec = dirIn(Options{})
		assert.Equal(t, []string{"list", "compare"}, rec.Names())
	})
	t.Run("outbound file", func(t *testing.T) {
		ctx, rec := spantest.New(t.Context())
		_, err := SyncOut(ctx, e.t, []Operation{{ID: "o", Files: []Mapping{fileMapping(e.root+"/f", filepath.Join(t.TempDir(), "f"))}}}, Options{})
		require.NoError(t, err)
		assert.Equal(t, []string{"transfer"}, rec.Names())
		transferAttrs(t, rec, "outbound", 1)
	})
	t.Run("outbound directory", func(t *testing.T) {
		ctx, rec := spantest.New(t.Context())
		_, err := SyncOut(ctx, e.t, []Operation{{ID: "o", Files: []Mapping{dirMapping(e.root+"/d", filepath.Join(t.TempDir(), "d"))}}}, Options{})
		require.NoError(t, err)
		assert.Equal(t, []string{"transfer"}, rec.Names())
		transferAttrs(t, rec, "outbound", 1)
	})
	t.Run("a failed post-upload command", func(t *testing.T) {
		ctx, rec := spantest.New(t.Context())
		_, err := SyncIn(ctx, e.t, []Operation{{ID: "o",
			Files:              []Mapping{fileMapping(filepath.Join(host, "f"), e.root+"/f")},
			PostUploadCommands: []Command{{Command: "exit 3"}, {Command: "true"}},
		}}, Options{})
		require.Error(t, err)
		assert.Equal(t, []string{"transfer", "promote", "postUploadCommand!"}, rec.Names())
		require.NotNil(t, rec.Records()[2].Status)
		assert.Equal(t, 2, rec.Records()[2].Status.Code)
	})
	t.Run("a failed upload", func(t *testing.T) {
		e.srv.Inject(daytonatest.Fault{Method: "POST", Route: "/files/bulk-upload", Status: 500})
		defer e.srv.ClearFaults()
		ctx, rec := spantest.New(t.Context())
		_, err := SyncIn(ctx, e.t, []Operation{{ID: "o", Files: []Mapping{fileMapping(filepath.Join(host, "f"), e.root+"/f")}}}, Options{})
		require.Error(t, err)
		assert.Equal(t, []string{"transfer!"}, rec.Names())
	})
}
