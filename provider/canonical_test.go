package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	osexec "os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The expected values in this file were produced by Node.js 20 (String(Number(x)),
// JSON.stringify, and the reference stableStringify); TestJSSemanticsMatchNode
// re-checks a randomized set against a live node when one is installed.

func jsNumberText(f float64) string {
	if f == 0 && math.Signbit(f) {
		return "-0"
	}
	return jsNumberToString(f)
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
			assert.Equal(t, tc.want, jsNumberText(jsStringToNumber(tc.in)))
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
			v, err := decodeJSONValue([]byte(tc.json))
			require.NoError(t, err)
			assert.Equal(t, tc.want, jsNumberText(jsToNumber(v)))
		})
	}
	// Go-typed inputs, as a map[string]any built in code may hold them.
	assert.Equal(t, float64(7), jsToNumber(7))
	assert.Equal(t, float64(7), jsToNumber(int64(7)))
	assert.Equal(t, float64(7), jsToNumber(uint8(7)))
	assert.Equal(t, float64(2.5), jsToNumber(float32(2.5)))
	assert.True(t, math.IsNaN(jsToNumber(map[string]any{})))
	assert.True(t, math.IsNaN(jsToNumber(struct{}{})))
}

func TestJSNumberToStringMatchesJSONStringify(t *testing.T) {
	cases := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{1, "1"},
		{-1, "-1"},
		{1.5, "1.5"},
		{0.1, "0.1"},
		{1e21, "1e+21"},
		{1e-7, "1e-7"},
		{1e-6, "0.000001"},
		{123456789012345680000, "123456789012345680000"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{5e-324, "5e-324"},
		{1 << 53, "9007199254740992"},
		{1<<53 + 2, "9007199254740994"},
		{1e20, "100000000000000000000"},
		{0.000001234, "0.000001234"},
		{1.2345e-7, "1.2345e-7"},
		{100, "100"},
		{4, "4"},
		{300000, "300000"},
		{86400000, "86400000"},
		{-1e21, "-1e+21"},
		{123.456, "123.456"},
	}
	for _, tc := range cases {
		var buf bytes.Buffer
		writeJSONNumber(&buf, tc.in)
		assert.Equal(t, tc.want, buf.String(), "%v", tc.in)
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		var buf bytes.Buffer
		writeJSONNumber(&buf, f)
		assert.Equal(t, "null", buf.String(), "JSON.stringify(%v)", f)
	}
}

