package sync

import (
	"archive/tar"
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// member is one entry of a test archive.
type member struct {
	name, link string
	typ        byte
	body       string
	size       int64 // header size override (0 = len(body))
	mode       int64
}

func buildTar(t testing.TB, ms ...member) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, m := range ms {
		h := &tar.Header{Name: m.name, Linkname: m.link, Typeflag: m.typ, Mode: m.mode, Size: int64(len(m.body)), Format: tar.FormatPAX}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if m.typ != tar.TypeReg {
			h.Size = 0
		}
		if m.size != 0 {
			h.Size = m.size
		}
		require.NoError(t, tw.WriteHeader(h))
		if m.typ == tar.TypeReg && m.body != "" {
			_, err := tw.Write([]byte(m.body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return b.Bytes()
}

// extractInto runs the extractor on data inside a fresh sandbox directory
// (base/stage) and returns the error and base, so callers can prove nothing
// was written beside the staging dir.
func extractInto(t testing.TB, data []byte, lim Limits) (string, error) {
	t.Helper()
	base := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(base, "outside.txt"), []byte("keep"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(base, "stage"), 0o700))
	root, err := os.OpenRoot(filepath.Join(base, "stage"))
	require.NoError(t, err)
	defer root.Close()
	x := newExtractor(root, lim)
	return base, x.extract(context.Background(), bytes.NewReader(data))
}

// assertConfined checks base holds only stage/ and the untouched sentinel,
// and every symlink under stage resolves lexically inside it.
func assertConfined(t testing.TB, base string) {
	t.Helper()
	ents, err := os.ReadDir(base)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"outside.txt", "stage"}, names)
	b, err := os.ReadFile(filepath.Join(base, "outside.txt"))
	require.NoError(t, err)
	assert.Equal(t, "keep", string(b))
	stage := filepath.Join(base, "stage")
	_ = filepath.WalkDir(stage, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, _ := os.Readlink(p)
		rel, _ := filepath.Rel(stage, filepath.Join(filepath.Dir(p), target))
		assert.False(t, filepath.IsAbs(target) || rel == ".." || strings.HasPrefix(rel, "../"), "link %s -> %s escapes", p, target)
		return nil
	})
}

