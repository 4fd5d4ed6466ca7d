package provider

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds the pieces that must be bit-identical with the TypeScript
// plugin (docs/behavior.md#small-functions): the canonical JSON used for every hash
// input and cache key, shell quoting, the account fingerprint (docs/behavior.md#envelope), and the
// JavaScript value coercions the config parser relies on (docs/behavior.md#config-parsing). Leases that
// the TypeScript plugin created carry hashes of this JSON (workspace sentinel
// tokens, account fingerprints), so a Go worker can resume them only if the
// bytes match.

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

// maxStableDepth bounds recursion so that a hostile, deeply nested value
// (lease metadata comes from the host) cannot exhaust the stack.
const maxStableDepth = 1000

func writeStable(buf *bytes.Buffer, v any, depth int) error {
	if depth > maxStableDepth {
		return fmt.Errorf("stable stringify: value nested deeper than %d levels", maxStableDepth)
	}
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
		writeJSString(buf, x)
	case float64:
		writeJSONNumber(buf, x)
	case float32:
		writeJSONNumber(buf, float64(x))
	case int:
		writeJSONNumber(buf, float64(x))
	case int8:
		writeJSONNumber(buf, float64(x))
	case int16:
		writeJSONNumber(buf, float64(x))
	case int32:
		writeJSONNumber(buf, float64(x))
	case int64:
		writeJSONNumber(buf, float64(x))
	case uint:
		writeJSONNumber(buf, float64(x))
	case uint8:
		writeJSONNumber(buf, float64(x))
	case uint16:
		writeJSONNumber(buf, float64(x))
	case uint32:
		writeJSONNumber(buf, float64(x))
	case uint64:
		writeJSONNumber(buf, float64(x))
	case json.Number:
		// JSON.parse then JSON.stringify: the text is read as a double.
		writeJSONNumber(buf, jsStringToNumber(string(x)))
	case json.RawMessage:
		decoded, err := decodeJSONValue(x)
		if err != nil {
			return fmt.Errorf("stable stringify: %w", err)
		}
		return writeStable(buf, decoded, depth+1)
	case []any:
		if x == nil {
			buf.WriteString("null")
			return nil
		}
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeStable(buf, e, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case []string:
		if x == nil {
			buf.WriteString("null")
			return nil
		}
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSString(buf, e)
		}
		buf.WriteByte(']')
	case map[string]any:
		if x == nil {
			buf.WriteString("null")
			return nil
		}
		keys := sortedKeysUTF16(x)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSString(buf, k)
			buf.WriteByte(':')
			if err := writeStable(buf, x[k], depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case map[string]string:
		if x == nil {
			buf.WriteString("null")
			return nil
		}
		keys := sortedKeysUTF16(x)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSString(buf, k)
			buf.WriteByte(':')
			writeJSString(buf, x[k])
		}
		buf.WriteByte('}')
	default:
		return writeStableReflect(buf, v, depth)
	}
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
		writeJSONNumber(buf, rv.Float())
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("stable stringify: %w", err)
	}
	decoded, err := decodeJSONValue(raw)
	if err != nil {
		return fmt.Errorf("stable stringify: %w", err)
	}
	return writeStable(buf, decoded, depth+1)
}

// decodeJSONValue decodes one JSON value keeping numbers as json.Number, so
// that out-of-range literals (1e400) become Infinity as in JSON.parse instead
// of failing.
func decodeJSONValue(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("unexpected data after the JSON value")
	}
	return v, nil
}

