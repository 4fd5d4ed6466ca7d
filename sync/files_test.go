package sync

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/shell"
)

func TestSyncInFileMappingsOneBatchModesAndCounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := t.TempDir()
	writeFile(t, filepath.Join(host, "a.txt"), "alpha", 0o644)
	writeFile(t, filepath.Join(host, "key"), "secret!", 0o644)
	e.srv.ResetRequests()
	res, err := SyncIn(t.Context(), e.t, []Operation{{ID: "op1", Files: []Mapping{
		{SourcePath: filepath.Join(host, "a.txt"), TargetPath: e.root + "/deep/er/a.txt", Kind: KindFile},
		{SourcePath: filepath.Join(host, "key"), TargetPath: e.root + "/.ssh/key", Kind: KindFile, Mode: new(uint32(0o600))},
	}}}, Options{})
	require.NoError(t, err)
	assert.Equal(t, []OperationResult{{ID: "op1", FilesTransferred: 2, BytesTransferred: 12}}, res)
	assert.Equal(t, 1, e.srv.CountRequests("POST", "/files/bulk-upload"), "one upload batch")
	assert.Equal(t, 1, e.srv.CountRequests("POST", "/files/permissions"))
	assert.Equal(t, 1, e.srv.CountRequests("POST", "/process/execute"), "one promote script, no post-upload exec")
	assert.Equal(t, "alpha", readFile(t, filepath.Join(e.root, "deep", "er", "a.txt")))
	assert.Equal(t, os.FileMode(0o600), permOf(t, filepath.Join(e.root, ".ssh", "key")))
	assert.Empty(t, e.scratchLeft(t))
}

func TestSyncOutFileMappingsOneDownloadBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "out", "a.txt"), "alpha", 0o644)
	writeFile(t, filepath.Join(e.root, "b.txt"), "beta", 0o644)
	host := t.TempDir()
	e.srv.ResetRequests()
	res, err := SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{
		{SourcePath: e.root + "/out/a.txt", TargetPath: filepath.Join(host, "x", "a.txt"), Kind: KindFile},
		{SourcePath: e.root + "/b.txt", TargetPath: filepath.Join(host, "b.txt"), Kind: KindFile, Mode: new(uint32(0o640))},
	}}}, Options{})
	require.NoError(t, err)
	assert.Equal(t, []OperationResult{{ID: "o", FilesTransferred: 2, BytesTransferred: 9}}, res)
	assert.Equal(t, 1, e.srv.CountRequests("POST", "/files/bulk-download"))
	assert.Equal(t, "alpha", readFile(t, filepath.Join(host, "x", "a.txt")))
	assert.Equal(t, os.FileMode(0o600), permOf(t, filepath.Join(host, "x", "a.txt")), "default 0600 target")
	assert.Equal(t, os.FileMode(0o640), permOf(t, filepath.Join(host, "b.txt")))
	assert.Empty(t, e.scratchLeft(t), "snapshots removed")
	assert.Empty(t, hostScratchLeft(t, host))
}

func TestSyncOutGuardRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	outside := filepath.Join(e.info.Root, "outside.txt")
	require.NoError(t, os.WriteFile(outside, []byte("outside"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(e.root, "escape")))
	require.NoError(t, os.MkdirAll(filepath.Join(e.root, "adir"), 0o755))
	host := t.TempDir()
	for _, tc := range []struct {
		src  string
		exit int
	}{
		{e.root + "/escape", 42},
		{e.root + "/missing", 42},
		{e.root + "/adir", 45},
	} {
		target := filepath.Join(host, filepath.Base(tc.src))
		e.srv.ResetRequests()
		_, err := e.syncOut(t, Options{}, fileMapping(tc.src, target))
		var se *SandboxCommandError
		require.ErrorAs(t, err, &se, tc.src)
		assert.Equal(t, tc.exit, se.Exit)
		assert.Equal(t, StageGuard, se.Stage)
		assert.Contains(t, err.Error(), fmt.Sprintf("Daytona outbound symlink-escape guard command failed (exit %d)", tc.exit))
		assert.Zero(t, e.srv.CountRequests("POST", "/files/bulk-download"), "nothing downloaded")
		assert.NoFileExists(t, target)
	}
	// Lexical refusals happen before any sandbox call.
	for _, src := range []string{"relative/x", e.root + "/../x", "/etc/passwd"} {
		_, err := e.syncOut(t, Options{}, fileMapping(src, filepath.Join(host, "x")))
		assert.ErrorIs(t, err, ErrNotConfined, src)
	}
	assert.Empty(t, e.scratchLeft(t))
}

