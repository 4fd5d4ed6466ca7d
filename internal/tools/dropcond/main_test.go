package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Each && and || gives two mutants, one per dropped operand, nested ones
// included, parenthesised; other operators and other lines give none.
func TestMutantsDropEachOperand(t *testing.T) {
	src := []byte("package p\n\nfunc f(a, b, c bool, n int) bool {\n\tif n > 1 {\n\t\treturn a && b || c\n\t}\n\treturn a\n}\n")
	ms, err := mutants("p.go", src, nil)
	require.NoError(t, err)
	var got []string
	for _, m := range ms {
		require.Equal(t, 5, m.line)
		got = append(got, m.desc+" => "+string(m.src[len("package p\n\nfunc f(a, b, c bool, n int) bool {\n\tif n > 1 {\n\t\treturn "):len(m.src)-len("\n\t}\n\treturn a\n}\n")]))
	}
	require.Equal(t, []string{
		"drop right of a && b || c => (a && b)",
		"drop left of a && b || c => (c)",
		"drop right of a && b => (a) || c",
		"drop left of a && b => (b) || c",
	}, got)

	ms, err = mutants("p.go", src, func(line int) bool { return line == 4 })
	require.NoError(t, err)
	require.Empty(t, ms, "only the selected lines")
	_, err = mutants("p.go", []byte("package"), nil)
	require.Error(t, err)
}

// The new side's changed lines of a -U0 diff: a count of 0 is a pure
// deletion, an absent count is one line.
func TestChangedLines(t *testing.T) {
	diff := "diff --git a/x.go b/x.go\n@@ -3 +3 @@\n-a\n+b\n@@ -10,0 +11,2 @@\n+c\n+d\n@@ -20,2 +21,0 @@\n-e\n-f\n"
	require.Equal(t, map[int]bool{3: true, 11: true, 12: true}, changedLines([]byte(diff)))
}

// A coverage profile's blocks that ran give their lines to the test, by
// file base name, each test once a line; blocks that did not run give
// nothing, and a line the profile cannot read is an error.
func TestCoverageSelectsTheTestsThatRunALine(t *testing.T) {
	c := &coverage{compile: 5 * time.Second, took: map[string]time.Duration{"TestA": time.Second, "TestB": 20 * time.Second}, lines: map[string]map[int][]string{}}
	require.NoError(t, c.add("TestA", strings.NewReader("mode: set\nexample.com/m/p/a.go:3.10,5.2 2 1\nexample.com/m/p/a.go:4.3,4.9 1 1\nexample.com/m/p/b.go:7.1,7.20 1 0\n")))
	require.NoError(t, c.add("TestB", strings.NewReader("mode: set\nexample.com/m/p/a.go:5.1,6.2 1 1\nexample.com/m/p/b.go:7.1,7.20 1 1\n")))
	require.Equal(t, []string{"TestA"}, c.testsFor("p/a.go", 3))
	require.Equal(t, []string{"TestA"}, c.testsFor("a.go", 4), "one entry although two blocks ran the line")
	require.Equal(t, []string{"TestA", "TestB"}, c.testsFor("p/a.go", 5))
	require.Equal(t, []string{"TestB"}, c.testsFor("p/a.go", 6))
	require.Equal(t, []string{"TestB"}, c.testsFor("p/b.go", 7), "TestA's block did not run")
	require.Empty(t, c.testsFor("p/a.go", 2))
	require.Empty(t, c.testsFor("p/c.go", 3))
	require.Error(t, c.add("TestC", strings.NewReader("mode: set\nexample.com/m/p/a.go:3.10,5.2 2\n")))

	require.Equal(t, 30*time.Second, c.limit([]string{"TestA"}), "at least 30 s")
	require.Equal(t, 3*26*time.Second, c.limit([]string{"TestA", "TestB"}))
}

// The -run pattern selects exactly the named top-level tests.
func TestRunPatternSelectsExactlyTheTests(t *testing.T) {
	re := regexp.MustCompile(runPattern([]string{"TestA", "TestAB_c"}))
	require.True(t, re.MatchString("TestA"))
	require.True(t, re.MatchString("TestAB_c"))
	require.False(t, re.MatchString("TestAB"))
	require.False(t, re.MatchString("TestAX"))
	require.False(t, re.MatchString("XTestA"))
}

// go test -list prints the tests, fuzz targets and examples, then ok.
func TestListedTests(t *testing.T) {
	out := "TestA\nFuzzB\nExampleC\nok  \texample.com/m/p\t0.01s\n"
	require.Equal(t, []string{"TestA", "FuzzB", "ExampleC"}, listedTests([]byte(out)))
}
