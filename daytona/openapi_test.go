package daytona

import (
	"sync"
	"testing"

	"github.com/daytonaworker/daytona-worker/daytona/internal/openapifacts"
)

// The fidelity tests read the facts of the Daytona OpenAPI documents from
// testdata/openapi-facts.txt, which `go generate` derives from the
// documents (see generate.go); the documents themselves are not part of the
// repository.

const factsFile = "testdata/openapi-facts.txt"

var (
	factsOnce sync.Once
	facts     openapifacts.Facts
	factsErr  error
)

// readSpec returns the facts of one document ("api" or "toolbox").
func readSpec(t *testing.T, doc string) *openapifacts.Doc {
	t.Helper()
	factsOnce.Do(func() { facts, factsErr = openapifacts.Load(factsFile) })
	if factsErr != nil {
		t.Fatalf("read %s: %v", factsFile, factsErr)
	}
	d := facts[doc]
	if d == nil {
		t.Fatalf("%s has no document %q", factsFile, doc)
	}
	return d
}

// TestOpenAPIFacts pins the committed facts on known facts of the
// documents, so a generator bug or a damaged facts file cannot make the
// fidelity test pass vacuously.
func TestOpenAPIFacts(t *testing.T) {
	t.Parallel()
	api := readSpec(t, "api")
	tb := readSpec(t, "toolbox")

	o := api.Ops["POST /sandbox"]
	if o == nil || !o.Req["CreateSandbox"] || !o.Resp["Sandbox"] {
		t.Fatalf("POST /sandbox not read correctly: %+v", o)
	}
	if o := api.Ops["GET /sandbox"]; o == nil || !o.Query["labels"] || !o.Query["cursor"] || o.Query["X-Daytona-Organization-ID"] || !o.Resp["ListSandboxesResponse"] {
		t.Fatalf("GET /sandbox not read correctly: %+v", o)
	}
	if _, ok := api.Ops["DELETE /sandbox/{sandboxIdOrName}"]; !ok {
		t.Fatal("DELETE /sandbox/{sandboxIdOrName} missing")
	}
	if _, ok := api.Ops["PATCH /sandbox/{sandboxIdOrName}"]; ok {
		t.Fatal("invented operation")
	}
	p, _ := api.Props("Sandbox")
	for _, f := range []string{"id", "toolboxProxyUrl", "autoDeleteInterval", "errorReason", "buildInfo"} {
		if _, ok := p[f]; !ok {
			t.Errorf("Sandbox.%s missing", f)
		}
	}
	if _, ok := p["description"]; ok {
		t.Error("a nested key leaked into Sandbox properties")
	}
	if c, _ := api.Props("CreateSandbox"); c["buildInfo"] != "#CreateBuildInfo" {
		t.Errorf("CreateSandbox.buildInfo refers to %q", c["buildInfo"])
	}
	if l, _ := api.Props("ListSandboxesResponse"); l["items"] != "[]#SandboxListItem" {
		t.Errorf("ListSandboxesResponse.items refers to %q", l["items"])
	}
	if o := tb.Ops["POST /process/session/{sessionId}/exec"]; o == nil || !o.Req["SessionExecuteRequest"] || !o.Resp["SessionExecuteResponse"] {
		t.Fatalf("session exec not read correctly: %+v", o)
	}
	if o := tb.Ops["DELETE /files"]; o == nil || !o.Query["recursive"] || !o.Query["path"] {
		t.Fatalf("DELETE /files not read correctly: %+v", o)
	}
	fi, _ := tb.Props("FileInfo")
	if _, ok := fi["permissions"]; !ok || len(fi) != 9 {
		t.Errorf("FileInfo properties: %v", fi)
	}
	if n := len(api.Ops); n < 150 {
		t.Errorf("only %d API operations read", n)
	}
	if n := len(tb.Ops); n < 80 {
		t.Errorf("only %d toolbox operations read", n)
	}
}