func sortedKeysUTF16[V any](m map[string]V) []string {
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

const hexDigits = "0123456789abcdef"

// writeJSString writes s as JSON.stringify does: only '"', '\\' and control
// characters below U+0020 are escaped (\b \t \n \f \r, otherwise \u00xx in
// lowercase hex). Unlike encoding/json it does not escape <, >, &, U+2028 or
// U+2029.
func writeJSString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				buf.WriteString(`\"`)
			case '\\':
				buf.WriteString(`\\`)
			case '\b':
				buf.WriteString(`\b`)
			case '\t':
				buf.WriteString(`\t`)
			case '\n':
				buf.WriteString(`\n`)
			case '\f':
				buf.WriteString(`\f`)
			case '\r':
				buf.WriteString(`\r`)
			default:
				if c < 0x20 {
					buf.WriteString(`\u00`)
					buf.WriteByte(hexDigits[c>>4])
					buf.WriteByte(hexDigits[c&0xf])
				} else {
					buf.WriteByte(c)
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf.WriteString("\ufffd")
		} else {
			buf.WriteString(s[i : i+size])
		}
		i += size
	}
	buf.WriteByte('"')
}

// writeJSONNumber writes f as JSON.stringify does: non-finite values become
// null, everything else uses JavaScript's Number::toString.
func writeJSONNumber(buf *bytes.Buffer, f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		buf.WriteString("null")
		return
	}
	buf.WriteString(jsNumberToString(f))
}

// jsNumberToString implements ECMAScript Number::toString(x) for radix 10:
// the shortest round-trip digits, in positional notation for
// 1e-6 <= |x| < 1e21 and in exponent notation (1e+21, 1.5e-7) otherwise.
func jsNumberToString(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0" // also -0
	}
	sign := ""
	if f < 0 {
		sign = "-"
		f = -f
	}
	// strconv's shortest 'e' form gives the digits s and the exponent: x =
	// 0.s × 10^n in the spec's terms, with n = exponent + 1.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expText, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expText)
	k := len(digits)
	n := exp + 1
	var out string
	switch {
	case k <= n && n <= 21:
		out = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		out = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		out = "0." + strings.Repeat("0", -n) + digits
	default:
		expSign := "+"
		if n-1 < 0 {
			expSign = "-"
		}
		absExp := n - 1
		if absExp < 0 {
			absExp = -absExp
		}
		if k == 1 {
			out = digits + "e" + expSign + strconv.Itoa(absExp)
		} else {
			out = digits[:1] + "." + digits[1:] + "e" + expSign + strconv.Itoa(absExp)
		}
	}
	return sign + out
}

