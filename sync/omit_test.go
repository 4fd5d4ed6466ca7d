package sync

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
)

// logBuffer is an Options.Logger writing to a buffer the test reads.
func logBuffer() (*slog.Logger, *bytes.Buffer) {
	var b bytes.Buffer
	return slog.New(slog.NewTextHandler(&b, nil)), &b
}

// sh runs a command in the sandbox, in dir, and fails the test on a
// non-zero exit.
func (e *env) sh(t testing.TB, dir, command string) {
	t.Helper()
	res, _, err := e.c.Toolbox.Execute(t.Context(), e.sb.Ref(), &daytona.ExecuteRequest{Command: command, Cwd: dir})
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, res.Result)
}

// TestSyncOutVenvOmitsAbsoluteLinkAndRetriesOnce is the scenario,
// verbatim: a workspace with one virtualenv interpreter link to
// /usr/bin/python3 exports, without that link, after one rebuilt archive.
func TestSyncOutVenvOmitsAbsoluteLinkAndRetriesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.sh(t, e.root, "mkdir -p proj/.venv/bin proj/src && echo x > proj/src/main.py && ln -s /usr/bin/python3 proj/.venv/bin/python3")
	host := t.TempDir()
	dst := filepath.Join(host, "proj")
	log, logs := logBuffer()
	e.srv.ResetRequests()
	res, err := SyncOut(t.Context(), e.t, []Operation{{ID: "out", Files: []Mapping{{SourcePath: e.root + "/proj", TargetPath: dst, Kind: KindDirectory}}}}, Options{Logger: log})
	require.NoError(t, err)
	assert.Equal(t, "x\n", readFile(t, filepath.Join(dst, "src", "main.py")))
	assert.DirExists(t, filepath.Join(dst, ".venv", "bin"))
	_, lerr := os.Lstat(filepath.Join(dst, ".venv", "bin", "python3"))
	assert.ErrorIs(t, lerr, os.ErrNotExist, "the unsafe link is omitted")
	require.Len(t, res, 1)
	assert.EqualValues(t, 1, res[0].OmittedUnsafeLinkCount)
	assert.Equal(t, []string{e.root + "/proj/.venv/bin/python3"}, res[0].OmittedUnsafeLinks)
	assert.EqualValues(t, 1, res[0].FilesTransferred, "main.py")
	assert.Equal(t, 1, strings.Count(logs.String(), OmitNotice), logs.String())
	assert.Contains(t, logs.String(), "level=WARN")
	assert.Equal(t, 2, e.srv.CountRequests("GET", "/files/download"), "one retry, not more")
	assert.Empty(t, e.scratchLeft(t))
	assert.Empty(t, hostScratchLeft(t, host))
	fi, err := os.Lstat(filepath.Join(e.root, "proj", ".venv", "bin", "python3"))
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeSymlink, "the sandbox tree is untouched")
}

// TestSyncOutOmitsUnsafeLinksOfHostileTrees: trees built in a real sandbox
// with links to /etc/passwd, out through "..", and with an inner ".."
// export without those links; a FIFO or a tree that changes nothing about
// them is still refused. Nothing is ever written beside the target.
func TestSyncOutOmitsUnsafeLinksOfHostileTrees(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		build   string   // run in the source directory
		omitted []string // relative to the source; nil = refused
		refusal string
	}{
		{name: "link to /etc/passwd", build: "ln -s /etc/passwd passwd", omitted: []string{"passwd"}},
		{name: "dot-dot escape", build: "mkdir -p a/b && ln -s ../../../outside.txt a/b/up", omitted: []string{"a/b/up"}},
		{name: "inner dot-dot", build: "mkdir d && ln -s d/../.. sneaky", omitted: []string{"sneaky"}},
		{name: "several, nested and relative-safe kept", build: "mkdir -p x/y && ln -s /etc x/etc && ln -s /usr/bin/python3 x/y/py && ln -s ../ok.txt x/fine", omitted: []string{"x/etc", "x/y/py"}},
		{name: "fifo", build: "mkfifo pipe && ln -s /etc/passwd passwd", refusal: reasonSpecial},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			src := filepath.Join(e.root, "ws")
			writeFile(t, filepath.Join(src, "ok.txt"), "ok", 0o644)
			e.sh(t, src, tc.build)
			host := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(host, "outside.txt"), []byte("keep"), 0o644))
			dst := filepath.Join(host, "out")
			res, err := SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: src, TargetPath: dst, Kind: KindDirectory}}}}, Options{})
			assert.Equal(t, "keep", readFile(t, filepath.Join(host, "outside.txt")))
			assert.Empty(t, hostScratchLeft(t, host))
			assert.Empty(t, e.scratchLeft(t))
			if tc.omitted == nil {
				require.Error(t, err)
				var ae *ArchiveError
				require.ErrorAs(t, err, &ae)
				assert.Equal(t, tc.refusal, ae.Reason)
				assert.NoDirExists(t, dst, "nothing published")
				return
			}
			require.NoError(t, err)
			want := make([]string, len(tc.omitted))
			for i, o := range tc.omitted {
				want[i] = src + "/" + o
				_, lerr := os.Lstat(filepath.Join(dst, o))
				assert.ErrorIs(t, lerr, os.ErrNotExist, o)
			}
			assert.ElementsMatch(t, want, res[0].OmittedUnsafeLinks)
			assert.EqualValues(t, len(want), res[0].OmittedUnsafeLinkCount)
			assert.Equal(t, "ok", readFile(t, filepath.Join(dst, "ok.txt")))
			_ = filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Type()&os.ModeSymlink != 0 {
					l, _ := os.Readlink(p)
					assert.False(t, filepath.IsAbs(l), "absolute link %s -> %s published", p, l)
				}
				return nil
			})
		})
	}
}