func TestSyncOutFailsClosedWithoutCanonicalizer(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	for _, tool := range []string{"sh", "bash", "cp", "rm", "mkdir", "mv", "cat", "tar", "find"} {
		p, err := lookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(p, filepath.Join(bin, tool)))
	}
	e := newEnvWith(t, map[string]string{"PATH": bin})
	writeFile(t, filepath.Join(e.root, "a.txt"), "a", 0o644)
	_, err := e.syncOut(t, Options{}, fileMapping(e.root+"/a.txt", filepath.Join(t.TempDir(), "a")))
	var se *SandboxCommandError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 40, se.Exit)
}

func TestSyncOutDeletedSandboxIsStableCode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.NoError(t, e.c.Sandboxes.DeleteAndWait(t.Context(), e.sb.ID))
	_, err := e.syncOut(t, Options{}, fileMapping(e.root+"/a", filepath.Join(t.TempDir(), "a")))
	require.ErrorIs(t, err, ErrSandboxNotFound)
	assert.Equal(t, "daytona_sandbox_not_found", err.Error())
}

func TestSyncOutPerFileDownloadErrorPublishesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "a.txt"), "alpha", 0o644)
	writeFile(t, filepath.Join(e.root, "b.txt"), "beta", 0o644)
	gate := make(chan struct{})
	e.srv.Inject(daytonatest.Fault{Route: "/files/bulk-download", Gate: gate, Times: 1})
	host := t.TempDir()
	errc := make(chan error, 1)
	go func() {
		_, err := SyncOut(context.Background(), e.t, []Operation{{ID: "o", Files: []Mapping{
			{SourcePath: e.root + "/a.txt", TargetPath: filepath.Join(host, "a.txt"), Kind: KindFile},
			{SourcePath: e.root + "/b.txt", TargetPath: filepath.Join(host, "b.txt"), Kind: KindFile},
		}}}, Options{})
		errc <- err
	}()
	require.NoError(t, e.srv.AwaitRequests(t.Context(), "POST", "/files/bulk-download", 1))
	left := e.scratchLeft(t)
	require.Len(t, left, 2)
	require.NoError(t, os.Remove(filepath.Join(e.root, left[1]))) // one snapshot vanishes
	close(gate)
	err := <-errc
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Daytona syncOut download failed for ")
	assert.NoFileExists(t, filepath.Join(host, "a.txt"))
	assert.NoFileExists(t, filepath.Join(host, "b.txt"))
	e.noScratchLeft(t, host)
}

func TestPostUploadCommandsInOrderFailFast(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := t.TempDir()
	writeFile(t, filepath.Join(host, "f"), "f", 0o644)
	var got []string
	e.t.RunCommand = func(ctx context.Context, command, cwd string, timeout time.Duration) (int, string, string, error) {
		got = append(got, command+"@"+cwd)
		_, err := os.Stat(filepath.Join(e.root, "f"))
		require.NoError(t, err, "commands run after the files landed")
		return e.runCommand(ctx, command, cwd, timeout)
	}
	_, err := SyncIn(t.Context(), e.t, []Operation{{ID: "o",
		Files: []Mapping{{SourcePath: filepath.Join(host, "f"), TargetPath: e.root + "/f", Kind: KindFile}},
		PostUploadCommands: []Command{
			{Command: "echo one >> log && true # verbatim"},
			{Command: "exit 3", Cwd: e.root + "/"},
			{Command: "echo never >> log"},
		}}}, Options{})
	var pe *PostUploadError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 3, pe.Exit)
	assert.Contains(t, err.Error(), "Daytona post-upload command failed (exit 3)")
	assert.Equal(t, []string{"echo one >> log && true # verbatim@" + e.root, "exit 3@" + e.root}, got)
	assert.Equal(t, "one\n", readFile(t, filepath.Join(e.root, "log")))
}

