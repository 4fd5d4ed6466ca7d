package jsvalue

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
	for range maxDepth + 10 {
		deep = []any{deep}
	}
	_, err := StableStringify(deep)
	assert.Error(t, err)
}

// SortedKeys and ParseJSON are exported for the config parser and the
// provider's labels; pin what those callers rely on.
func TestSortedKeysAndParseJSON(t *testing.T) {
	assert.Equal(t, []string{"10", "2", "a", "😀", "\ue000"}, SortedKeys(map[string]int{"\ue000": 0, "😀": 0, "a": 0, "2": 0, "10": 0}))
	assert.Empty(t, SortedKeys(map[string]string(nil)))

	v, err := ParseJSON([]byte(` {"n":1e400,"s":"x"} `))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"n": json.Number("1e400"), "s": "x"}, v)
	for _, bad := range []string{``, `{"a":`, `{} {}`, `1 2`} {
		_, err := ParseJSON([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
	assert.Equal(t, "a b", Trim("\ufeff\u00a0a b\u2028\t"))
}
