// Command dropcond is mutation testing for dropped conditions, the kind
// of change gremlins (make mutate) does not make: it replaces each && or
// || of a package's non-test files by one of its operands, one at a time,
// runs the package's tests against each, and prints the survivors
// (docs/testing.md#dropped-conditions-make-dropcond; run by make dropcond).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	osexec "os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// mutant is one dropped operand of one condition.
type mutant struct {
	line int
	desc string // e.g. "drop right of a && b"
	src  []byte // the whole file with the condition replaced
}

// mutants lists the dropped-operand mutants of one file's source: for
// each && or || expression, the expression replaced by its left operand
// and by its right one (parenthesised, so precedence is kept). keep, when
// not nil, selects the lines to mutate.
func mutants(name string, src []byte, keep func(line int) bool) ([]mutant, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return nil, err
	}
	var out []mutant
	ast.Inspect(f, func(n ast.Node) bool {
		be, ok := n.(*ast.BinaryExpr)
		if !ok || (be.Op != token.LAND && be.Op != token.LOR) {
			return true
		}
		line := fset.Position(be.Pos()).Line
		if keep != nil && !keep(line) {
			return true
		}
		start, end := fset.Position(be.Pos()).Offset, fset.Position(be.End()).Offset
		whole := oneLine(string(src[start:end]))
		for _, side := range []struct {
			kept    ast.Expr
			dropped string
		}{{be.X, "right"}, {be.Y, "left"}} {
			ks, ke := fset.Position(side.kept.Pos()).Offset, fset.Position(side.kept.End()).Offset
			var b bytes.Buffer
			b.Write(src[:start])
			b.WriteString("(" + string(src[ks:ke]) + ")")
			b.Write(src[end:])
			out = append(out, mutant{line: line, desc: "drop " + side.dropped + " of " + whole, src: b.Bytes()})
		}
		return true
	})
	return out, nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return s
}

// hunkHeader is a unified diff's hunk header: the new side's first line
// and count.
var hunkHeader = regexp.MustCompile(`^@@ -\S+ \+(\d+)(?:,(\d+))? @@`)

// changedLines parses `git diff -U0` output into the changed lines of the
// new side.
func changedLines(diff []byte) map[int]bool {
	lines := map[int]bool{}
	for _, l := range strings.Split(string(diff), "\n") {
		m := hunkHeader.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		from, _ := strconv.Atoi(m[1])
		n := 1
		if m[2] != "" {
			n, _ = strconv.Atoi(m[2])
		}
		for i := range n {
			lines[from+i] = true
		}
	}
	return lines
}