func TestConcurrentSyncCallsUseDistinctScratch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := t.TempDir()
	const n = 6
	errs := make(chan error, 2*n)
	for i := range n {
		src := filepath.Join(host, fmt.Sprintf("in%d", i))
		writeFile(t, filepath.Join(src, "f.txt"), strings.Repeat("x", i+1), 0o644)
		writeFile(t, filepath.Join(e.root, fmt.Sprintf("out%d", i), "g.txt"), strings.Repeat("y", i+1), 0o644)
		go func() {
			_, err := e.syncIn(t, Options{}, dirMapping(src, fmt.Sprintf("%s/in%d", e.root, i)))
			errs <- err
		}()
		go func() {
			_, err := e.syncOut(t, Options{}, dirMapping(fmt.Sprintf("%s/out%d", e.root, i), filepath.Join(host, fmt.Sprintf("out%d", i))))
			errs <- err
		}()
	}
	for range 2 * n {
		require.NoError(t, <-errs)
	}
	for i := range n {
		assert.Equal(t, strings.Repeat("x", i+1), readFile(t, filepath.Join(e.root, fmt.Sprintf("in%d", i), "f.txt")))
		assert.Equal(t, strings.Repeat("y", i+1), readFile(t, filepath.Join(host, fmt.Sprintf("out%d", i), "g.txt")))
	}
	e.noScratchLeft(t, host)
}

func TestValidateMinimumTimeout(t *testing.T) {
	t.Parallel()
	for _, bad := range []float64{0, -1, 1.5, 1_800_001, 1e300} {
		_, err := ValidateMinimumTimeout(new(bad))
		require.ErrorIs(t, err, ErrInvalidMinimumTimeout, bad)
		assert.Equal(t, "minimumTimeoutMs must be a positive whole number no greater than 1800000.", err.Error())
	}
	d, err := ValidateMinimumTimeout(new(float64(1_800_000)))
	require.NoError(t, err)
	assert.Equal(t, 30*time.Minute, d)
	d, err = ValidateMinimumTimeout(nil)
	require.NoError(t, err)
	assert.Zero(t, d)

	o := Options{Timeout: time.Minute, MinimumTimeout: 10 * time.Minute}
	assert.Equal(t, 10*time.Minute, o.transferTimeout(), "raises file transfers")
	assert.Equal(t, time.Minute, o.commandTimeout(Command{}), "commands keep the configured limit")
	assert.Equal(t, 2*time.Second, o.commandTimeout(Command{Timeout: 2 * time.Second}))
	o.MinimumTimeout = time.Second
	assert.Equal(t, time.Minute, o.transferTimeout(), "never lowers")
}

func TestMinimumTimeoutRaisesOnlyTransferRoundTrips(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "a"), "a", 0o644)
	var cmdTimeout time.Duration
	e.t.RunCommand = func(ctx context.Context, command, cwd string, timeout time.Duration) (int, string, string, error) {
		cmdTimeout = timeout
		return 0, "", "", nil
	}
	ops := []Operation{{ID: "o",
		Files:              []Mapping{{SourcePath: e.root + "/a", TargetPath: filepath.Join(t.TempDir(), "a"), Kind: KindFile}},
		PostUploadCommands: []Command{{Command: "true"}},
	}}
	// The guard round trip is slower than the configured limit.
	e.srv.Inject(daytonatest.Fault{Route: "/process/execute", Delay: 800 * time.Millisecond, Times: 1})
	_, err := SyncOut(t.Context(), e.t, ops, Options{Timeout: 300 * time.Millisecond})
	require.Error(t, err, "without the minimum the configured limit cuts the transfer")

	e.srv.Inject(daytonatest.Fault{Route: "/process/execute", Delay: 800 * time.Millisecond, Times: 1})
	_, err = SyncOut(t.Context(), e.t, ops, Options{Timeout: 300 * time.Millisecond, MinimumTimeout: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, 300*time.Millisecond, cmdTimeout, "post-upload commands keep the configured limit")
}

var errNotFound = errors.New("not found")

