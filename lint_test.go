package daytonaworker

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Code rules that review used to keep by habit, checked here so that they
// hold without anyone remembering them (docs/development.md, "Code rules").
//
// Import aliases. Two of our packages share their last element with a
// standard package (exec with os/exec, sync with sync), so a bare "exec." or
// "sync." in a file says nothing about which one is meant. Every file of the
// module, tests included, therefore imports:
//
//   - our exec package as cmdexec (package exec cannot import itself; its
//     external tests do, and they use cmdexec too);
//   - our sync package as filesync;
//   - the standard os/exec as osexec, everywhere;
//   - the standard sync as stdsync inside our sync package (package sync and
//     its external tests, package sync_test); elsewhere it keeps its own name.
//
// The name has to be written out: an unnamed import, a dot or blank import,
// or another name is refused, with the file and line.
//
// File size. A production Go file (not a _test.go file, not generated code)
// has at most maxProductionLines lines: past that a file holds more than one
// job and should be split by job.

// maxProductionLines is the most lines a hand-written production Go file
// may have.
const maxProductionLines = 600

// importRule is one import path and the only name it may have; inPackages,
// when set, limits the rule to files of those package clauses.
type importRule struct {
	path, name string
	inPackages []string
}

// importRules are the aliases above; module is the module path from go.mod.
func importRules(module string) []importRule {
	return []importRule{
		{path: module + "/exec", name: "cmdexec"},
		{path: module + "/sync", name: "filesync"},
		{path: "os/exec", name: "osexec"},
		{path: "sync", name: "stdsync", inPackages: []string{"sync", "sync_test"}},
	}
}

// importAliasProblems returns "file:line: ..." for each import of src that
// breaks a rule.
func importAliasProblems(path string, src []byte, rules []importRule) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, imp := range f.Imports {
		ip, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			return nil, err
		}
		for _, r := range rules {
			if ip != r.path || r.inPackages != nil && !slices.Contains(r.inPackages, f.Name.Name) {
				continue
			}
			got := "no name"
			if imp.Name != nil {
				if imp.Name.Name == r.name {
					continue
				}
				got = "the name " + imp.Name.Name
			}
			out = append(out, fmt.Sprintf("%s:%d: %q is imported with %s; import it as %s %q",
				path, fset.Position(imp.Pos()).Line, ip, got, r.name, ip))
		}
	}
	return out, nil
}

// moduleGoFiles returns every .go file of the module: those of repoFiles
// outside testdata folders (which hold inputs, not the module's code).
func moduleGoFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, path := range repoFiles(t) {
		if strings.HasSuffix(path, ".go") && !slices.Contains(strings.Split(path, "/"), "testdata") {
			files = append(files, path)
		}
	}
	if len(files) < 50 {
		t.Fatalf("only %d Go files found: not run from the repository root?", len(files))
	}
	return files
}

func modulePath(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "module "); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatal("go.mod has no module line")
	return ""
}

func TestImportAliases(t *testing.T) {
	rules := importRules(modulePath(t))
	for _, path := range moduleGoFiles(t) {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		problems, err := importAliasProblems(path, src, rules)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Error(p)
		}
	}
}

// TestImportAliasCheckerCatchesBreakage keeps the checker itself honest.
func TestImportAliasCheckerCatchesBreakage(t *testing.T) {
	rules := importRules("example.com/m")
	for _, c := range []struct {
		name, src string
		problems  int
	}{
		{"all as the rule says", "package provider\nimport (\n\tosexec \"os/exec\"\n\t\"sync\"\n\tcmdexec \"example.com/m/exec\"\n\tfilesync \"example.com/m/sync\"\n)\n", 0},
		{"std sync named in package sync", "package sync\nimport stdsync \"sync\"\n", 0},
		{"std sync named in sync's external tests", "package sync_test\nimport (\n\tstdsync \"sync\"\n\tfilesync \"example.com/m/sync\"\n)\n", 0},
		{"our exec unnamed", "package provider\nimport \"example.com/m/exec\"\n", 1},
		{"our exec misnamed", "package provider\nimport x \"example.com/m/exec\"\n", 1},
		{"our exec in its external tests", "package exec_test\nimport \"example.com/m/exec\"\n", 1},
		{"our sync unnamed", "package provider\nimport \"example.com/m/sync\"\n", 1},
		{"os/exec unnamed", "package main\nimport \"os/exec\"\n", 1},
		{"os/exec as exec", "package main\nimport exec \"os/exec\"\n", 1},
		{"os/exec blank", "package main\nimport _ \"os/exec\"\n", 1},
		{"os/exec dot", "package main\nimport . \"os/exec\"\n", 1},
		{"std sync unnamed in package sync", "package sync\nimport \"sync\"\n", 1},
		{"std sync unnamed in sync's external tests", "package sync_test\nimport \"sync\"\n", 1},
		{"every rule broken", "package sync\nimport (\n\t\"sync\"\n\t\"os/exec\"\n\t\"example.com/m/exec\"\n\tfs \"example.com/m/sync\"\n)\n", 4},
		{"a look-alike path is not ours", "package main\nimport \"example.com/m/exec/exectest\"\n", 0},
	} {
		problems, err := importAliasProblems("x.go", []byte(c.src), rules)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(problems) != c.problems {
			t.Errorf("%s: %d problems, want %d: %q", c.name, len(problems), c.problems, problems)
		}
		for _, p := range problems {
			if !strings.HasPrefix(p, "x.go:") {
				t.Errorf("%s: %q does not name the file and line", c.name, p)
			}
		}
	}
	problems, _ := importAliasProblems("x.go", []byte("package main\n\nimport (\n\t\"fmt\"\n\t\"os/exec\"\n)\n"), rules)
	if len(problems) != 1 || !strings.HasPrefix(problems[0], "x.go:5: ") {
		t.Errorf("line not named: %q", problems)
	}
}

// productionTooLong returns a problem when src, a production Go file, has
// more than maxProductionLines lines; test files and generated code are
// exempt.
func productionTooLong(path string, src []byte) (string, error) {
	if strings.HasSuffix(path, "_test.go") {
		return "", nil
	}
	f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		return "", err
	}
	if ast.IsGenerated(f) {
		return "", nil
	}
	n := 0
	for sc := bufio.NewScanner(bytes.NewReader(src)); sc.Scan(); {
		n++
	}
	if n > maxProductionLines {
		return fmt.Sprintf("%s: %d lines; a production Go file has at most %d (split it by job)", path, n, maxProductionLines), nil
	}
	return "", nil
}

func TestProductionFilesStayShort(t *testing.T) {
	for _, path := range moduleGoFiles(t) {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		p, err := productionTooLong(path, src)
		if err != nil {
			t.Fatal(err)
		}
		if p != "" {
			t.Error(p)
		}
	}
}

func TestFileSizeCheckerCatchesBreakage(t *testing.T) {
	body := func(lines int) []byte {
		return []byte("package p\n" + strings.Repeat("\n", lines-1))
	}
	generated := append([]byte("// Code generated by gen. DO NOT EDIT.\n\n"), body(maxProductionLines)...)
	for _, c := range []struct {
		path string
		src  []byte
		long bool
	}{
		{"p.go", body(maxProductionLines), false},
		{"p.go", body(maxProductionLines + 1), true},
		{"p_test.go", body(2 * maxProductionLines), false},
		{"p.go", generated, false},
	} {
		p, err := productionTooLong(c.path, c.src)
		if err != nil {
			t.Fatal(err)
		}
		if (p != "") != c.long {
			t.Errorf("%s, %d bytes: problem %q, want one: %v", c.path, len(c.src), p, c.long)
		}
	}
}
