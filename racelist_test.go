package daytonaworker

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// raceSkippers returns the top-level tests of a _test.go source that
// consult raceEnabled: the tests that skip themselves under the race
// detector.
func raceSkippers(path string, src []byte) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, src, 0)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && id.Name == "raceEnabled" && !slices.Contains(names, fn.Name.Name) {
				names = append(names, fn.Name.Name)
			}
			return true
		})
	}
	return names, nil
}

// noraceList is the norace_tests array of scripts/test.sh.
var noraceList = regexp.MustCompile(`(?m)^norace_tests=\(([^)]*)\)`)

// A test that skips itself under the race detector runs in make test's
// stage without it only if scripts/test.sh lists it; the CI runs only
// with -race otherwise, so an unlisted one would never run at all.
func TestRaceSkippedTestsRunWithoutRace(t *testing.T) {
	script, err := os.ReadFile("scripts/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := noraceList.FindSubmatch(script)
	if m == nil {
		t.Fatal("scripts/test.sh has no norace_tests=(...) line")
	}
	listed := strings.Fields(string(m[1]))
	var found []string
	for _, path := range moduleGoFiles(t) {
		if !strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		names, err := raceSkippers(path, src)
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, names...)
	}
	if len(found) == 0 {
		t.Fatal("no test consults raceEnabled: is the checker broken?")
	}
	slices.Sort(found)
	slices.Sort(listed)
	if !slices.Equal(found, listed) {
		t.Errorf("tests that skip under -race: %v; scripts/test.sh norace_tests: %v (they must be the same)", found, listed)
	}
}

func TestRaceSkipperCheckerCatchesBreakage(t *testing.T) {
	src := []byte(`package p
func TestA(t *testing.T) { if raceEnabled { t.Skip() } }
func TestB(t *testing.T) {}
func helper() bool { return raceEnabled }
`)
	got, err := raceSkippers("p_test.go", src)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"TestA"}) {
		t.Fatalf("got %v, want [TestA]", got)
	}
}
