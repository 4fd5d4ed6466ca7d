package provider

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// referenceTitles is the number of titles of the reference plugin's test
// suite (docs/behavior.md#reference-tests).
const referenceTitles = 203

// titleMaps are the documents that map reference titles to our tests.
var titleMaps = []string{"reference-tests.md", "exec.md", "sync.md"}

// TestReferenceTestsExist keeps the title maps honest: every test they
// name (a table row or the prose around it) is a test function of this
// repository, and every reference title has a row in one of them (or a
// "#N" in reference-tests.md's prose). A subtest after "/" is not checked;
// "TestX*" must match at least one test.
func TestReferenceTestsExist(t *testing.T) {
	var doc []byte
	mapped := map[int]bool{}
	row := regexp.MustCompile(`(?m)^\|\s*([0-9][0-9,\- ]*?)\s*\|`)
	for _, name := range titleMaps {
		b, err := os.ReadFile(filepath.Join("..", "docs", name))
		require.NoError(t, err)
		doc = append(doc, b...)
		for _, m := range row.FindAllSubmatch(b, -1) {
			for _, part := range strings.Split(string(m[1]), ",") {
				lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
				a, err := strconv.Atoi(strings.TrimSpace(lo))
				require.NoError(t, err, "%s: row %q", name, m[0])
				b := a
				if isRange {
					b, err = strconv.Atoi(strings.TrimSpace(hi))
					require.NoError(t, err, "%s: row %q", name, m[0])
				}
				for n := a; n <= b; n++ {
					mapped[n] = true
				}
			}
		}
		if name == "reference-tests.md" {
			for _, m := range regexp.MustCompile(`#([0-9]+)\b`).FindAllSubmatch(b, -1) {
				n, _ := strconv.Atoi(string(m[1]))
				mapped[n] = true
			}
		}
	}
	var missing []int
	for n := 1; n <= referenceTitles; n++ {
		if !mapped[n] {
			missing = append(missing, n)
		}
	}
	require.Empty(t, missing, "reference titles without a row in docs/%v", titleMaps)
	have := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)\w+)\(`)
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(src, -1) {
			have[string(m[1])] = true
		}
		return nil
	})
	require.NoError(t, err)
	named := regexp.MustCompile(`\b(?:Test|Benchmark)[A-Z]\w*\*?`).FindAllString(string(doc), -1)
	require.Greater(t, len(named), 100, "the map names the tests it maps to")
	for _, name := range named {
		if prefix, ok := strings.CutSuffix(name, "*"); ok {
			found := false
			for h := range have {
				found = found || strings.HasPrefix(h, prefix)
			}
			require.True(t, found, "the title maps name %s, but no test starts with %s", name, prefix)
			continue
		}
		require.True(t, have[name], "the title maps name %s, which is not a test function of this repository", name)
	}
}
