package jsvalue

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	osexec "os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
		assert.Equal(t, got.Strs[i], NumberToString(stringToNumber(s)), "Number(%q)", s)
	}
	for i, f := range finite {
		var buf bytes.Buffer
		writeNumber(&buf, f)
		assert.Equal(t, got.Nums[i], buf.String(), "JSON.stringify(%v)", f)
	}
}
