package daytonatest

import (
	"reflect"
	"strings"
	"testing"

	"github.com/daytonaworker/daytona-worker/daytona/internal/openapifacts"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The emulator must serve only what Daytona serves: every route it
// implements exists in the OpenAPI documents with the same method, and the
// fields of its DTOs exist in the matching schemas. The facts of the
// documents are committed in daytona/testdata/openapi-facts.txt (generated,
// see daytona/generate.go).

const factsFile = "../testdata/openapi-facts.txt"

type spec struct {
	ops     map[string]bool            // "METHOD /path"
	schemas map[string]map[string]bool // schema -> properties (with allOf parents)
}

func readSpec(t *testing.T, name string) spec {
	t.Helper()
	facts, err := openapifacts.Load(factsFile)
	require.NoError(t, err)
	d := facts[name]
	require.NotNil(t, d, "%s has no document %q", factsFile, name)
	sp := spec{ops: map[string]bool{}, schemas: map[string]map[string]bool{}}
	for k := range d.Ops {
		sp.ops[k] = true
	}
	for sn := range d.Schemas {
		props, _ := d.Props(sn)
		sp.schemas[sn] = map[string]bool{}
		for p := range props {
			sp.schemas[sn][p] = true
		}
	}
	return sp
}

// proposedRoutes and proposedFields are the wall-clock lifetime of
// docs/behavior.md#ttl, which the v0.190.0 documents lack; the client
// keeps the same names in one place (daytona/routes.go).
var (
	proposedRoutes = map[string]bool{"POST /sandbox/{sandboxIdOrName}/ttl/{interval}": true}
	proposedFields = map[string]bool{"autoDestroyAt": true, "ttlMinutes": true}
)

func TestRoutesExistInOpenAPI(t *testing.T) {
	api := readSpec(t, "api")
	tb := readSpec(t, "toolbox")
	require.NotEmpty(t, api.ops)
	require.NotEmpty(t, tb.ops)
	// The reader sees what it should (and nothing else).
	require.True(t, api.ops["DELETE /sandbox/{sandboxIdOrName}"])
	require.True(t, tb.ops["GET /process/pty/{sessionId}/connect"])
	require.False(t, api.ops["GET /sandbox/{sandboxIdOrName}/start"])
	for _, rt := range routes {
		key := rt.method + " " + rt.tmpl
		switch {
		case rt.plane == planeToolbox:
			assert.True(t, tb.ops[key], "toolbox API has no %s", key)
		case proposedRoutes[key]:
			assert.False(t, api.ops[key], "%s is documented now: drop it from proposedRoutes", key)
		default:
			assert.True(t, api.ops[key], "main API has no %s", key)
		}
	}
}

func jsonFields(v any) []string {
	var out []string
	rt := reflect.TypeOf(v)
	for i := 0; i < rt.NumField(); i++ {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

func TestDTOFieldsExistInSchemas(t *testing.T) {
	api := readSpec(t, "api")
	tb := readSpec(t, "toolbox")
	full := api.schemas["Sandbox"]
	item := api.schemas["SandboxListItem"]
	require.NotEmpty(t, full)
	require.NotEmpty(t, item)
	require.False(t, item["env"])
	listOnly := map[string]bool{"env": true, "networkBlockAll": true, "networkAllowList": true, "domainAllowList": true,
		"volumes": true, "buildInfo": true}
	for _, f := range jsonFields(sandboxListItem{}) {
		if proposedFields[f] {
			continue
		}
		assert.True(t, full[f], "Sandbox has no field %q", f)
		assert.False(t, listOnly[f], "%q belongs to the full DTO only", f)
		assert.True(t, item[f], "SandboxListItem has no field %q", f)
	}
	for _, f := range jsonFields(sandboxDTO{}) {
		assert.True(t, full[f], "Sandbox has no field %q", f)
		assert.True(t, listOnly[f], "%q is not a list-item field", f)
	}
	for _, f := range jsonFields(createReq{}) {
		if proposedFields[f] {
			continue
		}
		assert.True(t, api.schemas["CreateSandbox"][f], "CreateSandbox has no field %q", f)
	}
	for _, f := range jsonFields(fileInfo{}) {
		assert.True(t, tb.schemas["FileInfo"][f], "FileInfo has no field %q", f)
	}
	for _, f := range jsonFields(buildInfo{}) {
		assert.True(t, api.schemas["BuildInfo"][f], "BuildInfo has no field %q", f)
	}
}
