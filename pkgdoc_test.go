package daytonaworker

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryPackageHasADocComment walks the module: each package (folder with
// non-test Go files) needs a "// Package x ..." or "// Command x ..." comment.
func TestEveryPackageHasADocComment(t *testing.T) {
	dirs := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		documented, name := false, ""
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			name = af.Name.Name
			if af.Doc != nil {
				text := af.Doc.Text()
				if strings.HasPrefix(text, "Package "+name+" ") || strings.HasPrefix(text, "Command ") {
					documented = true
				}
			}
		}
		if !documented {
			t.Errorf("package %s in %s has no doc comment", name, dir)
		}
	}
}
