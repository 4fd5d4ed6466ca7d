package openapifacts

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// This file is a minimal, purpose-built reader for the Daytona OpenAPI
// documents (go.mod carries no YAML library, and the generator is the only
// code that ever reads YAML). It understands exactly the subset those
// documents use: block mappings by indentation, "- " list items, quoted
// keys, and |/> block scalars (skipped). Anything it does not understand is
// ignored, so the facts tests pin it on known facts of the real documents.

var (
	reKeyLine = regexp.MustCompile(`^(\s*)(- )?("[^"]*"|'[^']*'|[^\s:"'#-][^:]*?|-[^\s:][^:]*?):(?:\s+(.*))?$`)
	reRef     = regexp.MustCompile(`^["']?#/components/schemas/([^"']+)["']?$`)
)

var httpMethods = map[string]bool{"get": true, "post": true, "put": true, "delete": true, "patch": true, "head": true, "options": true}

type frame struct {
	indent int
	key    string
}

// propShape collects what the document says about one schema property
// before it is turned into a type expression.
type propShape struct {
	typ, ref          string // type: / $ref: (directly, or through allOf/oneOf/anyOf)
	itemsTyp, itemRef string // items: {type|$ref}
	addTyp, addRef    string // additionalProperties: {type|$ref}
}

func (p *propShape) expr() string {
	elem := func(typ, ref string) string {
		switch {
		case ref != "":
			return "#" + ref
		case typ != "":
			return typ
		}
		return "any"
	}
	switch {
	case p.typ == "array":
		return "[]" + elem(p.itemsTyp, p.itemRef)
	case p.addTyp != "" || p.addRef != "":
		return "{}" + elem(p.addTyp, p.addRef)
	case p.ref != "":
		return "#" + p.ref
	case p.typ != "":
		return p.typ
	}
	return "any"
}

// ParseOpenAPI reads one OpenAPI 3 YAML document and returns its facts.
func ParseOpenAPI(r io.Reader) (*Doc, error) {
	d := newDoc()
	shapes := map[string]map[string]*propShape{} // schema -> property -> shape
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var stack []frame
	blockIndent := -1 // inside a |/> block scalar deeper than this
	// The current list item of a parameters list: its in/name.
	var paramIn, paramName string
	var paramOp *Op
	flushParam := func() {
		if paramOp != nil && paramIn == "query" && paramName != "" {
			paramOp.Query[paramName] = true
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
		listItem := m[2] != ""
		switch {
		case len(path) >= 2 && path[0] == "paths":
			visitPath(d, path, key, val, listItem, &paramIn, &paramName, &paramOp, flushParam)
		case len(path) >= 2 && path[0] == "components" && path[1] == "schemas":
			visitSchema(d, shapes, path[2:], key, val)
		}
		if val == "" {
			stack = append(stack, frame{indent: keyIndent, key: key})
		}
	}
	flushParam()
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for name, props := range shapes {
		for p, sh := range props {
			d.Schemas[name].Props[p] = sh.expr()
		}
	}
	if len(d.Ops) == 0 {
		return nil, fmt.Errorf("openapifacts: no operations found (not an OpenAPI document?)")
	}
	return d, nil
}

func op(d *Doc, path []string) *Op {
	if len(path) < 3 || !httpMethods[path[2]] {
		return nil
	}
	k := strings.ToUpper(path[2]) + " " + path[1]
	o := d.Ops[k]
	if o == nil {
		o = newOp()
		d.Ops[k] = o
	}
	return o
}

func visitPath(d *Doc, path []string, key, val string, listItem bool, paramIn, paramName *string, paramOp **Op, flush func()) {
	if len(path) == 2 {
		if httpMethods[key] {
			op(d, append(path, key))
		}
		return
	}
	o := op(d, path)
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
				o.Req[rm[1]] = true
			}
			if len(path) > 4 && path[3] == "responses" && strings.HasPrefix(path[4], "2") {
				o.Resp[rm[1]] = true
			}
		}
	}
}

// visitSchema handles a key under components/schemas; path starts at the
// schema name.
func visitSchema(d *Doc, shapes map[string]map[string]*propShape, path []string, key, val string) {
	ref := ""
	if key == "$ref" {
		if rm := reRef.FindStringSubmatch(val); rm != nil {
			ref = rm[1]
		}
	}
	switch {
	case len(path) == 0:
		if d.Schemas[key] == nil {
			d.Schemas[key] = &Schema{Props: map[string]string{}}
			shapes[key] = map[string]*propShape{}
		}
	case len(path) == 1 && key == "type":
		d.Schemas[path[0]].Type = val
	case len(path) == 2 && path[1] == "properties":
		shapes[path[0]][key] = &propShape{}
	case len(path) == 2 && path[1] == "allOf" && ref != "":
		d.Schemas[path[0]].Parents = append(d.Schemas[path[0]].Parents, ref)
	case len(path) >= 3 && path[1] == "properties":
		sh := shapes[path[0]][path[2]]
		if sh == nil {
			return
		}
		rest := path[3:]
		switch {
		case len(rest) == 0 && key == "type":
			sh.typ = val
		case len(rest) == 0 && ref != "":
			sh.ref = ref
		case len(rest) == 1 && (rest[0] == "allOf" || rest[0] == "oneOf" || rest[0] == "anyOf") && ref != "" && sh.ref == "":
			sh.ref = ref
		case len(rest) == 1 && rest[0] == "items" && key == "type":
			sh.itemsTyp = val
		case len(rest) == 1 && rest[0] == "items" && ref != "":
			sh.itemRef = ref
		case len(rest) == 1 && rest[0] == "additionalProperties" && key == "type":
			sh.addTyp = val
		case len(rest) == 1 && rest[0] == "additionalProperties" && ref != "":
			sh.addRef = ref
		}
	}
}
