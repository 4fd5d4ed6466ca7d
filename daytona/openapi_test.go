package daytona

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
)

// This file holds a minimal, purpose-built reader for the two OpenAPI
// documents in ../shared/daytona-api (go.mod has no YAML library). It
// understands exactly the subset those files use: block mappings by
// indentation, "- " list items, quoted keys, and |/> block scalars (skipped).
// It extracts, per operation, the query parameters and the component
// schemas referenced by the request body and the 2xx responses; per schema,
// its property names and the schema each property refers to.

// apiSpec is what the fidelity test needs from one document.
type apiSpec struct {
	ops     map[string]*apiOp            // "METHOD /path"
	schemas map[string]map[string]string // schema -> property -> referenced schema ("" if none)
	parents map[string][]string          // schema -> allOf parents
}

type apiOp struct {
	query    map[string]bool
	reqRefs  map[string]bool
	respRefs map[string]bool
}

var (
	reKeyLine = regexp.MustCompile(`^(\s*)(- )?("[^"]*"|'[^']*'|[^\s:"'#-][^:]*?|-[^\s:][^:]*?):(?:\s+(.*))?$`)
	reRef     = regexp.MustCompile(`^["']?#/components/schemas/([^"']+)["']?$`)
)

type frame struct {
	indent int
	key    string
}

// readSpec parses one OpenAPI YAML file.
func readSpec(t *testing.T, path string) *apiSpec {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer fh.Close()
	sp := &apiSpec{ops: map[string]*apiOp{}, schemas: map[string]map[string]string{}, parents: map[string][]string{}}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var stack []frame
	blockIndent := -1 // inside a |/> block scalar deeper than this
	// The current list item of a parameters list: its in/name.
	var paramIn, paramName string
	var paramOp *apiOp
	flushParam := func() {
		if paramOp != nil && paramIn == "query" && paramName != "" {
			paramOp.query[paramName] = true
		}
		paramIn, paramName, paramOp = "", "", nil
	}
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if blockIndent >= 0 {
			if indent > blockIndent {
				continue
			}
			blockIndent = -1
		}
		m := reKeyLine.FindStringSubmatch(line)
		if m == nil {
			continue // list scalar ("- foo") or a continuation line
		}
		keyIndent := indent
		if m[2] != "" {
			keyIndent = indent + 2 // "- key:" opens a mapping at indent+2
		}
		key := strings.Trim(m[3], `"'`)
		val := strings.TrimSpace(m[4])
		for len(stack) > 0 && stack[len(stack)-1].indent >= keyIndent {
			stack = stack[:len(stack)-1]
		}
		path := make([]string, len(stack))
		for i, f := range stack {
			path[i] = f.key
		}
		if val == "|" || val == "|-" || val == ">" || val == ">-" {
			blockIndent = keyIndent
		}
		sp.visit(path, key, val, m[2] != "", &paramIn, &paramName, &paramOp, flushParam)
		if val == "" {
			stack = append(stack, frame{indent: keyIndent, key: key})
		}
	}
	flushParam()
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return sp
}

var httpMethods = map[string]bool{"get": true, "post": true, "put": true, "delete": true, "patch": true, "head": true, "options": true}

func (sp *apiSpec) op(path []string) *apiOp {
	if len(path) < 3 || path[0] != "paths" || !httpMethods[path[2]] {
		return nil
	}
	k := strings.ToUpper(path[2]) + " " + path[1]
	o := sp.ops[k]
	if o == nil {
		o = &apiOp{query: map[string]bool{}, reqRefs: map[string]bool{}, respRefs: map[string]bool{}}
		sp.ops[k] = o
	}
	return o
}

