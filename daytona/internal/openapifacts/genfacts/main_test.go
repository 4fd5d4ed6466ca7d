package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const committed = "../../../testdata/openapi-facts.txt"

// TestCommittedFactsAreFresh regenerates the facts when the documents are
// given (DAYTONA_OPENAPI_DIR) and requires the committed file to match.
func TestCommittedFactsAreFresh(t *testing.T) {
	dir := os.Getenv("DAYTONA_OPENAPI_DIR")
	if dir == "" {
		t.Skip("DAYTONA_OPENAPI_DIR not set: nothing to compare the committed facts with")
	}
	out := filepath.Join(t.TempDir(), "facts.txt")
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-openapi", dir, "-out", out}, &stdout, &stderr); err != nil {
		t.Fatal(err, stderr.String())
	}
	got, _ := os.ReadFile(out)
	want, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run DAYTONA_OPENAPI_DIR=%s go generate ./daytona", committed, dir)
	}
}

func TestWithoutDocumentsKeepsTheFile(t *testing.T) {
	t.Setenv("DAYTONA_OPENAPI_DIR", "")
	out := filepath.Join(t.TempDir(), "facts.txt")
	if err := os.WriteFile(out, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-out", out}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); string(b) != "keep\n" || !strings.Contains(stdout.String(), "no OpenAPI directory") {
		t.Fatalf("file %q, stdout %q", b, stdout.String())
	}
}

func TestBadInvocations(t *testing.T) {
	out := filepath.Join(t.TempDir(), "facts.txt")
	for _, args := range [][]string{
		{"-openapi", t.TempDir(), "-out", out}, // no documents there
		{"-out", out, "extra"},
		{"-nosuchflag"},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(args, &stdout, &stderr); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed run wrote %s", out)
	}
}