// TestSyncInSandboxFailureRemovesScratch: when the sandbox script that
// promotes uploaded files or extracts an uploaded archive fails (a file
// stands where a directory is needed), every reserved name is swept and
// the operation's post-upload commands are skipped.
func TestSyncInSandboxFailureRemovesScratch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string
		exit       int // 0 = not checked
		ms         func(host, root string) []Mapping
		cmds       []Command
	}{
		{"promotion", "Daytona syncIn rename command failed (exit 43)", 43, func(host, root string) []Mapping {
			return []Mapping{fileMapping(filepath.Join(host, "a"), root+"/ok/a"), fileMapping(filepath.Join(host, "b"), root+"/blocker/b")}
		}, nil},
		{"extraction", "Daytona syncIn extract command failed", 0, func(host, root string) []Mapping {
			return []Mapping{dirMapping(filepath.Join(host, "d"), root+"/blocker")}
		}, []Command{{Command: "overlay"}, {Command: "remove-deleted"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			host := t.TempDir()
			writeFile(t, filepath.Join(host, "a"), "a", 0o644)
			writeFile(t, filepath.Join(host, "b"), "b", 0o644)
			writeFile(t, filepath.Join(host, "d", "x"), "x", 0o644)
			writeFile(t, filepath.Join(e.root, "blocker"), "a file where a directory is needed", 0o644)
			ran := 0
			e.t.RunCommand = func(context.Context, string, string, time.Duration) (int, string, string, error) {
				ran++
				return 0, "", "", nil
			}
			_, err := SyncIn(t.Context(), e.t, []Operation{{ID: "o", Files: tc.ms(host, e.root), PostUploadCommands: tc.cmds}}, Options{})
			var se *SandboxCommandError
			require.ErrorAs(t, err, &se)
			if tc.exit != 0 {
				assert.Equal(t, tc.exit, se.Exit)
			}
			assert.Contains(t, err.Error(), tc.want)
			assert.Zero(t, ran, "post-upload commands skipped")
			assert.Empty(t, e.scratchLeft(t), "every reserved name swept")
		})
	}
}

func TestConcurrentSyncOutBothReachDownloadBeforeEitherOpens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "w1", "a"), "1", 0o644)
	writeFile(t, filepath.Join(e.root, "w2", "a"), "2", 0o644)
	gate := make(chan struct{})
	e.srv.Inject(daytonatest.Fault{Route: "/files/download", Gate: gate, Times: 2})
	host := t.TempDir()
	errs := make(chan error, 2)
	for _, w := range []string{"w1", "w2"} {
		go func() {
			_, err := SyncOut(context.Background(), e.t, []Operation{{ID: w, Files: []Mapping{{SourcePath: e.root + "/" + w, TargetPath: filepath.Join(host, w), Kind: KindDirectory}}}}, Options{})
			errs <- err
		}()
	}
	require.NoError(t, e.srv.AwaitRequests(t.Context(), "GET", "/files/download", 2))
	assert.Len(t, e.scratchLeft(t), 2, "two distinct scratch archives")
	close(gate)
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	assert.Equal(t, "1", readFile(t, filepath.Join(host, "w1", "a")))
	assert.Equal(t, "2", readFile(t, filepath.Join(host, "w2", "a")))
	assert.Empty(t, e.scratchLeft(t))
}

func TestSyncInRefusesTargetsThroughEscapingSandboxSymlink(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	outside := filepath.Join(e.info.Root, "elsewhere")
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(e.root, "esc")))
	host := t.TempDir()
	writeFile(t, filepath.Join(host, "f"), "f", 0o644)
	writeFile(t, filepath.Join(host, "d", "x"), "x", 0o644)
	for _, m := range []Mapping{
		{SourcePath: filepath.Join(host, "f"), TargetPath: e.root + "/esc/new/f", Kind: KindFile},
		{SourcePath: filepath.Join(host, "d"), TargetPath: e.root + "/esc/newdir", Kind: KindDirectory},
	} {
		_, err := SyncIn(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{m}}}, Options{})
		require.ErrorIs(t, err, ErrNotConfined, m.TargetPath)
	}
	ents, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Empty(t, ents, "nothing created outside the root")
	assert.Empty(t, e.scratchLeft(t))
}

func TestSyncOutOfTheRootItselfSkipsScratch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	writeFile(t, filepath.Join(e.root, "a.txt"), "a", 0o644)
	writeFile(t, filepath.Join(e.root, scratchPrefix+"other-call"), "another call's scratch", 0o644)
	host := t.TempDir()
	_, err := e.syncOut(t, Options{}, dirMapping(e.root, filepath.Join(host, "all")))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a.txt": "file 644 a"}, snapshotTree(t, filepath.Join(host, "all")))
}

func TestTargetNeedsRemoteDir(t *testing.T) {
	t.Parallel()
	for _, root := range []string{"", "relative"} {
		_, err := SyncIn(t.Context(), Target{Root: root}, nil, Options{})
		require.ErrorIs(t, err, ErrNoRemoteDir)
		_, err = SyncOut(t.Context(), Target{Root: root}, nil, Options{})
		require.ErrorIs(t, err, ErrNoRemoteDir)
		assert.Equal(t, "Daytona file sync requires a workspace remote dir on the lease metadata.", err.Error())
	}
}

