package sync

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
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
// (base/stage) and returns base, so callers can prove nothing was written
// beside the staging dir, the extractor and its error. firstPass runs it
// as an export's first pass (unsafe links omitted).
func extractInto(t testing.TB, data []byte, lim Limits, firstPass bool) (string, *extractor, error) {
	t.Helper()
	base := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(base, "outside.txt"), []byte("keep"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(base, "stage"), 0o700))
	root, err := os.OpenRoot(filepath.Join(base, "stage"))
	require.NoError(t, err)
	defer root.Close()
	x := newExtractor(root, lim)
	x.omitLinks = firstPass
	return base, x, x.extract(context.Background(), bytes.NewReader(data))
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
	{"empty name", []member{{name: "", typ: tar.TypeReg, body: "x"}}, Limits{}, reasonEscape},
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
	{"symlink then symlink of the same name", []member{{name: "l", typ: tar.TypeSymlink, link: "x"}, {name: "l", typ: tar.TypeSymlink, link: "y"}}, Limits{}, reasonDuplicate},
	{"a file named after the root", []member{{name: ".", typ: tar.TypeReg, body: "x"}}, Limits{}, reasonEscape},
	{"symlink then file of the same name", []member{{name: "l", typ: tar.TypeSymlink, link: "x"}, {name: "l", typ: tar.TypeReg, body: "2"}}, Limits{}, reasonDuplicate},
	{"oversized entry", []member{{name: "big", typ: tar.TypeReg, body: "0123456789"}}, Limits{MaxEntrySize: 4}, ReasonOversized},
	{"total over the cap", []member{{name: "a", typ: tar.TypeReg, body: "0123"}, {name: "b", typ: tar.TypeReg, body: "0123"}}, Limits{MaxTotal: 6}, ReasonTotal},
	{"too many entries", []member{{name: "a", typ: tar.TypeReg}, {name: "b", typ: tar.TypeReg}, {name: "c", typ: tar.TypeReg}}, Limits{MaxEntries: 2}, ReasonTooMany},
	{"name too long", []member{{name: strings.Repeat("n", 300), typ: tar.TypeReg}}, Limits{MaxNameLen: 255}, ReasonOversized},
	{"too deep", []member{{name: strings.Repeat("d/", 20) + "f", typ: tar.TypeReg}}, Limits{MaxDepth: 10}, ReasonOversized},
	{"unsupported type", []member{{name: "v", typ: tar.TypeGNUSparse + 3}}, Limits{}, reasonUnknown},
}

func TestExtractRefusesHostileArchives(t *testing.T) {
	t.Parallel()
	for _, tc := range hostileCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base, _, err := extractInto(t, buildTar(t, tc.ms...), tc.lim, false)
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
	base, _, err := extractInto(t, data, Limits{}, false)
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
	base, _, err := extractInto(t, data[:1500], Limits{}, false)
	require.Error(t, err)
	assertConfined(t, base)
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
			base, x, err := extractInto(t, buildTar(t, tc.ms...), Limits{}, true)
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
	base, _, err := extractInto(t, data, Limits{}, true)
	require.NoError(t, err)
	assert.Equal(t, "written", readFile(t, filepath.Join(base, "stage", "before")))
	fi, err := os.Stat(filepath.Join(base, "stage", "after"))
	require.NoError(t, err)
	assert.Zero(t, fi.Size(), "payload after the omitted link is not written")

	_, _, err = extractInto(t, data[:len(data)-1024-1500], Limits{}, true)
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
	base, x, err := extractInto(t, buildTar(t, ms...), Limits{}, true)
	var ae *ArchiveError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, reasonLinkEscape, ae.Reason)
	assert.LessOrEqual(t, x.omitBytes, maxOmitBytes)
	assertConfined(t, base)
}