func TestStableStringify(t *testing.T) {
	// Produced by the reference stableStringify under Node.js 20. Keys sort by
	// UTF-16 code units: "😀" (D83D DE00) before "\ue000"; integer-like keys
	// sort as strings ("10" < "2"); <, >, &, U+2028 and DEL stay literal.
	sample := map[string]any{
		"b":      []any{3, map[string]any{"z": nil, "a": "x\u2028<>&\"\\\n\u0001\u007f é 😀"}},
		"a":      1.5,
		"\ue000": 1,
		"😀":      2,
		"10":     true,
		"2":      false,
		"A":      math.Copysign(0, -1),
	}
	want := "{\"10\":true,\"2\":false,\"A\":0,\"a\":1.5,\"b\":[3,{\"a\":\"x\u2028<>&\\\"\\\\\\n\\u0001\u007f é 😀\",\"z\":null}],\"😀\":2,\"\ue000\":1}"
	got, err := StableStringify(sample)
	require.NoError(t, err)
	assert.Equal(t, want, string(got))

	cases := []struct {
		name string
		in   any
		want string
	}{
		{"nil", nil, "null"},
		{"string", "a'b", `"a'b"`},
		{"control chars", "\b\t\n\f\r\x1f", `"\b\t\n\f\r\u001f"`},
		{"invalid utf8", "a\xffb", "\"a\ufffdb\""},
		{"array keeps order", []any{"b", "a", nil}, `["b","a",null]`},
		{"string slice", []string{"z", "y"}, `["z","y"]`},
		{"string map", map[string]string{"b": "2", "a": "1"}, `{"a":"1","b":"2"}`},
		{"nested sort", map[string]any{"z": map[string]any{"y": 1, "x": []any{map[string]any{"d": 1, "c": 2}}}}, `{"z":{"x":[{"c":2,"d":1}],"y":1}}`},
		{"json.Number", map[string]any{"n": json.Number("1e400"), "m": json.Number("1.50")}, `{"m":1.5,"n":null}`},
		{"raw message", json.RawMessage(`{"b":1,"a":[true,{"d":null,"c":"x"}]}`), `{"a":[true,{"c":"x","d":null}],"b":1}`},
		{"ints", []any{int64(1) << 53, uint8(3), -7}, `[9007199254740992,3,-7]`},
		{"struct via json tags", struct {
			Zeta  int     `json:"zeta"`
			Alpha *string `json:"alpha"`
		}{Zeta: 1}, `{"alpha":null,"zeta":1}`},
		{"named float NaN", namedFloat(math.NaN()), "null"},
		{"nil slice and map are null, empty ones are not", map[string]any{"a": []any(nil), "b": map[string]string(nil), "c": []string{}, "d": map[string]any{}},
			`{"a":null,"b":null,"c":[],"d":{}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := StableStringify(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}

type namedFloat float64

func TestStableStringifyRejects(t *testing.T) {
	for name, v := range map[string]any{
		"func":        func() {},
		"chan":        make(chan int),
		"complex":     complex(1, 2),
		"int map key": map[int]string{1: "a"},
		"bad raw":     json.RawMessage(`{"a":`),
	} {
		_, err := StableStringify(v)
		assert.Error(t, err, name)
	}
	// Hostile nesting fails cleanly instead of exhausting the stack.
	deep := any(nil)
	for range maxStableDepth + 10 {
		deep = []any{deep}
	}
	_, err := StableStringify(deep)
	assert.Error(t, err)
}

func TestShellQuote(t *testing.T) {
	assert.Equal(t, `'plain'`, ShellQuote("plain"))
	assert.Equal(t, `''`, ShellQuote(""))
	assert.Equal(t, `'it'"'"'s'`, ShellQuote("it's"))
	assert.Equal(t, `''"'"''"'"''`, ShellQuote("''"))

	bash, err := osexec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed; round trip through a real shell skipped")
	}
	// Round trip through a real shell: the quoted word must reach the
	// command as exactly the original bytes.
	hostile := []string{
		"", "it's", "''", `"$HOME"`, "$(touch /tmp/pwned)", "`id`", "a\nb", "tab\there",
		`back\slash`, "*?[]{}~!#&;|<>()", "unicode é 😀", " leading and trailing ", "-n",
	}
	for _, s := range hostile {
		out, err := osexec.Command(bash, "-c", "printf %s "+ShellQuote(s)).Output()
		require.NoError(t, err, "%q", s)
		assert.Equal(t, s, string(out), "%q", s)
	}
}

func TestAccountFingerprint(t *testing.T) {
	// Digests computed with Node's crypto over the reference stableStringify.
	assert.Equal(t, "c231e5699afa53aecca21ad4c1fbdf9dfa02efbb9f73ef9cc137ddd2bf5403a6", AccountFingerprint("test-key", ""))
	assert.Equal(t, "180f7677fea535012172e8d6b12ce850192b1c706dac56edad81785196400381", AccountFingerprint("", "https://app.daytona.io/api"))
	assert.Equal(t, "0b08987ed4f6da63800f8cf49807f5360cdd139169ca0d54af56326e17279fb4", AccountFingerprint("dtn_secret", "https://app.daytona.io/api"))

	// hands non-secret cleanup ownership to the host when creation is uncertain (test 17):
	// 64 lowercase hex, and nothing of the key in it.
	fp := AccountFingerprint("dtn_secret", "")
	assert.True(t, IsAccountFingerprint(fp))
	assert.NotContains(t, fp, "dtn_secret")

	// keeps account credentials and API endpoints isolated for the same sandbox ID (test 128).
	assert.NotEqual(t, AccountFingerprint("key-a", ""), AccountFingerprint("key-b", ""))
	assert.NotEqual(t, AccountFingerprint("key-a", "https://a.example/api"), AccountFingerprint("key-a", "https://b.example/api"))

	for _, s := range []string{"", strings.Repeat("a", 63), strings.Repeat("A", 64), strings.Repeat("g", 64), strings.Repeat("a", 65)} {
		assert.False(t, IsAccountFingerprint(s), "%q", s)
	}
}

// TestJSSemanticsMatchNode compares the JavaScript coercions and number
// formatting with a real Node.js on a randomized corpus, when node is
// installed (it is wherever the interop tests run).
func TestJSSemanticsMatchNode(t *testing.T) {
	node, err := osexec.LookPath("node")
	if err != nil {
		t.Skip("node not installed; JavaScript differential check skipped (golden tables above still apply)")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"0", "1", "5", "9", ".", "e", "E", "+", "-", "x", "b", "o", "a", "f", " ", "\u00a0", "_", "Infinity"}
	var strs []string
	for range 400 {
		var sb strings.Builder
		for range 1 + rng.IntN(6) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		strs = append(strs, sb.String())
	}
	var nums []float64
	for range 300 {
		switch rng.IntN(3) {
		case 0:
			nums = append(nums, math.Float64frombits(rng.Uint64()))
		case 1:
			nums = append(nums, float64(rng.IntN(2_000_000_000))/math.Pow(10, float64(rng.IntN(30))))
		default:
			nums = append(nums, rng.NormFloat64()*math.Pow(10, float64(rng.IntN(60)-30)))
		}
	}
	var finite []float64
	for _, f := range nums {
		if !math.IsNaN(f) && !math.IsInf(f, 0) {
			finite = append(finite, f)
		}
	}
	input, err := json.Marshal(map[string]any{"strs": strs, "nums": finite})
	require.NoError(t, err)
	script := `let d="";process.stdin.on("data",c=>d+=c).on("end",()=>{const x=JSON.parse(d);` +
		`console.log(JSON.stringify({strs:x.strs.map(s=>String(Number(s))),nums:x.nums.map(n=>JSON.stringify(n))}))})`
	cmd := osexec.Command(node, "-e", script)
	cmd.Stdin = bytes.NewReader(input)
	out, err := cmd.Output()
	require.NoError(t, err)
	var got struct {
		Strs []string `json:"strs"`
		Nums []string `json:"nums"`
	}
	require.NoError(t, json.Unmarshal(out, &got))
	require.Len(t, got.Strs, len(strs))
	require.Len(t, got.Nums, len(finite))
	for i, s := range strs {
		assert.Equal(t, got.Strs[i], jsNumberToString(jsStringToNumber(s)), "Number(%q)", s)
	}
	for i, f := range finite {
		var buf bytes.Buffer
		writeJSONNumber(&buf, f)
		assert.Equal(t, got.Nums[i], buf.String(), "JSON.stringify(%v)", f)
	}
}
