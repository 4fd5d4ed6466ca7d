package daytonaworker

import (
	"go/parser"
	"go/token"
	"path"
	"slices"
	"strings"
	"testing"
)

// TestEveryPackageHasADocComment: each package (folder with non-test Go
// files) has a "// Package x ..." or "// Command x ..." comment of one
// paragraph, saying what the package is for and who uses it. Longer
// explanations live in docs/<topic>.md (cited from the comment by path) or
// next to the code they explain.
func TestEveryPackageHasADocComment(t *testing.T) {
	dirs := map[string][]string{}
	for _, f := range moduleGoFiles(t) {
		if !strings.HasSuffix(f, "_test.go") {
			dirs[path.Dir(f)] = append(dirs[path.Dir(f)], f)
		}
	}
	keys := make([]string, 0, len(dirs))
	for dir := range dirs {
		keys = append(keys, dir)
	}
	slices.Sort(keys)
	for _, dir := range keys {
		var docs []string // the files that carry the package's doc comment
		name := ""
		for _, f := range dirs[dir] {
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			name = af.Name.Name
			if af.Doc == nil {
				continue
			}
			text := af.Doc.Text()
			if !strings.HasPrefix(text, "Package "+name+" ") && !strings.HasPrefix(text, "Command ") {
				continue
			}
			docs = append(docs, f)
			if n := paragraphs(text); n > 1 {
				t.Errorf("package %s: the doc comment in %s has %d paragraphs; keep one (what the package is for and who uses it) and move the rest to docs/ or next to the code", name, f, n)
			}
		}
		if len(docs) == 0 {
			t.Errorf("package %s in %s has no doc comment", name, dir)
		}
	}
}

// paragraphs counts the paragraphs of a doc comment's text: runs of lines
// separated by blank ones.
func paragraphs(text string) int {
	n := 0
	for _, p := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if strings.TrimSpace(p) != "" {
			n++
		}
	}
	return n
}

func TestParagraphs(t *testing.T) {
	for text, want := range map[string]int{
		"Package x does y.\n":                    1,
		"Package x does y\nand z.\n":             1,
		"Package x does y.\n\nIt also does z.\n": 2,
		"Package x does y.\n\n\tcode\n\nMore.\n": 3,
		"\nPackage x does y.\n\n":                1,
	} {
		if got := paragraphs(text); got != want {
			t.Errorf("paragraphs(%q) = %d, want %d", text, got, want)
		}
	}
}
