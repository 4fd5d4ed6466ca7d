package daytonatest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDemux(t *testing.T) {
	for _, tc := range []struct{ raw, out, err string }{
		{"", "", ""},
		{"dropped\x01\x01\x01a\n", "a\n", ""},
		{"\x01\x01\x01a\n\x02\x02\x02b\n\x01\x01\x01c", "a\nc", "b\n"},
		{"\x01\x01\x01x\x01y\x02\x02z\n", "x\x01y\x02\x02z\n", ""},
		{"\x02\x02\x02e\x01\x01\x01", "", "e"},
		{"\x01\x01", "", ""},
	} {
		o, e := demux([]byte(tc.raw))
		assert.Equal(t, tc.out, string(o), "%q", tc.raw)
		assert.Equal(t, tc.err, string(e), "%q", tc.raw)
	}
}

func TestStripperAcrossChunks(t *testing.T) {
	raw := []byte("\x01\x01\x01out\n\x02\x02\x02err\n\x01\x01\x01more\n")
	for cut := 0; cut <= len(raw); cut++ {
		st := &stripper{}
		var got []byte
		got = append(got, st.feed(raw[:cut])...)
		got = append(got, st.feed(raw[cut:])...)
		assert.Equal(t, "out\nerr\nmore\n", string(got), "cut %d", cut)
	}
	assert.True(t, bytes.Equal(stripMarkers(raw), []byte("out\nerr\nmore\n")))
}

func TestVersionModes(t *testing.T) {
	assert.True(t, versionAtLeast("0.190.0", 0, 167, 0))
	assert.True(t, versionAtLeast("v0.167.0-rc1", 0, 167, 0))
	assert.False(t, versionAtLeast("0.166.9", 0, 167, 0))
	assert.True(t, versionAtLeast("1.0", 0, 167, 0))
	assert.False(t, versionAtLeast("garbage", 0, 27, 0))
}