// TestHostBatchIsAllOrNothing: a batch's files appear only on publish; a
// discarded batch leaves neither targets nor temp files, and a published
// one is not removed by a later discard.
func TestHostBatchIsAllOrNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, publish := range []bool{false, true} {
		var hb hostBatch
		for _, name := range []string{"a", "b"} {
			h, err := hb.add(filepath.Join(dir, name), nil, Options{})
			require.NoError(t, err)
			_, err = h.f.WriteString(name)
			require.NoError(t, err)
			require.NoError(t, h.finish())
		}
		assert.NoFileExists(t, filepath.Join(dir, "a"), "nothing before publish")
		if publish {
			require.NoError(t, hb.publish())
		}
		hb.discard()
		if publish {
			assert.Equal(t, "a", readFile(t, filepath.Join(dir, "a")))
			assert.Equal(t, "b", readFile(t, filepath.Join(dir, "b")))
		} else {
			assert.NoFileExists(t, filepath.Join(dir, "b"))
		}
		assert.Empty(t, hostScratchLeft(t, dir))
	}
}

// TestLexicalConfinementBeforeAnySandboxCall: a sandbox path is refused on
// the host, before any request, unless it is absolute, has no ".."
// component at all (even one that stays inside the root once cleaned) and
// is the root or lies under "<root>/": a sibling that merely shares the
// root's name as a prefix ("<root>-evil") is outside. Each direction and a
// post-upload cwd are checked; the sibling holds a real file, and no
// post-upload command may run there.
func TestLexicalConfinementBeforeAnySandboxCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	evil := e.root + "-evil"
	writeFile(t, filepath.Join(evil, "x"), "secret", 0o644)
	writeFile(t, filepath.Join(e.root, "a.txt"), "a", 0o644)
	host := t.TempDir()
	writeFile(t, filepath.Join(host, "f"), "f", 0o644)
	const escapes = "Daytona sync %s path escapes the workspace remote dir"
	const notConfined = "Daytona sync %s path is not a confined absolute path"
	type tc struct {
		op      Operation
		inbound bool
		msg     string
	}
	cases := map[string]tc{
		"syncOut prefix sibling":         {Operation{ID: "o", Files: []Mapping{fileMapping(evil+"/x", filepath.Join(host, "out"))}}, false, fmt.Sprintf(escapes, "source")},
		"syncOut prefix sibling dir":     {Operation{ID: "o", Files: []Mapping{dirMapping(evil, filepath.Join(host, "outdir"))}}, false, fmt.Sprintf(escapes, "source")},
		"syncOut in-root dotdot":         {Operation{ID: "o", Files: []Mapping{fileMapping(e.root+"/sub/../a.txt", filepath.Join(host, "out"))}}, false, fmt.Sprintf(notConfined, "source")},
		"syncOut trailing dotdot":        {Operation{ID: "o", Files: []Mapping{dirMapping(e.root+"/sub/..", filepath.Join(host, "outdir"))}}, false, fmt.Sprintf(notConfined, "source")},
		"syncIn prefix sibling":          {Operation{ID: "o", Files: []Mapping{fileMapping(filepath.Join(host, "f"), evil+"/f")}}, true, fmt.Sprintf(escapes, "target")},
		"syncIn in-root dotdot":          {Operation{ID: "o", Files: []Mapping{fileMapping(filepath.Join(host, "f"), e.root+"/sub/../f")}}, true, fmt.Sprintf(notConfined, "target")},
		"post-upload cwd prefix sibling": {Operation{ID: "o", PostUploadCommands: []Command{{Command: "touch ran", Cwd: evil}}}, true, fmt.Sprintf(escapes, "command cwd")},
		"post-upload cwd in-root dotdot": {Operation{ID: "o", PostUploadCommands: []Command{{Command: "touch ran", Cwd: e.root + "/sub/.."}}}, true, fmt.Sprintf(notConfined, "command cwd")},
	}
	for name, c := range cases {
		e.srv.ResetRequests()
		run := SyncOut
		if c.inbound {
			run = SyncIn
		}
		_, err := run(t.Context(), e.t, []Operation{c.op}, Options{})
		var pe *PathError
		require.ErrorAs(t, err, &pe, name)
		assert.Equal(t, c.msg, pe.Msg, name)
		assert.ErrorIs(t, err, ErrNotConfined, name)
		assert.Zero(t, e.srv.CountRequests("", ""), "%s: refused before any sandbox call", name)
	}
	assert.NoFileExists(t, filepath.Join(evil, "ran"), "no post-upload command ran outside the root")
	assert.NoFileExists(t, filepath.Join(evil, "f"), "nothing uploaded outside the root")
	assert.NoFileExists(t, filepath.Join(host, "out"))
	assert.NoDirExists(t, filepath.Join(host, "outdir"))
}