// TestSyncOutRetryThatIsStillUnsafeFails: the sandbox's tar ignores the
// excludes and sends the same archive again; the retry is refused exactly
// as a first archive is today, after one retry and one notice.
func TestSyncOutRetryThatIsStillUnsafeFails(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	planted := filepath.Join(bin, "planted.tar")
	require.NoError(t, os.WriteFile(planted, buildTar(t,
		member{name: "./ok.txt", typ: tar.TypeReg, body: "ok"},
		member{name: "./passwd", typ: tar.TypeSymlink, link: "/etc/passwd"},
	), 0o644))
	script := "#!/bin/bash\nout=-\nwhile [ $# -gt 0 ]; do case \"$1\" in -f) out=$2; shift;; esac; shift; done\ncat > /dev/null\nif [ \"$out\" = - ]; then cat " + planted + "; else cat " + planted + " > \"$out\"; fi\n"
	writeFile(t, filepath.Join(bin, "tar"), script, 0o755)
	e := newEnvWith(t, map[string]string{"PATH": bin + ":" + os.Getenv("PATH")})
	src := filepath.Join(e.root, "ws")
	require.NoError(t, os.MkdirAll(src, 0o755))
	host := t.TempDir()
	dst := filepath.Join(host, "out")
	log, logs := logBuffer()
	e.srv.ResetRequests()
	_, err := SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: src, TargetPath: dst, Kind: KindDirectory}}}}, Options{Logger: log})
	require.ErrorIs(t, err, ErrUnsafeArchive)
	assert.Contains(t, err.Error(), "Daytona syncOut refusing tarball link whose target escapes the extraction dir")
	assert.Equal(t, 1, strings.Count(logs.String(), OmitNotice))
	assert.Equal(t, 2, e.srv.CountRequests("GET", "/files/download"), "exactly one retry")
	assert.NoDirExists(t, dst)
	assert.Empty(t, hostScratchLeft(t, host))
	assert.Empty(t, e.scratchLeft(t))
}

// TestDiskFullExportOmitsUnsafeLinksToo: the terminal fallback shares the
// extractor, so the same rule applies there, and the retry streams again at
// once instead of filling the sandbox disk a second time.
func TestDiskFullExportOmitsUnsafeLinksToo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := filepath.Join(e.root, "proj")
	big := randomBytes(t, 300<<10)
	require.NoError(t, os.MkdirAll(filepath.Join(src, ".venv", "bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "big.bin"), big, 0o644))
	require.NoError(t, os.Symlink("/usr/bin/python3", filepath.Join(src, ".venv", "bin", "python3")))
	e.fillSandbox(t, 64<<10)
	host := t.TempDir()
	dst := filepath.Join(host, "out")
	log, logs := logBuffer()
	e.srv.ResetRequests()
	res, err := SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: src, TargetPath: dst, Kind: KindDirectory}}}}, Options{HostReserve: -1, Logger: log})
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(dst, "big.bin"))
	require.NoError(t, err)
	assert.Equal(t, big, got)
	_, lerr := os.Lstat(filepath.Join(dst, ".venv", "bin", "python3"))
	assert.ErrorIs(t, lerr, os.ErrNotExist)
	assert.Equal(t, []string{src + "/.venv/bin/python3"}, res[0].OmittedUnsafeLinks)
	assert.Equal(t, 1, strings.Count(logs.String(), OmitNotice))
	assert.Equal(t, 2, e.srv.CountRequests("POST", "/process/pty"), "streamed twice")
	assert.Equal(t, 1, e.srv.CountDispatches("--hard-dereference"), "the archive was built in the sandbox once")
	assert.Empty(t, e.scratchLeft(t))
	assert.Empty(t, hostScratchLeft(t, host))
}

