package daytonatest

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// answerOf is the one-shot answer made from out given to an outputBuffer
// in pieces cut at the offsets cuts: written, or read through ReadFrom.
func answerOf(t *testing.T, code int, out []byte, cuts []int, read bool) []byte {
	t.Helper()
	var pieces []io.Reader
	var o outputBuffer
	prev := 0
	for _, c := range append(cuts, len(out)) {
		if read {
			pieces = append(pieces, bytes.NewReader(out[prev:c]))
		} else {
			_, err := o.Write(out[prev:c])
			require.NoError(t, err)
		}
		prev = c
	}
	if read {
		n, err := o.ReadFrom(io.MultiReader(pieces...)) // one Read per piece at most
		require.NoError(t, err)
		require.EqualValues(t, len(out), n)
	}
	parts, release := o.take()
	defer release()
	rec := httptest.NewRecorder()
	writeExecuteAnswer(rec, code, parts)
	require.Equal(t, 200, rec.Code)
	require.Equal(t, "application/json; charset=utf-8", rec.Header().Get("Content-Type"))
	return rec.Body.Bytes()
}

// marshalled is the answer as the emulator wrote it before, with
// json.Marshal of a map.
func marshalled(t *testing.T, code int, out []byte) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"exitCode": code, "result": string(out)})
	require.NoError(t, err)
	return b
}

// The streamed answer is byte for byte json.Marshal's, wherever the
// output is cut into pieces: every escape (control characters, quote,
// backslash, the HTML characters, U+2028/U+2029), invalid and truncated
// UTF-8 (one \ufffd per byte), and multi-byte sequences split between
// pieces.
func TestExecuteAnswerMatchesMarshal(t *testing.T) {
	samples := []string{
		"", "abc", "a\nb\n", "\x00\x01\x1f\x7f", "\b\f\n\r\t", `"\`, "<a href='x'>&amp;</a>",
		"é日本🙂", "\u2028\u2029 x\u2028", "\xff\xfe", "\xe2\x82", "a\xe2\x82", "\xf0\x9f\x99", "\xf0\x9f\x99\x82",
		"\xe2\x28\xa1", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80\x80\x80", "\xe2\x80\xa8\xe2\x80",
		"\xf0\x9f\x99\x82\xf0\x9f", "\xf0\x9f\x41", "\xf0\x41",
	}
	for _, s := range samples {
		out := []byte(s)
		want := marshalled(t, 3, out)
		require.Equal(t, string(want), string(answerOf(t, 3, out, nil, false)), "%q whole", s)
		// Every cut into two and three pieces, empty pieces included.
		for i := 0; i <= len(out); i++ {
			require.Equal(t, string(want), string(answerOf(t, 3, out, []int{i}, false)), "%q cut at %d", s, i)
			for j := i; j <= len(out); j++ {
				require.Equal(t, string(want), string(answerOf(t, 3, out, []int{i, j}, true)), "%q cut at %d, %d", s, i, j)
			}
		}
	}
	// Large outputs (several reply writes) of random bytes, random UTF-8
	// and plain text, cut at random places; negative and large codes.
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "\n", "\t", "<", "&", "\"", "\\", "é", "日", "🙂", "\u2028", "\xff", "\xe2\x82", "\x00"}
	for k := range 12 {
		size := rng.IntN(3 * outputChunk)
		var out []byte
		switch k % 3 {
		case 0:
			out = make([]byte, size)
			for i := range out {
				out[i] = byte(rng.UintN(256))
			}
		case 1:
			var b strings.Builder
			for b.Len() < size {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			out = []byte(b.String())
		default:
			out = bytes.Repeat([]byte("0123456789abcdef"), size/16+1)
		}
		var cuts []int
		for c := rng.IntN(8); c < len(out); c += 1 + rng.IntN(outputChunk) {
			cuts = append(cuts, c)
		}
		code := []int{0, -1, 255, 1 << 40}[k%4]
		require.Equal(t, marshalled(t, code, out), answerOf(t, code, out, cuts, k%2 == 0), "sample %d (%d bytes, %d cuts)", k, len(out), len(cuts))
	}
}

// Output that reaches the buffer after the answer was taken (a background
// process still writing when Wait gave up) is dropped, not escaped into
// chunks that went back to the pool.
func TestOutputBufferDropsWritesAfterTake(t *testing.T) {
	var o outputBuffer
	n, err := o.ReadFrom(strings.NewReader(strings.Repeat("x", outputChunk+5)))
	require.NoError(t, err)
	require.EqualValues(t, outputChunk+5, n)
	_, err = o.Write([]byte("y\n"))
	require.NoError(t, err)
	parts, release := o.take()
	require.Len(t, parts, 2)
	require.Equal(t, strings.Repeat("x", outputChunk+5)+`y\n`, string(bytes.Join(parts, nil)))
	release()
	_, err = o.Write([]byte("late"))
	require.Error(t, err)
	_, err = o.ReadFrom(strings.NewReader("late"))
	require.Error(t, err)
}
