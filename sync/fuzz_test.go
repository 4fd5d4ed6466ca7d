package sync

import (
	"archive/tar"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validArchives are well-formed inputs the verifier must accept.
func validArchives(t testing.TB) [][]byte {
	return [][]byte{
		buildTar(t,
			member{name: "./", typ: tar.TypeDir},
			member{name: "nested/", typ: tar.TypeDir},
			member{name: "nested/data.txt", typ: tar.TypeReg, body: "data"},
			member{name: "shortcut", typ: tar.TypeSymlink, link: "nested/data.txt"},
			member{name: ".claude/skills/demo", typ: tar.TypeSymlink, link: "../../nested"},
		),
		buildTar(t, member{name: "ünï/" + strings.Repeat("x", 200), typ: tar.TypeReg, body: "long"}),
		buildTar(t, member{name: "ro/", typ: tar.TypeDir, mode: 0o555}, member{name: "ro/f", typ: tar.TypeReg, body: "r", mode: 0o444}),
	}
}

// FuzzExtract feeds arbitrary bytes to the archive verifier/extractor and
// checks the invariant that matters: whatever the input, nothing is written
// beside the staging directory and no link inside it points out.
// Seeds: the hostile table, valid archives, and testdata/fuzz/FuzzExtract.
func FuzzExtract(f *testing.F) {
	for _, tc := range hostileCases {
		f.Add(buildTar(f, tc.ms...))
	}
	for _, a := range validArchives(f) {
		f.Add(a)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{MaxEntries: 512, MaxEntrySize: 1 << 20, MaxTotal: 4 << 20, MaxNameLen: 1024, MaxDepth: 32}
		base, _, _ := extractInto(t, data, lim, false)
		assertConfined(t, base)
		// The first pass of an export (unsafe links omitted) keeps the
		// same invariant.
		base, _, _ = extractInto(t, data, lim, true)
		assertConfined(t, base)
	})
}

// TestWriteFuzzSeeds regenerates testdata/fuzz/FuzzExtract from the tables
// (SYNC_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzSeeds ./sync/).
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("SYNC_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set SYNC_WRITE_FUZZ_SEEDS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzExtract")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, tc := range hostileCases {
		write(fmt.Sprintf("hostile-%02d-%s", i, strings.NewReplacer(" ", "-", "/", "_", ".", "_").Replace(tc.name)), buildTar(t, tc.ms...))
	}
	for i, a := range validArchives(t) {
		write(fmt.Sprintf("valid-%02d", i), a)
	}
}