// extractCollect runs the first-pass extractor (unsafe links omitted) like
// extractInto, and also returns the extractor.
func extractCollect(t testing.TB, data []byte, lim Limits) (string, *extractor, error) {
	t.Helper()
	base := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(base, "outside.txt"), []byte("keep"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(base, "stage"), 0o700))
	root, err := os.OpenRoot(filepath.Join(base, "stage"))
	require.NoError(t, err)
	defer root.Close()
	x := newExtractor(root, lim)
	x.omitLinks = true
	return base, x, x.extract(context.Background(), bytes.NewReader(data))
}

// TestFirstPassOmitsOnlyUnsafeLinks: the first pass skips unsafe links and
// nothing else; a member that would use an omitted link's name or go
// through it is still refused, and nothing lands beside the staging dir.
func TestFirstPassOmitsOnlyUnsafeLinks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		ms      []member
		omitted []string
		refusal string
	}{
		{"absolute", []member{{name: "./.venv/bin/python3", typ: tar.TypeSymlink, link: "/usr/bin/python3"}}, []string{".venv/bin/python3"}, ""},
		{"passwd, dot-dot and inner dot-dot", []member{
			{name: "p", typ: tar.TypeSymlink, link: "/etc/passwd"},
			{name: "a/up", typ: tar.TypeSymlink, link: "../../outside.txt"},
			{name: "d/", typ: tar.TypeDir},
			{name: "i", typ: tar.TypeSymlink, link: "d/../.."},
			{name: "safe", typ: tar.TypeSymlink, link: "a"},
		}, []string{"p", "a/up", "i"}, ""},
		{"write through an omitted link", []member{{name: "l", typ: tar.TypeSymlink, link: "../.."}, {name: "l/outside.txt", typ: tar.TypeReg, body: "x"}}, nil, reasonNotDir},
		{"directory through an omitted link", []member{{name: "l", typ: tar.TypeSymlink, link: "/etc"}, {name: "l/sub/", typ: tar.TypeDir}}, nil, reasonNotDir},
		{"file named like an omitted link", []member{{name: "l", typ: tar.TypeSymlink, link: "/etc/passwd"}, {name: "./l", typ: tar.TypeReg, body: "x"}}, nil, reasonDuplicate},
		{"directory named like an omitted link", []member{{name: "l", typ: tar.TypeSymlink, link: "/etc"}, {name: "l/", typ: tar.TypeDir}}, nil, reasonDuplicate},
		{"second link of the same name", []member{{name: "l", typ: tar.TypeSymlink, link: "/etc"}, {name: "l", typ: tar.TypeSymlink, link: "/"}}, nil, reasonDuplicate},
		{"hardlink out after an omitted link", []member{{name: "l", typ: tar.TypeSymlink, link: "/etc"}, {name: "h", typ: tar.TypeLink, link: "../outside.txt"}}, nil, reasonHardlink},
		{"fifo after an omitted link", []member{{name: "l", typ: tar.TypeSymlink, link: "/etc"}, {name: "pipe", typ: tar.TypeFifo}}, nil, reasonSpecial},
		{"device after an omitted link", []member{{name: "l", typ: tar.TypeSymlink, link: "/etc"}, {name: "null", typ: tar.TypeChar}}, nil, reasonSpecial},
		{"traversal after an omitted link", []member{{name: "l", typ: tar.TypeSymlink, link: "/etc"}, {name: "../outside.txt", typ: tar.TypeReg, body: "x"}}, nil, reasonEscape},
		{"absolute member after an omitted link", []member{{name: "l", typ: tar.TypeSymlink, link: "/etc"}, {name: "/etc/evil", typ: tar.TypeReg, body: "x"}}, nil, reasonEscape},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base, x, err := extractCollect(t, buildTar(t, tc.ms...), Limits{})
			assertConfined(t, base)
			if tc.refusal != "" {
				var ae *ArchiveError
				require.ErrorAs(t, err, &ae)
				assert.Equal(t, tc.refusal, ae.Reason)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.omitted, x.omitNames)
			require.NotNil(t, x.omitFirst)
			assert.Equal(t, reasonLinkEscape, x.omitFirst.Reason)
			for _, n := range tc.omitted {
				_, lerr := os.Lstat(filepath.Join(base, "stage", n))
				assert.ErrorIs(t, lerr, os.ErrNotExist, "omitted link %s was not created", n)
			}
		})
	}
}

