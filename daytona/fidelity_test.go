package daytona

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// unconfirmedFields are JSON fields the client sends or reads that are not
// in the v0.190.0 documents, each with its reason. Nothing else may be
// missing from the schemas.
var unconfirmedFields = map[string]string{
	"CreateSandbox.ttlMinutes":      "plugin-behavior.md §13.12: proposed create field for the seed-only ttlMinutes",
	"Sandbox.autoDestroyAt":         "daytona-api.md §11.1: destroy deadline read by the TS plugin, newer than v0.190.0",
	"SandboxListItem.autoDestroyAt": "same Go type as Sandbox; see Sandbox.autoDestroyAt",
}

// TestFidelityRoutes proves that every route in the client's table exists
// in the OpenAPI document of its API with the same method, that the query
// parameters it may send are declared there, and that the request and
// response schemas it (de)serialises are the ones the operation uses.
func TestFidelityRoutes(t *testing.T) {
	t.Parallel()
	specs := map[apiKind]*apiSpec{
		mainAPI:    readSpec(t, specPath("api.openapi.yaml")),
		toolboxAPI: readSpec(t, specPath("toolbox.openapi.yaml")),
	}
	if len(allRoutes) < 30 {
		t.Fatalf("route table has only %d routes", len(allRoutes))
	}
	for _, rt := range allRoutes {
		sp := specs[rt.api]
		op, ok := sp.ops[rt.method+" "+rt.tmpl]
		if rt.unconfirmed {
			if ok {
				t.Errorf("%s (%s) is marked unconfirmed but is in the document now: drop the mark", rt, rt.name)
			}
			continue
		}
		if !ok {
			t.Errorf("%s (%s): no such operation in the OpenAPI document", rt, rt.name)
			continue
		}
		for _, q := range rt.query {
			if !op.query[q] {
				t.Errorf("%s: query parameter %q not declared", rt, q)
			}
		}
		if rt.reqSchema != "" && !op.reqRefs[rt.reqSchema] {
			t.Errorf("%s: request schema %s, document has %v", rt, rt.reqSchema, keys(op.reqRefs))
		}
		if rt.reqSchema == "" && len(op.reqRefs) > 0 && rt.method != "GET" {
			// The client sends no JSON body where the document expects one.
			t.Errorf("%s: document expects a %v body", rt, keys(op.reqRefs))
		}
		if rt.respSchema != "" && !op.respRefs[rt.respSchema] {
			t.Errorf("%s: response schema %s, document has %v", rt, rt.respSchema, keys(op.respRefs))
		}
		if rt.req != nil {
			checkFields(t, sp, rt.reqSchema, reflect.TypeOf(rt.req), rt.String())
		}
		if rt.resp != nil {
			checkFields(t, sp, rt.respSchema, reflect.TypeOf(rt.resp), rt.String())
		}
	}
}

// checkFields proves every JSON field of typ exists in schema, recursing
// into nested structs through the property's $ref.
func checkFields(t *testing.T, sp *apiSpec, schema string, typ reflect.Type, where string) {
	t.Helper()
	props, ok := sp.props(schema)
	if !ok {
		t.Errorf("%s: schema %s not in the document", where, schema)
		return
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		ref, ok := props[name]
		if !ok {
			if _, known := unconfirmedFields[schema+"."+name]; known {
				continue
			}
			if schema == "SandboxListItem" {
				// One Go type decodes list items and full DTOs; list items
				// omit the full-DTO-only fields (daytona-api.md §2.1).
				if full, _ := sp.props("Sandbox"); full != nil {
					if _, ok := full[name]; ok {
						continue
					}
				}
			}
			t.Errorf("%s: field %s.%s (Go %s.%s) not in the document", where, schema, name, typ.Name(), f.Name)
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ref != "" {
			checkFields(t, sp, ref, ft, where)
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// matchRoute finds the table route of a request path (relative to its
// base) and method; used by the recording middleware of the httptest
// fixture to prove every request the client sends is in the table.
func matchRoute(method, rel string, ws bool) *route {
	for _, rt := range allRoutes {
		if rt.method != method || rt.ws != ws {
			continue
		}
		if templateMatch(rt.tmpl, rel) {
			return rt
		}
	}
	return nil
}

func templateMatch(tmpl, path string) bool {
	ts := strings.Split(strings.Trim(tmpl, "/"), "/")
	ps := strings.Split(strings.Trim(path, "/"), "/")
	if len(ts) != len(ps) {
		return false
	}
	for i := range ts {
		if strings.HasPrefix(ts[i], "{") {
			if ps[i] == "" {
				return false
			}
			continue
		}
		if ts[i] != ps[i] {
			return false
		}
	}
	return true
}
