package daytonaworker

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The repository stands alone: a plain clone builds, tests and explains
// itself. Nothing outside docs/ may point at documents that are not in the
// repository (the project's original spec folder next to it, its file
// names, or their section-sign numbers), and every docs/<file>.md#<anchor>
// cited must exist.

// forbiddenRefs are built from pieces so that this file does not match
// itself.
var forbiddenRefs = regexp.MustCompile(strings.Join([]string{
	`\.\./` + `shared`,
	`shared/` + `(spec|daytona-api|seeds)`,
	`plugin-` + `behavior\.md`,
	`daytona-` + `api\.md`,
	`proto` + `col\.md`,
	`DES` + `IGN\.md`,
	`sty` + `le\.md`,
	`seeds` + `/`,
	"\u00a7", // the section sign of the old spec citations
}, "|"))

var (
	reDocCite   = regexp.MustCompile(`docs/([A-Za-z0-9_.-]+\.md)(?:#([A-Za-z0-9_-]+))?`)
	reLocalLink = regexp.MustCompile(`\]\(([A-Za-z0-9_-]+\.md)?#([A-Za-z0-9_-]+)\)`)
	reHeading   = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	reNotSlug   = regexp.MustCompile(`[^a-z0-9 _-]`)
)

// slug is the anchor GitHub gives a heading: lower case, punctuation
// dropped, spaces turned into hyphens.
func slug(heading string) string {
	return strings.ReplaceAll(reNotSlug.ReplaceAllString(strings.ToLower(heading), ""), " ", "-")
}

// docAnchors returns the anchors of every docs/*.md file.
func docAnchors(t *testing.T) map[string]map[string]bool {
	t.Helper()
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = anchorsOf(string(b))
	}
	return out
}

func anchorsOf(md string) map[string]bool {
	a := map[string]bool{}
	for _, m := range reHeading.FindAllStringSubmatch(md, -1) {
		a[slug(m[1])] = true
	}
	return a
}

// citeProblems lists the references in content (of file path) that do not
// resolve: docs/X.md#anchor anywhere, and X.md#anchor or #anchor links
// inside docs/.
func citeProblems(path, content string, anchors map[string]map[string]bool) []string {
	var out []string
	check := func(doc, anchor string) {
		a, ok := anchors[doc]
		switch {
		case !ok:
			out = append(out, path+": cites docs/"+doc+", which does not exist")
		case anchor != "" && !a[anchor]:
			out = append(out, path+": cites docs/"+doc+"#"+anchor+", which has no such section")
		}
	}
	for _, m := range reDocCite.FindAllStringSubmatch(content, -1) {
		check(m[1], m[2])
	}
	if filepath.Dir(path) == "docs" {
		for _, m := range reLocalLink.FindAllStringSubmatch(content, -1) {
			doc := m[1]
			if doc == "" {
				doc = filepath.Base(path)
			}
			check(doc, m[2])
		}
	}
	return out
}

// repoFiles walks the working tree (not git, so a tarball works too) and
// returns the regular files, skipping VCS data, installed packages and
// build output.
func repoFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path == ".":
			case strings.HasPrefix(name, "."), name == "node_modules", name == "bin", name == "dist":
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			out = append(out, filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// repoTextFiles returns the text files of repoFiles with their contents.
func repoTextFiles(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, path := range repoFiles(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
			continue // binary
		}
		out[path] = string(b)
	}
	return out
}

func TestRepositoryCitesOnlyItsOwnDocs(t *testing.T) {
	files := repoTextFiles(t)
	if len(files) < 50 {
		t.Fatalf("only %d text files found: not run from the repository root?", len(files))
	}
	anchors := docAnchors(t)
	for _, need := range []string{"behavior.md", "daytona.md", "host.md"} {
		if len(anchors[need]) < 5 {
			t.Fatalf("docs/%s missing or without sections", need)
		}
	}
	var problems []string
	cited := 0
	for path, content := range files {
		if path == "standalone_test.go" {
			continue // its own examples of what it refuses
		}
		if !strings.HasPrefix(path, "docs/") {
			for i, line := range strings.Split(content, "\n") {
				if m := forbiddenRefs.FindString(line); m != "" {
					problems = append(problems, path+":"+strconv.Itoa(i+1)+": refers to a document outside the repository ("+m+")")
				}
			}
		}
		p := citeProblems(path, content, anchors)
		problems = append(problems, p...)
		cited += len(reDocCite.FindAllString(content, -1))
	}
	if cited < 100 {
		t.Errorf("only %d docs/ citations found; the scan is not seeing the code", cited)
	}
	slices.Sort(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// TestCitationCheckerCatchesBreakage keeps the checker itself honest.
func TestCitationCheckerCatchesBreakage(t *testing.T) {
	anchors := map[string]map[string]bool{"behavior.md": anchorsOf("# Title\n\n## Sync out dirs\n\n## Recover then stop\n")}
	if !anchors["behavior.md"]["sync-out-dirs"] || !anchors["behavior.md"]["recover-then-stop"] {
		t.Fatalf("anchors: %v", anchors)
	}
	good := "// see docs/behavior.md#sync-out-dirs and docs/behavior.md"
	if p := citeProblems("x.go", good, anchors); len(p) != 0 {
		t.Errorf("valid citations reported: %v", p)
	}
	for _, bad := range []string{"docs/behavior.md#sync-in", "docs/nosuch.md", "docs/nosuch.md#x"} {
		if p := citeProblems("x.go", "// "+bad, anchors); len(p) != 1 {
			t.Errorf("%q: problems %v", bad, p)
		}
	}
	if p := citeProblems("docs/behavior.md", "[a](#nope) [b](behavior.md#sync-out-dirs)", anchors); len(p) != 1 {
		t.Errorf("local links: %v", p)
	}
	for _, bad := range []string{
		"see ../" + "shared/spec/x", "plugin-" + "behavior.md", "daytona-" + "api.md", "proto" + "col.md",
		"DES" + "IGN.md", "sty" + "le.md", "seeds" + "/000.txt", "\u00a7" + "4.2",
	} {
		if !forbiddenRefs.MatchString(bad) {
			t.Errorf("%q not caught", bad)
		}
	}
	if forbiddenRefs.MatchString("docs/host.md#framing docs/daytona.md#ttl /path/to/daytona-api") {
		t.Error("our own docs caught as external")
	}
}
