package main

import (
	"testing"

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