// ShellQuote quotes s for a POSIX shell exactly as the reference shellQuote
// does: wrap in single quotes and replace each ' with '"'"'.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// AccountFingerprint returns the account fingerprint of
// docs/behavior.md#envelope: the lowercase hex sha256 of
// stableStringify({ apiKey: <resolved key or null>, apiUrl: <apiUrl or null> }).
// An empty apiKey or apiURL counts as null. The secret itself never leaves
// this function; only the digest does. target is deliberately not part of the
// identity: lease metadata later fills in the actual region (test 154).
func AccountFingerprint(apiKey, apiURL string) string {
	identity := map[string]any{"apiKey": nil, "apiUrl": nil}
	if apiKey != "" {
		identity["apiKey"] = apiKey
	}
	if apiURL != "" {
		identity["apiUrl"] = apiURL
	}
	// Strings and nil always stringify; the error is impossible here.
	canonical, _ := StableStringify(identity)
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// IsAccountFingerprint reports whether s has the envelope's fingerprint shape:
// exactly 64 lowercase hex characters.
func IsAccountFingerprint(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// --- JavaScript value coercion (ECMAScript ToNumber / ToString) ---

// jsToNumber implements ECMAScript Number(v) for the values encoding/json
// produces (and plain Go scalars): null -> 0, booleans -> 0/1, strings by
// StringToNumber, arrays via their string form (Number([]) is 0, Number(["7"])
// is 7, Number([1,2]) is NaN), objects -> NaN. JavaScript's undefined (an
// absent key) is handled by the callers, never here.
func jsToNumber(v any) float64 {
	switch x := v.(type) {
	case nil:
		return 0
	case bool:
		if x {
			return 1
		}
		return 0
	case string:
		return jsStringToNumber(x)
	case json.Number:
		return jsStringToNumber(string(x))
	case float64:
		return x
	case float32:
		return float64(x)
	case int:
		return float64(x)
	case int8:
		return float64(x)
	case int16:
		return float64(x)
	case int32:
		return float64(x)
	case int64:
		return float64(x)
	case uint:
		return float64(x)
	case uint8:
		return float64(x)
	case uint16:
		return float64(x)
	case uint32:
		return float64(x)
	case uint64:
		return float64(x)
	case []any:
		s, ok := jsArrayToString(x, 0)
		if !ok {
			return math.NaN()
		}
		return jsStringToNumber(s)
	default:
		return math.NaN()
	}
}

// jsArrayToString implements Array.prototype.toString (join(",")) for decoded
// JSON values. ok is false for absurdly deep nesting, treated as NaN.
func jsArrayToString(a []any, depth int) (string, bool) {
	if depth > maxStableDepth {
		return "", false
	}
	parts := make([]string, len(a))
	for i, e := range a {
		switch x := e.(type) {
		case nil:
			parts[i] = ""
		case []any:
			s, ok := jsArrayToString(x, depth+1)
			if !ok {
				return "", false
			}
			parts[i] = s
		case string:
			parts[i] = x
		case bool:
			parts[i] = strconv.FormatBool(x)
		case map[string]any:
			parts[i] = "[object Object]"
		default:
			parts[i] = jsNumberToString(jsToNumber(x))
		}
	}
	return strings.Join(parts, ","), true
}

// jsDecimalLiteral is ECMAScript's StrDecimalLiteral without the Infinity
// alternative, which is handled separately. No numeric separators.
var jsDecimalLiteral = regexp.MustCompile(`^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$`)

// jsStringToNumber implements ECMAScript StringToNumber: surrounding
// JavaScript white space is ignored, the empty string is 0, 0x/0o/0b integer
// literals (unsigned) are accepted, "Infinity" (case-sensitive, optionally
// signed) is infinite, and anything else that is not a decimal literal is NaN.
func jsStringToNumber(s string) float64 {
	s = jsTrim(s)
	if s == "" {
		return 0
	}
	if len(s) >= 2 && s[0] == '0' {
		base := 0
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			return jsNonDecimalInteger(s[2:], base)
		}
	}
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) <= 1 && body == "Infinity" {
		if s[0] == '-' {
			return math.Inf(-1)
		}
		return math.Inf(1)
	}
	if !jsDecimalLiteral.MatchString(s) {
		return math.NaN()
	}
	// The syntax is checked above, so the only possible error is ErrRange,
	// for which ParseFloat already returns ±Inf (or 0 on underflow) as
	// JavaScript does.
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

func jsNonDecimalInteger(digits string, base int) float64 {
	if digits == "" {
		return math.NaN()
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		var d int
		switch {
		case c >= '0' && c <= '9':
			d = int(c - '0')
		case c >= 'a' && c <= 'f':
			d = int(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = int(c-'A') + 10
		default:
			return math.NaN()
		}
		if d >= base {
			return math.NaN()
		}
	}
	n, ok := new(big.Int).SetString(digits, base)
	if !ok {
		return math.NaN()
	}
	// Exact integer, then one rounding to nearest-even, as the spec's
	// "rounded to a Number value" requires.
	f, _ := new(big.Float).SetInt(n).Float64()
	return f
}

// isJSWhiteSpace reports whether r is in ECMAScript's WhiteSpace or
// LineTerminator sets, which String.prototype.trim and StringToNumber strip.
// It differs from unicode.IsSpace: U+FEFF is included, U+0085 is not.
func isJSWhiteSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x00A0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// jsTrim implements String.prototype.trim.
func jsTrim(s string) string {
	return strings.TrimFunc(s, isJSWhiteSpace)
}