// main: dropcond [-base REV] [-budget 20m] [-cover] DIR... With -base only
// the conditions on lines changed since REV are mutated; with -cover each
// mutant runs only the tests that execute its line (see coverage). Each source file is
// restored after every mutant, and on an interrupt or a SIGTERM.
func main() {
	base := flag.String("base", "", "mutate only the lines changed since this revision")
	budget := flag.Duration("budget", 20*time.Minute, "wall-clock bound of the whole run")
	cover := flag.Bool("cover", false, "run only the tests that execute a mutant's line (collected first, one test at a time)")
	which := flag.Bool("which", false, "mutate nothing: print the -run pattern of the tests that execute each FILE:LINE argument")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: dropcond [-base REV] [-budget 20m] [-cover] DIR... | dropcond -which FILE:LINE...")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *budget)
	defer cancel()
	if *which {
		if err := printWhich(ctx, os.Stdout, flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, "dropcond:", err)
			os.Exit(1)
		}
		return
	}
	var killed, lived, skipped int
	for _, dir := range flag.Args() {
		var test tester
		if *cover {
			c, err := collectCoverage(ctx, dir)
			if err != nil {
				fmt.Fprintln(os.Stderr, "dropcond:", err)
				os.Exit(1)
			}
			test = func(file string, line int) (string, bool, error) {
				tests := c.testsFor(file, line)
				if len(tests) == 0 {
					return "", false, nil
				}
				out, err := goTest(ctx, dir, tests, c.limit(tests))
				return out, true, err
			}
		} else {
			// The tests must pass unmutated; their time sets each
			// mutant's limit (3×, at least 30 s), so a mutant that
			// makes a test hang costs that, not the test binary's own
			// timeout.
			start := time.Now()
			if out, err := goTest(ctx, dir, nil, 10*time.Minute); err != nil {
				fmt.Fprintf(os.Stderr, "dropcond: the tests of %s fail without any mutant:\n%s\n", dir, out)
				os.Exit(1)
			}
			limit := max(3*time.Since(start), 30*time.Second)
			test = func(string, int) (string, bool, error) {
				out, err := goTest(ctx, dir, nil, limit)
				return out, true, err
			}
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			k, l, s, err := runFile(ctx, f, *base, test)
			killed, lived, skipped = killed+k, lived+l, skipped+s
			if err != nil {
				fmt.Fprintln(os.Stderr, "dropcond:", err)
				os.Exit(1)
			}
		}
	}
	fmt.Printf("== dropcond: %d killed, %d lived", killed, lived)
	if killed+lived > 0 {
		fmt.Printf(": %d%%", 100*killed/(killed+lived))
	}
	if skipped > 0 {
		fmt.Printf("; %d not tried (budget or interrupt)", skipped)
	}
	fmt.Println()
}

// goTest runs the tests of the package in dir, failing fast, within
// limit: only the named ones when tests is not empty, else all of them.
func goTest(ctx context.Context, dir string, tests []string, limit time.Duration) (string, error) {
	args := []string{"test", "-count=1", "-failfast", "-timeout", limit.String()}
	if len(tests) > 0 {
		args = append(args, "-run", runPattern(tests))
	}
	cmd := osexec.CommandContext(ctx, "go", append(args, "./"+filepath.ToSlash(dir))...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// tester runs the tests that judge a mutant at line of file; ran is
// false when no test executes that line.
type tester func(file string, line int) (out string, ran bool, err error)

// runFile tests every mutant of one file and restores it.
func runFile(ctx context.Context, file, base string, test tester) (killed, lived, skipped int, err error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, 0, err
	}
	var keep func(int) bool
	if base != "" {
		diff, err := osexec.Command("git", "diff", "-U0", base, "--", file).Output()
		if err != nil {
			return 0, 0, 0, fmt.Errorf("git diff %s -- %s: %w", base, file, err)
		}
		changed := changedLines(diff)
		keep = func(line int) bool { return changed[line] }
	}
	ms, err := mutants(file, src, keep)
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() {
		if werr := os.WriteFile(file, src, 0o644); werr != nil && err == nil {
			err = werr
		}
	}()
	for _, m := range ms {
		if ctx.Err() != nil {
			skipped++
			continue
		}
		if err := os.WriteFile(file, m.src, 0o644); err != nil {
			return killed, lived, skipped, err
		}
		start := time.Now()
		out, ran, runErr := test(file, m.line)
		verdict := "KILLED"
		var exit *osexec.ExitError
		switch {
		case ctx.Err() != nil:
			skipped++
			continue
		case !ran:
			verdict = "NOT COVERED" // no test runs the line: it lives
			lived++
		case runErr == nil:
			verdict = "LIVED"
			lived++
		case !errors.As(runErr, &exit):
			return killed, lived, skipped, runErr
		case strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]"):
			verdict = "NOT VIABLE" // e.g. a variable left unused
		case strings.Contains(out, "panic: test timed out"):
			verdict = "TIMED OUT" // counted as killed, as gremlins does
			killed++
		default:
			killed++
		}
		fmt.Printf("%10s %s:%d %s (%.0fs)\n", verdict, file, m.line, m.desc, time.Since(start).Seconds())
	}
	return killed, lived, skipped, nil
}
