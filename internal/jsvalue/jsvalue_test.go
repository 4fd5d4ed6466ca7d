package jsvalue

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The expected values in this package's tests were produced by Node.js 20 (String(Number(x)),
// JSON.stringify, and the reference stableStringify); TestJSSemanticsMatchNode
// re-checks a randomized set against a live node when one is installed.

func jsNumberText(f float64) string {
	if f == 0 && math.Signbit(f) {
		return "-0"
	}
	return NumberToString(f)
}

func TestJSStringToNumber(t *testing.T) {
	cases := []struct {
		in, want string
	}{
		{"", "0"},
		{" ", "0"},
		{"  42  ", "42"},
		{"450000.9", "450000.9"},
		{"-5.9", "-5.9"},
		{"1e3", "1000"},
		{"1E+3", "1000"},
		{".5", "0.5"},
		{"5.", "5"},
		{"+.5", "0.5"},
		{"-0", "-0"},
		{"0x10", "16"},
		{"0X1f", "31"},
		{"0o17", "15"},
		{"0b101", "5"},
		{"-0x10", "NaN"},
		{"0x", "NaN"},
		{"0xg", "NaN"},
		{"0b2", "NaN"},
		{"1_000", "NaN"},
		{"Infinity", "Infinity"},
		{"-Infinity", "-Infinity"},
		{"+Infinity", "Infinity"},
		{"infinity", "NaN"},
		{"inf", "NaN"},
		{"NaN", "NaN"},
		{"+-1", "NaN"},
		{"+-Infinity", "NaN"},
		{"1e400", "Infinity"},
		{"-1e400", "-Infinity"},
		{"1e-400", "0"},
		{"00012", "12"},
		{"12abc", "NaN"},
		{"abc", "NaN"},
		{"\u00a0\u2028 7 \ufeff", "7"},
		{"\u0085 7", "NaN"}, // NEL is not JavaScript white space
		{"\u180e7", "NaN"},  // nor is the Mongolian vowel separator
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
		{"0x1fffffffffffff1", "144115188075855860"},
		{"9007199254740993", "9007199254740992"},
		{"1e", "NaN"},
		{"e5", "NaN"},
		{"--1", "NaN"},
		{"1..2", "NaN"},
		{" \t\n\r\v\f 3", "3"},
		{"0x1p3", "NaN"}, // Go hex float syntax is not JavaScript
		{"1,000", "NaN"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%q", tc.in), func(t *testing.T) {
			assert.Equal(t, tc.want, jsNumberText(stringToNumber(tc.in)))
		})
	}
}

func TestJSToNumberOfJSONValues(t *testing.T) {
	cases := []struct {
		json, want string
	}{
		{"null", "0"},
		{"true", "1"},
		{"false", "0"},
		{"[]", "0"},
		{`["7"]`, "7"},
		{`[" 8 "]`, "8"},
		{"[1,2]", "NaN"},
		{"[[3]]", "3"},
		{"[null]", "0"},
		{"[true]", "NaN"},
		{"{}", "NaN"},
		{"[{}]", "NaN"},
		{"12.5", "12.5"},
		{"[1.5]", "1.5"},
		{"1e400", "Infinity"},
	}
	for _, tc := range cases {
		t.Run(tc.json, func(t *testing.T) {
			v, err := ParseJSON([]byte(tc.json))
			require.NoError(t, err)
			assert.Equal(t, tc.want, jsNumberText(ToNumber(v)))
		})
	}
	// Go-typed inputs, as a map[string]any built in code may hold them.
	assert.Equal(t, float64(7), ToNumber(7))
	assert.Equal(t, float64(7), ToNumber(int64(7)))
	assert.Equal(t, float64(7), ToNumber(uint8(7)))
	assert.Equal(t, float64(2.5), ToNumber(float32(2.5)))
	assert.True(t, math.IsNaN(ToNumber(map[string]any{})))
	assert.True(t, math.IsNaN(ToNumber(struct{}{})))
	// Only the builtin number types are numbers; named ones (and uintptr)
	// are not plain JSON values.
	assert.True(t, math.IsNaN(ToNumber(time.Second)))
	assert.True(t, math.IsNaN(ToNumber(uintptr(1))))
	assert.Equal(t, float64(1<<64-1), ToNumber(uint64(1<<64-1)))
}
