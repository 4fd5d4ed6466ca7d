package jsvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"unicode/utf16"
	"unicode/utf8"
)

// StableStringify returns canonical JSON for v exactly as the reference
// plugin's stableStringify does: object keys sorted recursively (by UTF-16
// code units, like JavaScript's default Array.prototype.sort), arrays in
// order, no whitespace, and JSON.stringify's formatting of strings and
// numbers. A nil value (JavaScript null or undefined) becomes null, also as an
// object member (the reference keeps such keys, unlike JSON.stringify).
//
// Supported inputs: nil, bool, string, every Go integer and float type,
// json.Number, json.RawMessage, map[string]any, map[string]string, []any,
// []string, and anything else encoding/json can marshal (structs, typed maps,
// pointers), which is marshalled and then canonicalised.
//
// Limits, all outside what the worker hashes (strings, small integers, and
// simple floats):
//   - Numbers are rendered as JavaScript would render them after converting to
//     a float64: integers beyond 2^53 lose precision exactly as they would in
//     JavaScript; NaN and ±Infinity become null and -0 becomes 0, as in
//     JSON.stringify.
//   - Go strings are UTF-8; invalid bytes are rendered as U+FFFD (JavaScript
//     strings cannot hold them). Lone surrogates cannot occur in valid UTF-8,
//     so JSON.stringify's \udXXX escapes for them never arise.
//   - Map keys of kinds other than string are rejected with an error, as are
//     channels, functions and complex numbers.
//   - A nil slice or map is null, as encoding/json renders it (JavaScript has
//     no such value; an empty one is [] or {}).
func StableStringify(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeStable(&buf, v, 0); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// maxDepth bounds recursion so that a hostile, deeply nested value (lease
// metadata comes from the host) cannot exhaust the stack.
const maxDepth = 1000

func writeStable(buf *bytes.Buffer, v any, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("stable stringify: value nested deeper than %d levels", maxDepth)
	}
	if f, ok := goNumber(v); ok {
		writeNumber(buf, f)
		return nil
	}
	nested := func(e any) error { return writeStable(buf, e, depth+1) }
	str := func(s string) error { writeString(buf, s); return nil }
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case string:
		writeString(buf, x)
	case json.Number:
		// JSON.parse then JSON.stringify: the text is read as a double.
		writeNumber(buf, stringToNumber(string(x)))
	case json.RawMessage:
		decoded, err := ParseJSON(x)
		if err != nil {
			return fmt.Errorf("stable stringify: %w", err)
		}
		return nested(decoded)
	case []any:
		return writeArray(buf, x, nested)
	case []string:
		return writeArray(buf, x, str)
	case map[string]any:
		return writeObject(buf, x, nested)
	case map[string]string:
		return writeObject(buf, x, str)
	default:
		return writeStableReflect(buf, v, depth)
	}
	return nil
}

// writeArray writes a JSON array (null for a nil slice), each element with
// writeElem.
func writeArray[E any](buf *bytes.Buffer, a []E, writeElem func(E) error) error {
	if a == nil {
		buf.WriteString("null")
		return nil
	}
	buf.WriteByte('[')
	for i, e := range a {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := writeElem(e); err != nil {
			return err
		}
	}
	buf.WriteByte(']')
	return nil
}

// writeObject writes a JSON object (null for a nil map) with its keys in
// JavaScript's sort order, each value with writeValue.
func writeObject[V any](buf *bytes.Buffer, m map[string]V, writeValue func(V) error) error {
	if m == nil {
		buf.WriteString("null")
		return nil
	}
	buf.WriteByte('{')
	for i, k := range SortedKeys(m) {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeString(buf, k)
		buf.WriteByte(':')
		if err := writeValue(m[k]); err != nil {
			return err
		}
	}
	buf.WriteByte('}')
	return nil
}

// writeStableReflect handles everything else by letting encoding/json decide
// the JSON shape (struct tags, Marshaler implementations) and canonicalising
// the result.
func writeStableReflect(buf *bytes.Buffer, v any, depth int) error {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return fmt.Errorf("stable stringify: unsupported type %T", v)
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return fmt.Errorf("stable stringify: unsupported map key type in %T", v)
		}
	case reflect.Float32, reflect.Float64:
		// Named float types: keep JSON.stringify's NaN/Infinity -> null.
		writeNumber(buf, rv.Float())
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("stable stringify: %w", err)
	}
	decoded, err := ParseJSON(raw)
	if err != nil {
		return fmt.Errorf("stable stringify: %w", err)
	}
	return writeStable(buf, decoded, depth+1)
}

// ParseJSON decodes one JSON value as JSON.parse reads it, keeping numbers
// as json.Number so that out-of-range literals (1e400) become Infinity
// under ToNumber instead of failing. Trailing data is an error.
func ParseJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// SortedKeys returns the keys of m in the order JavaScript's default sort
// puts them (UTF-16 code units), the order of StableStringify's objects.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return lessUTF16(keys[i], keys[j]) })
	return keys
}

// lessUTF16 orders strings by UTF-16 code units, which is how JavaScript's
// default sort compares them. It differs from Go's byte order only when one
// string has a supplementary-plane character where the other has a character
// in U+E000..U+FFFF.
func lessUTF16(a, b string) bool {
	if isASCII(a) && isASCII(b) {
		return a < b
	}
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b))) < 0
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