var hostileCases = []struct {
	name   string
	ms     []member
	lim    Limits
	reason string
}{
	{"absolute name", []member{{name: "/etc/evil", typ: tar.TypeReg, body: "x"}}, Limits{}, reasonEscape},
	{"parent traversal", []member{{name: "../outside.txt", typ: tar.TypeReg, body: "x"}}, Limits{}, reasonEscape},
	{"inner traversal", []member{{name: "a/../../outside.txt", typ: tar.TypeReg, body: "x"}}, Limits{}, reasonEscape},
	{"dot-dot directory", []member{{name: "../", typ: tar.TypeDir}}, Limits{}, reasonEscape},
	{"escaping symlink ../../outside.txt", []member{{name: "skills/demo", typ: tar.TypeSymlink, link: "../../outside.txt"}}, Limits{}, reasonLinkEscape},
	{"absolute symlink", []member{{name: "skills/demo", typ: tar.TypeSymlink, link: "/tmp/paperclip-git-workspace-example/skills/demo"}}, Limits{}, reasonLinkEscape},
	{"symlink with inner dot-dot", []member{{name: "up", typ: tar.TypeSymlink, link: "."}, {name: "x", typ: tar.TypeSymlink, link: "up/../.."}}, Limits{}, reasonLinkEscape},
	{"symlink name embeds the listing delimiter", []member{{name: "a -> b", typ: tar.TypeSymlink, link: "../../../etc/passwd"}}, Limits{}, reasonLinkEscape},
	{"write through an in-tree symlink", []member{{name: "sub/", typ: tar.TypeDir}, {name: "l", typ: tar.TypeSymlink, link: "sub"}, {name: "l/f", typ: tar.TypeReg, body: "x"}}, Limits{}, reasonNotDir},
	{"write through an escaping symlink", []member{{name: "l", typ: tar.TypeSymlink, link: "../.."}, {name: "l/outside.txt", typ: tar.TypeReg, body: "x"}}, Limits{}, reasonLinkEscape},
	{"hardlink", []member{{name: "a", typ: tar.TypeReg, body: "x"}, {name: "h", typ: tar.TypeLink, link: "a"}}, Limits{}, reasonHardlink},
	{"hardlink out", []member{{name: "h", typ: tar.TypeLink, link: "../outside.txt"}}, Limits{}, reasonHardlink},
	{"char device", []member{{name: "null", typ: tar.TypeChar}}, Limits{}, reasonSpecial},
	{"block device", []member{{name: "sda", typ: tar.TypeBlock}}, Limits{}, reasonSpecial},
	{"fifo", []member{{name: "pipe", typ: tar.TypeFifo}}, Limits{}, reasonSpecial},
	{"duplicate file", []member{{name: "a", typ: tar.TypeReg, body: "1"}, {name: "a", typ: tar.TypeReg, body: "2"}}, Limits{}, reasonDuplicate},
	{"duplicate via ./", []member{{name: "a", typ: tar.TypeReg, body: "1"}, {name: "./a", typ: tar.TypeReg, body: "2"}}, Limits{}, reasonDuplicate},
	{"duplicate via a/./b", []member{{name: "a/b", typ: tar.TypeReg, body: "1"}, {name: "a/./b", typ: tar.TypeReg, body: "2"}}, Limits{}, reasonDuplicate},
	{"duplicate directory", []member{{name: "d/", typ: tar.TypeDir}, {name: "d/", typ: tar.TypeDir}}, Limits{}, reasonDuplicate},
	{"file then directory", []member{{name: "d", typ: tar.TypeReg, body: "1"}, {name: "d/", typ: tar.TypeDir}}, Limits{}, reasonDuplicate},
	{"directory then file", []member{{name: "d/", typ: tar.TypeDir}, {name: "d", typ: tar.TypeReg, body: "1"}}, Limits{}, reasonDuplicate},
	{"file below a file", []member{{name: "f", typ: tar.TypeReg, body: "1"}, {name: "f/g", typ: tar.TypeReg, body: "2"}}, Limits{}, reasonNotDir},
	{"symlink then file of the same name", []member{{name: "l", typ: tar.TypeSymlink, link: "x"}, {name: "l", typ: tar.TypeReg, body: "2"}}, Limits{}, reasonDuplicate},
	{"oversized entry", []member{{name: "big", typ: tar.TypeReg, body: "0123456789"}}, Limits{MaxEntrySize: 4}, reasonOversized},
	{"total over the cap", []member{{name: "a", typ: tar.TypeReg, body: "0123"}, {name: "b", typ: tar.TypeReg, body: "0123"}}, Limits{MaxTotal: 6}, reasonTotal},
	{"too many entries", []member{{name: "a", typ: tar.TypeReg}, {name: "b", typ: tar.TypeReg}, {name: "c", typ: tar.TypeReg}}, Limits{MaxEntries: 2}, reasonTooMany},
	{"name too long", []member{{name: strings.Repeat("n", 300), typ: tar.TypeReg}}, Limits{MaxNameLen: 255}, reasonOversized},
	{"too deep", []member{{name: strings.Repeat("d/", 20) + "f", typ: tar.TypeReg}}, Limits{MaxDepth: 10}, reasonOversized},
	{"unsupported type", []member{{name: "v", typ: tar.TypeGNUSparse + 3}}, Limits{}, reasonUnknown},
}

func TestExtractRefusesHostileArchives(t *testing.T) {
	t.Parallel()
	for _, tc := range hostileCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base, err := extractInto(t, buildTar(t, tc.ms...), tc.lim)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrUnsafeArchive)
			var ae *ArchiveError
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, tc.reason, ae.Reason)
			assert.Contains(t, err.Error(), "Daytona syncOut refusing "+tc.reason)
			assertConfined(t, base)
		})
	}
}

func TestExtractAcceptsInTreeLinksAndStrangeNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("ü", 120) // 240 bytes: PAX path record
	data := buildTar(t,
		member{name: "./", typ: tar.TypeDir, mode: 0o755},
		member{name: "nested/", typ: tar.TypeDir, mode: 0o750},
		member{name: "nested/data.txt", typ: tar.TypeReg, body: "data"},
		member{name: "shortcut", typ: tar.TypeSymlink, link: "nested/data.txt"},
		member{name: ".claude/skills/demo", typ: tar.TypeSymlink, link: "../../nested"},
		member{name: "日本語/" + long, typ: tar.TypeReg, body: "unicode", mode: 0o600},
		member{name: "ro/", typ: tar.TypeDir, mode: 0o555},
		member{name: "ro/inside", typ: tar.TypeReg, body: "r", mode: 0o444},
		member{name: "setuid", typ: tar.TypeReg, body: "s", mode: 0o4755},
	)
	base, err := extractInto(t, data, Limits{})
	require.NoError(t, err)
	assertConfined(t, base)
	stage := filepath.Join(base, "stage")
	assert.Equal(t, "data", readFile(t, filepath.Join(stage, "shortcut")))
	assert.Equal(t, "unicode", readFile(t, filepath.Join(stage, "日本語", long)))
	assert.Equal(t, os.FileMode(0o600), permOf(t, filepath.Join(stage, "日本語", long)))
	assert.Equal(t, os.FileMode(0o755), permOf(t, filepath.Join(stage, "setuid")), "setuid dropped")
	fi, err := os.Lstat(filepath.Join(stage, "setuid"))
	require.NoError(t, err)
	assert.Zero(t, fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
}

