package daytona

import (
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/daytonaworker/daytona-worker/daytona/internal/openapifacts"
)

// unconfirmedFields are JSON fields the client sends or reads that are not
// in the v0.190.0 documents, each with its reason. Nothing else may be
// missing from the schemas.
var unconfirmedFields = map[string]string{
	"CreateSandbox.ttlMinutes":      "docs/behavior.md#ttl: proposed create field for the seed-only ttlMinutes",
	"Sandbox.autoDestroyAt":         "docs/daytona.md#ttl: destroy deadline read by the TS plugin, newer than v0.190.0",
	"SandboxListItem.autoDestroyAt": "same Go type as Sandbox; see Sandbox.autoDestroyAt",
}

// wholeMinutes are the Sandbox interval properties the documents declare
// "number" but which are whole minutes: CreateSandbox declares the same
// fields "integer" and the interval setters take an integer path segment,
// so the client decodes them as ints.
var wholeMinutes = map[string]bool{"autoStopInterval": true, "autoArchiveInterval": true, "autoDeleteInterval": true}

// TestFidelityRoutes proves that every route in the client's table exists
// in the OpenAPI document of its API with the same method, that the query
// parameters it may send are declared there, and that the request and
// response schemas it (de)serialises are the ones the operation uses.
func TestFidelityRoutes(t *testing.T) {
	t.Parallel()
	specs := map[apiKind]*openapifacts.Doc{
		mainAPI:    readSpec(t, "api"),
		toolboxAPI: readSpec(t, "toolbox"),
	}
	if len(allRoutes) < 30 {
		t.Fatalf("route table has only %d routes", len(allRoutes))
	}
	for _, rt := range allRoutes {
		sp := specs[rt.api]
		op, ok := sp.Ops[rt.method+" "+rt.tmpl]
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
			if !op.Query[q] {
				t.Errorf("%s: query parameter %q not declared", rt, q)
			}
		}
		if rt.reqSchema != "" && !op.Req[rt.reqSchema] {
			t.Errorf("%s: request schema %s, document has %v", rt, rt.reqSchema, keys(op.Req))
		}
		if rt.reqSchema == "" && len(op.Req) > 0 && rt.method != "GET" {
			// The client sends no JSON body where the document expects one.
			t.Errorf("%s: document expects a %v body", rt, keys(op.Req))
		}
		if rt.respSchema != "" && !op.Resp[rt.respSchema] {
			t.Errorf("%s: response schema %s, document has %v", rt, rt.respSchema, keys(op.Resp))
		}
		if rt.req != nil {
			checkFields(t, sp, rt.reqSchema, reflect.TypeOf(rt.req), rt.String())
		}
		if rt.resp != nil {
			checkFields(t, sp, rt.respSchema, reflect.TypeOf(rt.resp), rt.String())
		}
	}
}

// checkFields proves every JSON field of typ exists in schema with a Go type
// that can carry the document's type, recursing into nested structs through
// the property's $ref.
func checkFields(t *testing.T, sp *openapifacts.Doc, schema string, typ reflect.Type, where string) {
	t.Helper()
	props, ok := sp.Props(schema)
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
		typExpr, ok := props[name]
		if !ok {
			if _, known := unconfirmedFields[schema+"."+name]; known {
				continue
			}
			if schema == "SandboxListItem" {
				// One Go type decodes list items and full DTOs; list items
				// omit the full-DTO-only fields (docs/daytona.md#sandbox-object).
				if full, _ := sp.Props("Sandbox"); full != nil {
					if _, ok := full[name]; ok {
						continue
					}
				}
			}
			t.Errorf("%s: field %s.%s (Go %s.%s) not in the document", where, schema, name, typ.Name(), f.Name)
			continue
		}
		if typExpr == "number" && wholeMinutes[name] {
			typExpr = "integer"
		}
		if why := typeMismatch(sp, typExpr, f.Type); why != "" {
			t.Errorf("%s: field %s.%s is %s in the document but Go %s.%s is %s: %s", where, schema, name, typExpr, typ.Name(), f.Name, f.Type, why)
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ref := openapifacts.Ref(typExpr); ft.Kind() == reflect.Struct && ref != "" {
			checkFields(t, sp, ref, ft, where)
		}
	}
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// typeMismatch says why a Go type cannot carry a value of the document's
// type expression (see package openapifacts), or "" when it can.
func typeMismatch(sp *openapifacts.Doc, expr string, ft reflect.Type) string {
	for ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
	}
	if expr == "any" || ft.Kind() == reflect.Interface || ft == reflect.TypeFor[json.RawMessage]() {
		return ""
	}
	switch {
	case strings.HasPrefix(expr, "[]"):
		if ft.Kind() != reflect.Slice {
			return "not a slice"
		}
		return typeMismatch(sp, expr[2:], ft.Elem())
	case strings.HasPrefix(expr, "{}"):
		if ft.Kind() != reflect.Map || ft.Key().Kind() != reflect.String {
			return "not a map with string keys"
		}
		return typeMismatch(sp, expr[2:], ft.Elem())
	case strings.HasPrefix(expr, "#"):
		s := sp.Schemas[expr[1:]]
		if s == nil {
			return "schema " + expr[1:] + " not in the document"
		}
		if s.Type == "" {
			s = &openapifacts.Schema{Type: "object"}
		}
		return typeMismatch(sp, s.Type, ft)
	}
	ok := false
	switch k := ft.Kind(); expr {
	case "string":
		ok = k == reflect.String || reflect.PointerTo(ft).Implements(textUnmarshaler)
	case "integer":
		ok = k >= reflect.Int && k <= reflect.Uint64
	case "number":
		ok = k == reflect.Float32 || k == reflect.Float64
	case "boolean":
		ok = k == reflect.Bool
	case "object":
		ok = k == reflect.Struct || k == reflect.Map
	default:
		return "unknown document type " + expr
	}
	if !ok {
		return "kinds differ"
	}
	return ""
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