// TestFirstPassStopsWritingAfterAnOmittedLink: once the first pass knows
// its staging tree will be discarded it stops writing payloads, but still
// reads and checks every member (a truncated member is still an error).
func TestFirstPassStopsWritingAfterAnOmittedLink(t *testing.T) {
	t.Parallel()
	data := buildTar(t,
		member{name: "before", typ: tar.TypeReg, body: "written"},
		member{name: "l", typ: tar.TypeSymlink, link: "/usr/bin/python3"},
		member{name: "after", typ: tar.TypeReg, body: strings.Repeat("y", 3000)},
	)
	base, _, err := extractCollect(t, data, Limits{})
	require.NoError(t, err)
	assert.Equal(t, "written", readFile(t, filepath.Join(base, "stage", "before")))
	fi, err := os.Stat(filepath.Join(base, "stage", "after"))
	require.NoError(t, err)
	assert.Zero(t, fi.Size(), "payload after the omitted link is not written")

	_, _, err = extractCollect(t, data[:len(data)-1024-1500], Limits{})
	require.Error(t, err, "a cut member is still refused")
}

// TestFirstPassOmissionBudget: more unsafe links than a rebuilt archive's
// excludes can carry is a refusal, as before the retry existed, and the
// omitted names held in memory stay bounded.
func TestFirstPassOmissionBudget(t *testing.T) {
	t.Parallel()
	var ms []member
	dir := strings.Repeat("n", 200)
	for i := range maxOmitBytes/len(excludeArg(dir+"/000000")) + 2 {
		ms = append(ms, member{name: fmt.Sprintf("%s/%06d", dir, i), typ: tar.TypeSymlink, link: "/abs"})
	}
	base, x, err := extractCollect(t, buildTar(t, ms...), Limits{})
	var ae *ArchiveError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, reasonLinkEscape, ae.Reason)
	assert.LessOrEqual(t, x.omitBytes, maxOmitBytes)
	assertConfined(t, base)
}

// TestExcludedMemberNamesAreLiteral: the rebuilt archive's excludes match
// names with glob characters, quotes and newlines exactly, and nothing
// else (a sibling that a glob would match stays).
func TestExcludedMemberNamesAreLiteral(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := filepath.Join(e.root, "ws")
	odd := []string{"we?rd*", "it's", "new\nline", "sp ace", "-dash"}
	for _, n := range odd {
		require.NoError(t, os.MkdirAll(filepath.Join(src, "d"), 0o755))
		require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(src, "d", n)))
	}
	writeFile(t, filepath.Join(src, "d", "weird*"), "kept: a glob would have matched it", 0o644)
	writeFile(t, filepath.Join(src, "ws", "d", "it's"), "kept: same name deeper", 0o644)
	host := t.TempDir()
	dst := filepath.Join(host, "out")
	res, err := SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: src, TargetPath: dst, Kind: KindDirectory, Exclude: []string{"*.log"}}}}}, Options{})
	require.NoError(t, err)
	assert.EqualValues(t, len(odd), res[0].OmittedUnsafeLinkCount)
	assert.Equal(t, "kept: a glob would have matched it", readFile(t, filepath.Join(dst, "d", "weird*")))
	assert.Equal(t, "kept: same name deeper", readFile(t, filepath.Join(dst, "ws", "d", "it's")))
	for _, n := range odd {
		_, lerr := os.Lstat(filepath.Join(dst, "d", n))
		assert.ErrorIs(t, lerr, os.ErrNotExist, n)
	}
}
