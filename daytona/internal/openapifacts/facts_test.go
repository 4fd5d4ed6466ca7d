package openapifacts

import (
	"bytes"
	"strings"
	"testing"
)

// fixture exercises the YAML subset the reader must understand: quoted
// keys, block scalars that look like keys, list items that open mappings,
// parameters, $ref through items/allOf/additionalProperties, and allOf
// schemas.
const fixture = `openapi: 3.0.0
info:
  description: |
    paths:
      /fake:
        get: {}
  title: t
paths:
  /sandbox:
    get:
      parameters:
      - description: header, not a query parameter
        in: header
        name: X-Org
        schema:
          type: string
      - in: query
        name: labels
        schema:
          type: string
      - name: cursor
        in: query
        required: false
      responses:
        "200":
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Page'
        "404":
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Error'
    post:
      requestBody:
        content:
          application/json:
            schema:
              $ref: "#/components/schemas/Create"
      responses:
        "200":
          description: ok
  "/sandbox/{id}":
    delete:
      responses:
        "204":
          description: gone
components:
  schemas:
    Page:
      properties:
        items:
          items:
            $ref: '#/components/schemas/Item'
          type: array
        total:
          type: integer
      type: object
    Item:
      allOf:
      - $ref: '#/components/schemas/Base'
      properties:
        state:
          allOf:
          - $ref: '#/components/schemas/State'
        env:
          additionalProperties:
            type: string
          type: object
          description: >
            not: a property
    Base:
      properties:
        id:
          type: string
    State:
      enum:
      - started
      type: string
    Create:
      properties:
        "quoted":
          type: boolean
        cpu:
          type: number
        any: {}
    Error:
      properties:
        message:
          type: string
`

func TestParseOpenAPI(t *testing.T) {
	d, err := ParseOpenAPI(strings.NewReader(fixture))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Ops) != 3 {
		t.Errorf("ops: %v", d.Ops)
	}
	g := d.Ops["GET /sandbox"]
	if g == nil || joinSet(g.Query) != "cursor,labels" || joinSet(g.Resp) != "Page" || len(g.Req) != 0 {
		t.Fatalf("GET /sandbox: %+v", g)
	}
	if p := d.Ops["POST /sandbox"]; p == nil || joinSet(p.Req) != "Create" || len(p.Resp) != 0 {
		t.Fatalf("POST /sandbox: %+v", p)
	}
	if _, ok := d.Ops["DELETE /sandbox/{id}"]; !ok {
		t.Error("quoted path key not read")
	}
	if _, ok := d.Ops["GET /fake"]; ok {
		t.Error("block scalar content read as a path")
	}
	want := map[string]map[string]string{
		"Page":   {"items": "[]#Item", "total": "integer"},
		"Item":   {"id": "string", "state": "#State", "env": "{}string"},
		"Create": {"quoted": "boolean", "cpu": "number", "any": "any"},
	}
	for sn, w := range want {
		got, ok := d.Props(sn)
		if !ok || len(got) != len(w) {
			t.Errorf("%s: %v, want %v", sn, got, w)
			continue
		}
		for k, v := range w {
			if got[k] != v {
				t.Errorf("%s.%s = %q, want %q", sn, k, got[k], v)
			}
		}
	}
	if d.Schemas["State"].Type != "string" || d.Schemas["Page"].Type != "object" {
		t.Errorf("schema types: State %q Page %q", d.Schemas["State"].Type, d.Schemas["Page"].Type)
	}
	if _, err := ParseOpenAPI(strings.NewReader("a: b\n")); err == nil {
		t.Error("a document without operations was accepted")
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	d, err := ParseOpenAPI(strings.NewReader(fixture))
	if err != nil {
		t.Fatal(err)
	}
	d.Source = "fixture.yaml"
	var a, b bytes.Buffer
	if err := (Facts{"api": d}).Encode(&a, "line one\nline two"); err != nil {
		t.Fatal(err)
	}
	f, err := Decode(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Encode(&b, "line one\nline two"); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Fatalf("round trip differs:\n%s\n---\n%s", a.String(), b.String())
	}
	if !strings.HasPrefix(a.String(), "# line one\n# line two\n") {
		t.Errorf("header: %q", a.String()[:40])
	}
	if p, _ := f["api"].Props("Item"); p["id"] != "string" || p["state"] != "#State" {
		t.Errorf("decoded Item: %v", p)
	}
}

func TestDecodeRejectsMalformedLines(t *testing.T) {
	for _, line := range []string{
		"op api GET /x query=- req=-",
		"op api GET /x q=- req=- resp=-",
		"prop api S",
		"frob api S x y",
	} {
		if _, err := Decode(strings.NewReader("# c\n" + line + "\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%q: err = %v", line, err)
		}
	}
}

func TestRef(t *testing.T) {
	for in, want := range map[string]string{"#A": "A", "[]#B": "B", "{}#C": "C", "[][]#D": "D", "string": "", "[]string": "", "any": ""} {
		if got := Ref(in); got != want {
			t.Errorf("Ref(%q) = %q, want %q", in, got, want)
		}
	}
}
