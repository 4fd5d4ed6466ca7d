package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// coverage says which of a package's top-level tests run each line of
// its source, so a mutant runs only the tests that can see it (-cover).
// A test that never executes a line cannot tell a mutant of it from the
// original. A mutant then costs the build plus its line's tests, not the
// whole package: measured at load 10-12, 10-25 s in daytona/, 60-75 s in
// provider/ and about 200 s in sync/, whose lines most tests run
// (docs/testing.md). It is collected once, unmutated, one test per
// process, so each profile is that test's alone.
type coverage struct {
	compile time.Duration            // building the test binary once
	took    map[string]time.Duration // each test's own run
	lines   map[string]map[int][]string
}

// testsFor returns the tests that execute line of file (a path or a base
// name), sorted.
func (c *coverage) testsFor(file string, line int) []string {
	return c.lines[filepath.Base(file)][line]
}

// limit is a mutant's time bound when it runs tests: three times what
// building the binary and running them took unmutated, at least 30 s.
func (c *coverage) limit(tests []string) time.Duration {
	d := c.compile
	for _, t := range tests {
		d += c.took[t]
	}
	return max(3*d, 30*time.Second)
}

// runPattern is the -run pattern that selects exactly tests.
func runPattern(tests []string) string {
	q := make([]string, len(tests))
	for i, t := range tests {
		q[i] = regexp.QuoteMeta(t)
	}
	return "^(" + strings.Join(q, "|") + ")$"
}

// collectCoverage lists the package's top-level tests, builds its test
// binary with coverage once and runs each test alone under it.
func collectCoverage(ctx context.Context, dir string) (*coverage, error) {
	pkg := "./" + filepath.ToSlash(dir)
	out, err := osexec.CommandContext(ctx, "go", "test", "-list", ".", pkg).Output()
	if err != nil {
		return nil, fmt.Errorf("go test -list %s: %w", pkg, err)
	}
	tests := listedTests(out)
	tmp, err := os.MkdirTemp("", "dropcond-cover-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "pkg.test")
	start := time.Now()
	if out, err := osexec.CommandContext(ctx, "go", "test", "-c", "-cover", "-covermode=set", "-o", bin, pkg).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go test -c %s: %w\n%s", pkg, err, out)
	}
	c := &coverage{compile: time.Since(start), took: map[string]time.Duration{}, lines: map[string]map[int][]string{}}
	for _, t := range tests {
		prof := filepath.Join(tmp, "cover.out")
		cmd := osexec.CommandContext(ctx, bin, "-test.run", runPattern([]string{t}), "-test.count=1",
			"-test.timeout=10m", "-test.coverprofile="+prof)
		cmd.Dir = dir // tests read testdata relative to their package
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s of %s fails without any mutant: %w\n%s", t, pkg, err, out)
		}
		c.took[t] = time.Since(start)
		f, err := os.Open(prof)
		if err != nil {
			return nil, err
		}
		err = c.add(t, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t, err)
		}
	}
	for _, byLine := range c.lines {
		for _, ts := range byLine {
			sort.Strings(ts)
		}
	}
	return c, nil
}

// listedTests picks the test, fuzz and example names out of go test
// -list output (which ends with an "ok" line).
func listedTests(out []byte) []string {
	var tests []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Test") || strings.HasPrefix(l, "Fuzz") || strings.HasPrefix(l, "Example") {
			tests = append(tests, strings.TrimSpace(l))
		}
	}
	return tests
}

// profileBlock is one block of a coverage profile: "import/path/file.go:
// startLine.col,endLine.col statements count".
var profileBlock = regexp.MustCompile(`^(.+):(\d+)\.\d+,(\d+)\.\d+ \d+ (\d+)$`)

// add records the lines of one test's coverage profile that ran. Files
// are keyed by base name (one package is one directory).
func (c *coverage) add(test string, profile io.Reader) error {
	sc := bufio.NewScanner(profile)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "mode:") || l == "" {
			continue
		}
		m := profileBlock.FindStringSubmatch(l)
		if m == nil {
			return fmt.Errorf("coverage profile line %q", l)
		}
		if m[4] == "0" {
			continue
		}
		from, _ := strconv.Atoi(m[2])
		to, _ := strconv.Atoi(m[3])
		file := path.Base(m[1])
		if c.lines[file] == nil {
			c.lines[file] = map[int][]string{}
		}
		for n := from; n <= to; n++ {
			if ts := c.lines[file][n]; len(ts) == 0 || ts[len(ts)-1] != test {
				c.lines[file][n] = append(ts, test)
			}
		}
	}
	return sc.Err()
}

// printWhich prints, for each FILE:LINE, the line and the -run pattern of
// the tests that execute it ("-" when none does), collecting each
// package's coverage once. A hand-planted bug's verdict can then come
// from those tests alone, and a whole-package run only for the bugs that
// pass them (docs/testing.md).
func printWhich(ctx context.Context, w io.Writer, args []string) error {
	byDir := map[string]*coverage{}
	for _, a := range args {
		file, ln, ok := strings.Cut(a, ":")
		line, err := strconv.Atoi(ln)
		if !ok || err != nil {
			return fmt.Errorf("%q is not FILE:LINE", a)
		}
		dir := filepath.Dir(file)
		c := byDir[dir]
		if c == nil {
			if c, err = collectCoverage(ctx, dir); err != nil {
				return err
			}
			byDir[dir] = c
		}
		pattern := "-"
		if tests := c.testsFor(file, line); len(tests) > 0 {
			pattern = runPattern(tests)
		}
		fmt.Fprintf(w, "%s %s\n", a, pattern)
	}
	return nil
}