// TestSyncOutGuardRefusesSymlinkSwappedInBeforeCopy (upstream title 173):
// the snapshot guard re-checks that the resolved source is a regular file
// and not a symlink right before the copy. A sandbox tool wrapper swaps the
// source for a symlink to a file outside the root at the two moments a
// race could: just after the source was canonicalised, and just before cp
// runs. Both end in exit 44, nothing is downloaded, no target appears and
// the outside file's bytes never reach the host.
func TestSyncOutGuardRefusesSymlinkSwappedInBeforeCopy(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"realpath", "cp"} {
		t.Run("swap in "+tool, func(t *testing.T) {
			t.Parallel()
			bin := t.TempDir()
			for _, name := range []string{"sh", "bash", "realpath", "readlink", "dirname", "cp", "rm", "mkdir", "mv", "cat", "tar", "find", "ln"} {
				p, err := lookPath(name)
				require.NoError(t, err)
				if name != tool {
					require.NoError(t, os.Symlink(p, filepath.Join(bin, name)))
				}
			}
			// The wrapper runs the real tool; for the source (and only
			// for it) the swap happens after realpath resolved it or before
			// cp copies it.
			orig, err := lookPath(tool)
			require.NoError(t, err)
			e := newEnvWith(t, map[string]string{"PATH": bin})
			src := e.root + "/a.txt"
			outside := filepath.Join(e.info.Root, "outside.txt")
			require.NoError(t, os.WriteFile(outside, []byte("outside secret"), 0o644))
			swap := "rm -f -- " + shell.Quote(src) + " && ln -s " + shell.Quote(outside) + " " + shell.Quote(src)
			wrapper := "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = " + shell.Quote(src) + " ] && hit=1; done\n"
			if tool == "realpath" {
				wrapper += shell.Quote(orig) + " \"$@\"; rc=$?\n[ -n \"${hit:-}\" ] && { " + swap + "; }\nexit $rc\n"
			} else {
				wrapper += "[ -n \"${hit:-}\" ] && { " + swap + "; }\nexec " + shell.Quote(orig) + " \"$@\"\n"
			}
			require.NoError(t, os.WriteFile(filepath.Join(bin, tool), []byte(wrapper), 0o755))
			writeFile(t, src, "inside", 0o644)
			target := filepath.Join(t.TempDir(), "a.txt")
			_, err = e.syncOut(t, Options{}, fileMapping(src, target))
			var se *SandboxCommandError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, 44, se.Exit)
			assert.Contains(t, err.Error(), "Daytona outbound symlink-escape guard command failed (exit 44)")
			assert.NotContains(t, err.Error(), "outside secret")
			link, lerr := os.Readlink(src)
			require.NoError(t, lerr, "the wrapper swapped the source")
			assert.Equal(t, outside, link)
			assert.Zero(t, e.srv.CountRequests("POST", "/files/bulk-download"), "nothing downloaded")
			assert.NoFileExists(t, target)
			assert.Empty(t, e.scratchLeft(t))
		})
	}
}

// A sandbox whose container is gone (Daytona holds it in state error with
// the missing-container reason, and its toolbox answers 404) is a deleted
// sandbox to a syncOut: the stable code, no provider detail. (Sample-6
// bug 21: the missing container not taken as gone.)
func TestSyncOutOfALostContainerIsStableCode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.NoError(t, e.srv.LoseContainer(e.sb.ID))
	require.NoError(t, e.srv.SetError(e.sb.ID, daytonatest.MissingContainerReason(e.sb.ID), false))
	_, err := e.syncOut(t, Options{}, fileMapping(e.root+"/a", filepath.Join(t.TempDir(), "a")))
	require.ErrorIs(t, err, ErrSandboxNotFound)
	assert.Equal(t, "daytona_sandbox_not_found", err.Error())
}
