package sync

import (
	"fmt"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/internal/span"
	"github.com/daytonaworker/daytona-worker/internal/span/spantest"
)

// TestDeltaSyncOutEquivalence is the randomized equivalence of delta and
// full syncOut (docs/sync.md#delta): a random sandbox tree is exported,
// the host copy and the sandbox tree change at random (TestDeltaSyncInEquivalence's
// generator: new, changed, same-size-same-mtime, mode, mtime, owner and
// type changes, hard links, FIFOs, hostile names, unsafe links), the host
// target is copied (cp -a), and the sandbox tree is exported into one copy
// the full way and into the other as a delta. Both must succeed or fail
// alike and leave identical host trees: type, mode bits, content, link
// target, owner, link count and the mtime of every regular file (an
// export writes directories and links at the time of the sync). The case
// count and seed come from DELTA_EQUIV_CASES and DELTA_EQUIV_SEED.
func TestDeltaSyncOutEquivalence(t *testing.T) {
	equivalence(t, 1, equivCaseOut)
}

func equivCaseOut(t *testing.T, e *env, seed uint64, i int) string {
	g := &treeGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), base: time.Now().Add(-48 * time.Hour).Truncate(time.Second)}
	caseRoot := fmt.Sprintf("%s/eqo%d", e.hostRoot, i)
	src := caseRoot + "/src"
	hostDir := t.TempDir()
	full, delta := filepath.Join(hostDir, "full"), filepath.Join(hostDir, "delta")
	defer func() {
		for _, d := range []string{hostDir, caseRoot} {
			makeRemovable(d)
			_ = os.RemoveAll(d)
		}
	}()
	require.NoError(t, os.MkdirAll(src, 0o755))
	tg := e.t
	tg.Root = fmt.Sprintf("%s/eqo%d", e.root, i)
	syncOut := func(o Options, m Mapping) ([]OperationResult, error) {
		return SyncOut(t.Context(), tg, []Operation{{ID: "o", Files: []Mapping{m}}}, o)
	}
	g.fill(src, 0)
	m := g.mapping(tg.Root+"/src", full)
	m.FollowSymlinks = g.r.IntN(10) == 0

	// The host side before: the last export (mostly), a foreign tree, or
	// nothing; then both sides change.
	switch g.r.IntN(10) {
	case 0:
	case 1:
		require.NoError(t, os.MkdirAll(full, 0o755))
		g.fill(full, 0)
	default:
		_, _ = syncOut(Options{Delta: DeltaOff}, m) // may fail (a FIFO, say): the state is what it is
	}
	// Half the time the sandbox record knows the tree before it changes
	// (a listing, every ctime settled, as a run later): only what changed
	// after it then rides in the listing's changes archive, and a host
	// change makes the export run.
	o := Options{deltaAnySize: g.r.IntN(8) != 0}
	if g.r.IntN(2) == 0 {
		o.settle = -time.Hour
		_, _ = tg.list(t.Context(), tg.Root+"/src", m, true, o)
	}
	switch g.r.IntN(4) {
	case 0:
		o.changesMax = -1
	case 1:
		o.changesMax = 1 + g.r.Int64N(4096)
	}
	if _, err := os.Lstat(full); err == nil {
		for range g.r.IntN(5) {
			g.mutate(full, true)
		}
	}
	for range g.r.IntN(5) {
		g.mutate(src, g.r.IntN(3) == 0)
	}
	if g.r.IntN(4) == 0 {
		m = g.mapping(tg.Root+"/src", full)
	}
	if _, err := os.Lstat(full); err == nil {
		out, err := osexec.Command("cp", "-a", "--", full, delta).CombinedOutput()
		require.NoError(t, err, string(out))
	}

	_, errFull := syncOut(Options{Delta: DeltaOff}, m)
	md := m
	md.TargetPath = delta
	ctx, rec := spantest.New(t.Context())
	res, errDelta := SyncOut(ctx, tg, []Operation{{ID: "o", Files: []Mapping{md}}}, o)
	if errDelta != nil {
		require.Error(t, errFull, "seed %d: the delta export failed where the full one did not: %v", seed, errDelta)
	}
	if errFull != nil && errDelta == nil {
		t.Errorf("seed %d: only the full export failed: %v", seed, errFull)
	}
	if !equalSnapshots(t, snapshotWith(t, full, false), snapshotWith(t, delta, false)) {
		t.Logf("seed %d mapping %+v", seed, m)
	}
	ents, err := os.ReadDir(caseRoot)
	require.NoError(t, err)
	for _, en := range ents {
		require.Equal(t, "src", en.Name(), "left in the sync root")
	}
	for _, p := range hostScratchLeft(t, hostDir) {
		// The generator's own scratch-like name stays, as it does in
		// the sandbox; a staging directory of the export must not.
		require.Equal(t, scratchPrefix+"mine", filepath.Base(p), "left on the host")
	}
	if errDelta != nil {
		return "error"
	}
	require.Len(t, res, 1)
	require.Len(t, res[0].Directories, 1)
	way := res[0].Directories[0].Way
	for _, r := range rec.Records() {
		// The listing was the only round trip before the transfer.
		if way == WayDelta && r.Name == "transfer" && r.Attributes[span.AttrTransferGuardCount] == 1 {
			way = wayChanges
		}
	}
	return way
}
