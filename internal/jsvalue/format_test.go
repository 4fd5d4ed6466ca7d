package jsvalue

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

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
		writeNumber(&buf, tc.in)
		assert.Equal(t, tc.want, buf.String(), "%v", tc.in)
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		var buf bytes.Buffer
		writeNumber(&buf, f)
		assert.Equal(t, "null", buf.String(), "JSON.stringify(%v)", f)
	}
}
