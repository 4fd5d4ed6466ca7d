package rpc

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// encodeReference is the frame as encoding/json writes it (the stream's
// general path).
func encodeReference(t *testing.T, id json.RawMessage, r ExecuteResult) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	var res any = r
	require.NoError(t, enc.Encode(response{JSONRPC: "2.0", ID: id, Result: &res}))
	return b.Bytes()
}

// TestResultFrameMatchesEncodingJSON: the hand-written execute result
// frame is byte for byte what encoding/json writes, for every kind of
// text (escapes, control characters, U+2028/9, invalid UTF-8 and a
// literal U+FFFD, astral characters, eight-byte runs cut at every
// offset) and every field.
func TestResultFrameMatchesEncodingJSON(t *testing.T) {
	texts := []string{"", "hi\n", "a\"b\\c", "\x00\x01\x08\x0c\x1f\x7f", "<>&", "\u2028x\u2029", "\xff\xfe a \xc3", "é🙂☃",
		"\r\n\t", "a\ufffdb", strings.Repeat("abcdefgh", 9) + "\"", "1234567\n" + strings.Repeat("z", 17)}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "\n", "\"", "\\", "\x01", "\u2028", "é", "🙂", "\xff", "\ufffd", "<", " ", "x", "\x7f"}
	for range 300 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	sig := "SIGKILL"
	for i, text := range texts {
		r := ExecuteResult{ExitCode: new(i - 3), Stdout: text, Stderr: texts[len(texts)-1-i], TimedOut: i%2 == 0,
			Metadata: map[string]any{"durationMs": int64(i), "logStream": "a<b>&" + text}}
		if i%3 == 0 {
			r.ExitCode, r.Signal, r.Metadata = nil, &sig, nil
		}
		for _, id := range []json.RawMessage{json.RawMessage(`7`), json.RawMessage(`"x\u00e9"`)} {
			got, err := appendResultFrame(nil, id, &r)
			require.NoError(t, err)
			require.Equal(t, string(encodeReference(t, id, r)), string(got), "text %q", text)
		}
	}
}

// TestResultFrameUnencodableMetadata: metadata encoding/json refuses is
// an encoding failure (respond answers it with an error frame).
func TestResultFrameUnencodableMetadata(t *testing.T) {
	_, err := appendResultFrame(nil, json.RawMessage(`1`), &ExecuteResult{Metadata: map[string]any{"f": func() {}}})
	require.True(t, encodeFailed(err), "%v", err)
}

// TestLogFrameCarriesTheChunk: the hand-built execute.log notification
// decodes to the method, the invocation id, the stream and exactly the
// chunk, for text with every kind of escape.
func TestLogFrameCarriesTheChunk(t *testing.T) {
	for _, text := range []string{"a", "x\"y\\z\n\r\t\x00\x1f", "<b>&amp;", "é🙂\u2028☃", strings.Repeat("0123456789", 1000)} {
		var out bytes.Buffer
		s := newStream(strings.NewReader(""), &out, 0, nil)
		require.NoError(t, s.writeLogFrame("inv-\"1\"", Stderr, text))
		require.True(t, bytes.HasSuffix(out.Bytes(), []byte("}\n")) && bytes.Count(out.Bytes(), []byte("\n")) == 1, "one line")
		var m struct {
			JSONRPC    string `json:"jsonrpc"`
			Method     string `json:"method"`
			Invocation string `json:"paperclipInvocationId"`
			ID         any    `json:"id"`
			Params     struct {
				Stream string `json:"stream"`
				Chunk  string `json:"chunk"`
			} `json:"params"`
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &m))
		require.Equal(t, "2.0", m.JSONRPC)
		require.Equal(t, "execute.log", m.Method)
		require.Equal(t, "inv-\"1\"", m.Invocation)
		require.Nil(t, m.ID, "a notification")
		require.Equal(t, "stderr", m.Params.Stream)
		require.Equal(t, text, m.Params.Chunk)
	}
}