func (sp *apiSpec) visit(path []string, key, val string, listItem bool, paramIn, paramName *string, paramOp **apiOp, flush func()) {
	switch {
	case len(path) == 2 && path[0] == "paths" && httpMethods[key]:
		sp.op(append(path, key))
	case len(path) >= 3 && path[0] == "paths":
		o := sp.op(path)
		if o == nil {
			return
		}
		if len(path) == 4 && path[3] == "parameters" {
			if listItem {
				flush()
				*paramOp = o
			}
			switch key {
			case "in":
				*paramIn = val
			case "name":
				*paramName = val
			}
		}
		if key == "$ref" {
			if rm := reRef.FindStringSubmatch(val); rm != nil {
				if len(path) > 3 && path[3] == "requestBody" {
					o.reqRefs[rm[1]] = true
				}
				if len(path) > 4 && path[3] == "responses" && strings.HasPrefix(path[4], "2") {
					o.respRefs[rm[1]] = true
				}
			}
		}
	case len(path) == 2 && path[0] == "components" && path[1] == "schemas":
		if sp.schemas[key] == nil {
			sp.schemas[key] = map[string]string{}
		}
	case len(path) == 4 && path[0] == "components" && path[1] == "schemas" && path[3] == "properties":
		sp.schemas[path[2]][key] = ""
	case len(path) >= 5 && path[0] == "components" && path[1] == "schemas" && path[3] == "properties" && key == "$ref":
		if rm := reRef.FindStringSubmatch(val); rm != nil && sp.schemas[path[2]][path[4]] == "" {
			sp.schemas[path[2]][path[4]] = rm[1]
		}
	case len(path) == 4 && path[0] == "components" && path[1] == "schemas" && path[3] == "allOf" && key == "$ref":
		if rm := reRef.FindStringSubmatch(val); rm != nil {
			sp.parents[path[2]] = append(sp.parents[path[2]], rm[1])
		}
	}
}

// props returns a schema's properties including allOf parents.
func (sp *apiSpec) props(schema string) (map[string]string, bool) {
	p, ok := sp.schemas[schema]
	if !ok {
		return nil, false
	}
	out := map[string]string{}
	for k, v := range p {
		out[k] = v
	}
	for _, parent := range sp.parents[schema] {
		pp, _ := sp.props(parent)
		for k, v := range pp {
			out[k] = v
		}
	}
	return out, true
}

// TestSpecReader pins the reader on known facts of the documents, so a
// reader bug cannot make the fidelity test pass vacuously.
func TestSpecReader(t *testing.T) {
	t.Parallel()
	api := readSpec(t, specPath("api.openapi.yaml"))
	tb := readSpec(t, specPath("toolbox.openapi.yaml"))

	o := api.ops["POST /sandbox"]
	if o == nil || !o.reqRefs["CreateSandbox"] || !o.respRefs["Sandbox"] {
		t.Fatalf("POST /sandbox not read correctly: %+v", o)
	}
	if o := api.ops["GET /sandbox"]; o == nil || !o.query["labels"] || !o.query["cursor"] || o.query["X-Daytona-Organization-ID"] || !o.respRefs["ListSandboxesResponse"] {
		t.Fatalf("GET /sandbox not read correctly: %+v", o)
	}
	if _, ok := api.ops["DELETE /sandbox/{sandboxIdOrName}"]; !ok {
		t.Fatal("DELETE /sandbox/{sandboxIdOrName} missing")
	}
	if _, ok := api.ops["PATCH /sandbox/{sandboxIdOrName}"]; ok {
		t.Fatal("invented operation")
	}
	p, _ := api.props("Sandbox")
	for _, f := range []string{"id", "toolboxProxyUrl", "autoDeleteInterval", "errorReason", "buildInfo"} {
		if _, ok := p[f]; !ok {
			t.Errorf("Sandbox.%s missing", f)
		}
	}
	if _, ok := p["description"]; ok {
		t.Error("a nested key leaked into Sandbox properties")
	}
	if c, _ := api.props("CreateSandbox"); c["buildInfo"] != "CreateBuildInfo" {
		t.Errorf("CreateSandbox.buildInfo refers to %q", c["buildInfo"])
	}
	if l, _ := api.props("ListSandboxesResponse"); l["items"] != "SandboxListItem" {
		t.Errorf("ListSandboxesResponse.items refers to %q", l["items"])
	}
	if o := tb.ops["POST /process/session/{sessionId}/exec"]; o == nil || !o.reqRefs["SessionExecuteRequest"] || !o.respRefs["SessionExecuteResponse"] {
		t.Fatalf("session exec not read correctly: %+v", o)
	}
	if o := tb.ops["DELETE /files"]; o == nil || !o.query["recursive"] || !o.query["path"] {
		t.Fatalf("DELETE /files not read correctly: %+v", o)
	}
	fi, _ := tb.props("FileInfo")
	if _, ok := fi["permissions"]; !ok || len(fi) != 9 {
		t.Errorf("FileInfo properties: %v", fi)
	}
	if n := len(api.ops); n < 150 {
		t.Errorf("only %d API operations read", n)
	}
	if n := len(tb.ops); n < 80 {
		t.Errorf("only %d toolbox operations read", n)
	}
}

func specPath(name string) string { return "../../shared/daytona-api/" + name }
