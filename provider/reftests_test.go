package provider

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReferenceTestsExist keeps docs/reference-tests.md honest: every test
// it names (a table row or the prose around it) is a test function of this
// repository. A subtest after "/" is not checked; "TestX*" must match at
// least one test.
func TestReferenceTestsExist(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "reference-tests.md"))
	require.NoError(t, err)
	have := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)\w+)\(`)
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
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
			require.True(t, found, "docs/reference-tests.md names %s, but no test starts with %s", name, prefix)
			continue
		}
		require.True(t, have[name], "docs/reference-tests.md names %s, which is not a test function of this repository", name)
	}
}
