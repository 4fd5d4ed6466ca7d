package jsvalue

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// writeString writes s as JSON.stringify does: only '"', '\\' and control
// characters below U+0020 are escaped (\b \t \n \f \r, otherwise \u00xx in
// lowercase hex). Unlike encoding/json it does not escape <, >, &, U+2028 or
// U+2029.
func writeString(buf *bytes.Buffer, s string) {
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

// writeNumber writes f as JSON.stringify does: non-finite values become
// null, everything else uses JavaScript's Number::toString.
func writeNumber(buf *bytes.Buffer, f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		buf.WriteString("null")
		return
	}
	buf.WriteString(NumberToString(f))
}

// NumberToString implements ECMAScript Number::toString(x) for radix 10
// (what String(x) and template literals print): the shortest round-trip
// digits, in positional notation for 1e-6 <= |x| < 1e21 and in exponent
// notation (1e+21, 1.5e-7) otherwise.
func NumberToString(f float64) string {
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
