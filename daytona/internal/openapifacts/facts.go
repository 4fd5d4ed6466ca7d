// Package openapifacts holds the facts of the Daytona OpenAPI documents
// (operations, their query parameters and schemas, component schemas and
// their properties) that the fidelity tests check the client and the
// emulator against; they live in the committed text file
// daytona/testdata/openapi-facts.txt, so a plain clone runs those tests
// without the documents, and ./genfacts rewrites it from them.
package openapifacts

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Facts are the facts of several documents, keyed by a short document name
// ("api", "toolbox").
//
// The facts file is line-oriented so that a plain clone can run the tests
// without the OpenAPI documents. The generator in ./genfacts
// (`go generate ./daytona`) rewrites it when it is given the documents;
// [ParseOpenAPI] is its YAML reader and [Facts.Encode] its writer. Tests read
// the file with [Load]. Its format is one fact a line, fields separated by
// one space, sorted:
//
//	doc <doc> <source file name>
//	op <doc> <METHOD> <path> query=<a,b|-> req=<Schema,..|-> resp=<Schema,..|->
//	schema <doc> <Schema> <type|->
//	allof <doc> <Schema> <Parent>
//	prop <doc> <Schema> <property> <type>
//
// A property type is a primitive (string, integer, number, boolean,
// object), any, #Schema (a reference), []T (array of T) or {}T (object whose
// values are T). Lines starting with '#' are comments.
type Facts map[string]*Doc

// Doc is the facts of one OpenAPI document.
type Doc struct {
	Source  string             // file name the facts were generated from
	Ops     map[string]*Op     // "METHOD /path/{template}"
	Schemas map[string]*Schema // component schema name -> schema
}

// Op is one operation.
type Op struct {
	Query map[string]bool // declared query parameters
	Req   map[string]bool // schemas referenced by the request body
	Resp  map[string]bool // schemas referenced by 2xx responses
}

// Schema is one component schema.
type Schema struct {
	Type    string            // "object", "string" (enums), ... or ""
	Props   map[string]string // property -> type expression
	Parents []string          // allOf parents
}

func newDoc() *Doc { return &Doc{Ops: map[string]*Op{}, Schemas: map[string]*Schema{}} }

func newOp() *Op {
	return &Op{Query: map[string]bool{}, Req: map[string]bool{}, Resp: map[string]bool{}}
}

// Props returns a schema's properties including those of its allOf parents.
func (d *Doc) Props(schema string) (map[string]string, bool) {
	return d.props(schema, 0)
}

func (d *Doc) props(schema string, depth int) (map[string]string, bool) {
	s, ok := d.Schemas[schema]
	if !ok || depth > 32 {
		return nil, false
	}
	out := map[string]string{}
	for _, parent := range s.Parents {
		pp, _ := d.props(parent, depth+1)
		for k, v := range pp {
			out[k] = v
		}
	}
	for k, v := range s.Props {
		out[k] = v
	}
	return out, true
}

// Ref returns the schema a type expression refers to ("#X", "[]#X",
// "{}#X" -> "X"), or "" for primitives.
func Ref(typ string) string {
	for {
		switch {
		case strings.HasPrefix(typ, "[]"), strings.HasPrefix(typ, "{}"):
			typ = typ[2:]
		case strings.HasPrefix(typ, "#"):
			return typ[1:]
		default:
			return ""
		}
	}
}

func joinSet(m map[string]bool) string {
	if len(m) == 0 {
		return "-"
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

func splitSet(s string) map[string]bool {
	m := map[string]bool{}
	if s == "-" {
		return m
	}
	for _, k := range strings.Split(s, ",") {
		m[k] = true
	}
	return m
}

// Encode writes the facts in the file format, sorted, after header (each
// header line is written as a comment).
func (f Facts) Encode(w io.Writer, header string) error {
	var lines []string
	for name, d := range f {
		lines = append(lines, fmt.Sprintf("doc %s %s", name, d.Source))
		for k, o := range d.Ops {
			method, path, _ := strings.Cut(k, " ")
			lines = append(lines, fmt.Sprintf("op %s %s %s query=%s req=%s resp=%s", name, method, path, joinSet(o.Query), joinSet(o.Req), joinSet(o.Resp)))
		}
		for sn, s := range d.Schemas {
			t := s.Type
			if t == "" {
				t = "-"
			}
			lines = append(lines, fmt.Sprintf("schema %s %s %s", name, sn, t))
			for _, p := range s.Parents {
				lines = append(lines, fmt.Sprintf("allof %s %s %s", name, sn, p))
			}
			for p, pt := range s.Props {
				lines = append(lines, fmt.Sprintf("prop %s %s %s %s", name, sn, p, pt))
			}
		}
	}
	// Sorted, so that regenerating from the same documents is byte-identical
	// (allOf parents only add properties, so their order carries nothing).
	slices.Sort(lines)
	bw := bufio.NewWriter(w)
	for _, h := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
		fmt.Fprintf(bw, "# %s\n", h)
	}
	for _, l := range lines {
		fmt.Fprintln(bw, l)
	}
	return bw.Flush()
}

// Decode reads facts in the file format. Unknown or malformed lines are
// errors, so a hand edit that breaks the file fails the tests loudly.
func Decode(r io.Reader) (Facts, error) {
	f := Facts{}
	doc := func(name string) *Doc {
		d := f[name]
		if d == nil {
			d = newDoc()
			f[name] = d
		}
		return d
	}
	schema := func(d *Doc, name string) *Schema {
		s := d.Schemas[name]
		if s == nil {
			s = &Schema{Props: map[string]string{}}
			d.Schemas[name] = s
		}
		return s
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		bad := func() (Facts, error) { return nil, fmt.Errorf("openapifacts: line %d: malformed %q", n, line) }
		if len(fs) < 3 {
			return bad()
		}
		d := doc(fs[1])
		switch {
		case fs[0] == "doc" && len(fs) == 3:
			d.Source = fs[2]
		case fs[0] == "op" && len(fs) == 7:
			q, okq := strings.CutPrefix(fs[4], "query=")
			rq, okr := strings.CutPrefix(fs[5], "req=")
			rs, oks := strings.CutPrefix(fs[6], "resp=")
			if !okq || !okr || !oks {
				return bad()
			}
			d.Ops[fs[2]+" "+fs[3]] = &Op{Query: splitSet(q), Req: splitSet(rq), Resp: splitSet(rs)}
		case fs[0] == "schema" && len(fs) == 4:
			s := schema(d, fs[2])
			if fs[3] != "-" {
				s.Type = fs[3]
			}
		case fs[0] == "allof" && len(fs) == 4:
			s := schema(d, fs[2])
			s.Parents = append(s.Parents, fs[3])
		case fs[0] == "prop" && len(fs) == 5:
			schema(d, fs[2]).Props[fs[3]] = fs[4]
		default:
			return bad()
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return f, nil
}

// Load reads a facts file.
func Load(path string) (Facts, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return Decode(fh)
}
