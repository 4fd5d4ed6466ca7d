// Package jsvalue reproduces, bit for bit, the JavaScript value semantics
// the TypeScript plugin relied on: ECMAScript's Number() coercion and
// String.prototype.trim (ToNumber, Trim), Number::toString (NumberToString)
// and the reference stableStringify canonical JSON (StableStringify). The
// config parser coerces host-supplied values with it, and the provider hashes
// its canonical JSON into sentinel tokens and account fingerprints that must
// match those of leases the TypeScript plugin created. It imports only the
// standard library.
package jsvalue

import (
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// ToNumber implements ECMAScript Number(v) for the values encoding/json
// produces (and plain Go scalars): null -> 0, booleans -> 0/1, strings by
// ECMAScript StringToNumber (surrounding white space ignored, "" is 0, 0x/0o/0b
// literals, "Infinity"), arrays via their string form (Number([]) is 0,
// Number(["7"]) is 7, Number([1,2]) is NaN), objects -> NaN. JavaScript's
// undefined (an absent key) is the caller's business, never passed here.
func ToNumber(v any) float64 {
	if f, ok := goNumber(v); ok {
		return f
	}
	switch x := v.(type) {
	case nil:
		return 0
	case bool:
		if x {
			return 1
		}
		return 0
	case string:
		return stringToNumber(x)
	case json.Number:
		return stringToNumber(string(x))
	case []any:
		s, ok := arrayToString(x, 0)
		if !ok {
			return math.NaN()
		}
		return stringToNumber(s)
	default:
		return math.NaN()
	}
}

// goNumber returns the value of a Go integer or float (the builtin types,
// not named ones) as the float64 every JavaScript number is; ok is false
// for any other value.
func goNumber(v any) (f float64, ok bool) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Type().Name() != rv.Kind().String() {
		return 0, false // nil, or a named type such as time.Duration
	}
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	}
	return 0, false
}

// arrayToString implements Array.prototype.toString (join(",")) for decoded
// JSON values. ok is false for absurdly deep nesting, treated as NaN.
func arrayToString(a []any, depth int) (string, bool) {
	if depth > maxDepth {
		return "", false
	}
	parts := make([]string, len(a))
	for i, e := range a {
		switch x := e.(type) {
		case nil:
			parts[i] = ""
		case []any:
			s, ok := arrayToString(x, depth+1)
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
			parts[i] = NumberToString(ToNumber(x))
		}
	}
	return strings.Join(parts, ","), true
}

// decimalLiteral is ECMAScript's StrDecimalLiteral without the Infinity
// alternative, which is handled separately. No numeric separators.
var decimalLiteral = regexp.MustCompile(`^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$`)

// stringToNumber implements ECMAScript StringToNumber: surrounding
// JavaScript white space is ignored, the empty string is 0, 0x/0o/0b integer
// literals (unsigned) are accepted, "Infinity" (case-sensitive, optionally
// signed) is infinite, and anything else that is not a decimal literal is NaN.
func stringToNumber(s string) float64 {
	s = Trim(s)
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
			return nonDecimalInteger(s[2:], base)
		}
	}
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) <= 1 && body == "Infinity" {
		if s[0] == '-' {
			return math.Inf(-1)
		}
		return math.Inf(1)
	}
	if !decimalLiteral.MatchString(s) {
		return math.NaN()
	}
	// The syntax is checked above, so the only possible error is ErrRange,
	// for which ParseFloat already returns ±Inf (or 0 on underflow) as
	// JavaScript does.
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

func nonDecimalInteger(digits string, base int) float64 {
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

// isWhiteSpace reports whether r is in ECMAScript's WhiteSpace or
// LineTerminator sets, which String.prototype.trim and StringToNumber strip.
// It differs from unicode.IsSpace: U+FEFF is included, U+0085 is not.
func isWhiteSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x00A0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// Trim implements String.prototype.trim.
func Trim(s string) string {
	return strings.TrimFunc(s, isWhiteSpace)
}