func TestExtractRefusesTruncatedArchive(t *testing.T) {
	t.Parallel()
	data := buildTar(t, member{name: "a", typ: tar.TypeReg, body: strings.Repeat("x", 4000)})
	base, err := extractInto(t, data[:1500], Limits{})
	require.Error(t, err)
	assertConfined(t, base)
}

// TestSyncOutOmitsPlantedEscapingSymlink serves a hostile tree from a
// real sandbox: a symlink that points out of the workspace. The export
// leaves exactly that link out (after one rebuilt archive) and writes
// nothing beside its target; the link is reported.
func TestSyncOutOmitsPlantedEscapingSymlink(t *testing.T) {
	t.Parallel()
	for _, link := range []string{"../../outside.txt", "/tmp/paperclip-git-workspace-example/skills/demo"} {
		t.Run(link, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			src := filepath.Join(e.root, "ws")
			writeFile(t, filepath.Join(src, "ok.txt"), "ok", 0o644)
			require.NoError(t, os.MkdirAll(filepath.Join(src, "skills"), 0o755))
			require.NoError(t, os.Symlink(link, filepath.Join(src, "skills", "demo")))
			host := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(host, "outside.txt"), []byte("keep"), 0o644))
			dst := filepath.Join(host, "out")
			res, err := SyncOut(t.Context(), e.t, []Operation{{ID: "o", Files: []Mapping{{SourcePath: src, TargetPath: dst, Kind: KindDirectory}}}}, Options{})
			require.NoError(t, err)
			assert.Equal(t, []string{src + "/skills/demo"}, res[0].OmittedUnsafeLinks)
			assert.Equal(t, "ok", readFile(t, filepath.Join(dst, "ok.txt")))
			assert.DirExists(t, filepath.Join(dst, "skills"))
			_, lerr := os.Lstat(filepath.Join(dst, "skills", "demo"))
			assert.ErrorIs(t, lerr, os.ErrNotExist)
			assert.Equal(t, "keep", readFile(t, filepath.Join(host, "outside.txt")))
			assert.Empty(t, hostScratchLeft(t, host))
			assert.Empty(t, e.scratchLeft(t))
		})
	}
}

// TestSyncOutRefusesArchiveFromHostileTar: the sandbox's own tar is
// replaced (a planted program first on PATH) and emits a prebuilt hostile
// archive; the host refuses it and writes nothing outside the target.
func TestSyncOutRefusesArchiveFromHostileTar(t *testing.T) {
	t.Parallel()
	for _, tc := range hostileCases {
		if tc.lim != (Limits{}) {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bin := t.TempDir()
			planted := filepath.Join(bin, "planted.tar")
			require.NoError(t, os.WriteFile(planted, buildTar(t, tc.ms...), 0o644))
			// The fake tar writes the planted archive wherever -f points.
			script := "#!/bin/bash\nout=-\nwhile [ $# -gt 0 ]; do case \"$1\" in -f) out=$2; shift;; esac; shift; done\ncat > /dev/null\nif [ \"$out\" = - ]; then cat " + planted + "; else cat " + planted + " > \"$out\"; fi\n"
			writeFile(t, filepath.Join(bin, "tar"), script, 0o755)
			e := newEnvWith(t, map[string]string{"PATH": bin + ":" + os.Getenv("PATH")})
			src := filepath.Join(e.root, "ws")
			require.NoError(t, os.MkdirAll(src, 0o755))
			host := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(host, "outside.txt"), []byte("keep"), 0o644))
			dst := filepath.Join(host, "deep", "out")
			ops := []Operation{{ID: "o", Files: []Mapping{{SourcePath: src, TargetPath: dst, Kind: KindDirectory}}}}
			_, err := SyncOut(t.Context(), e.t, ops, Options{})
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrUnsafeArchive)
			assert.NoDirExists(t, dst)
			assert.Equal(t, "keep", readFile(t, filepath.Join(host, "outside.txt")))
			assert.Empty(t, hostScratchLeft(t, host))
			ents, _ := os.ReadDir(host)
			assert.Len(t, ents, 2) // outside.txt and the (empty) deep/ parent
			assert.Empty(t, e.scratchLeft(t))
		})
	}
}
