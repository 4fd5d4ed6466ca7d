package daytona

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chunkReader hands out r's bytes in pieces whose sizes cycle through
// sizes, so escapes, surrogate pairs and UTF-8 sequences fall across read
// boundaries at every position.
type chunkReader struct {
	data  []byte
	sizes []int
	i     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := c.sizes[c.i%len(c.sizes)]
	c.i++
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// decodeAll decodes body through r and returns the exit code and text.
func decodeAll(r io.Reader) (int, string, error) {
	var out bytes.Buffer
	code, err := decodeOneShot(r, func(p []byte) error { out.Write(p); return nil })
	return code, out.String(), err
}

// wantStdlib is what encoding/json makes of the answer.
func wantStdlib(body []byte) (int, string, error) {
	var v ExecuteResponse
	err := json.Unmarshal(body, &v)
	return v.ExitCode, v.Result, err
}

// tokens of a JSON string literal's content: every escape form, surrogate
// halves that pair or do not, raw multibyte and invalid UTF-8 (including a
// sequence cut short and an encoded surrogate), plain ASCII.
var stringTokens = []string{
	"a", "plain text ", `\n`, `\"`, `\\`, `\/`, `\b`, `\f`, `\r`, `\t`,
	`\u0000`, `\u001f`, `\u00e9`, `\u20AC`, `\uFFFD`, `\uD83D\uDE42`, `\ud83d\ude42`,
	`\uD83D`, `\uDE42`, `\uD83D\u0041`, `\uD83D\uD83D\uDE42`, `\uDE42\uD83D`,
	"é", "€", "🙂", "\xff", "\xe2\x82", "\xed\xa0\x80", "\xf0\x9f", "\xc0\xaf", "\uFFFD",
	"<>&", "\u2028",
}

func randomLiteral(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(stringTokens[rng.IntN(len(stringTokens))])
	}
	return b.String()
}

// TestOneShotDecodeMatchesEncodingJSON: random result literals made of
// every escape form and of invalid UTF-8, read through random chunkings
// (down to one byte), decode to exactly what encoding/json gives.
func TestOneShotDecodeMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 6))
	for i := range 400 {
		lit := randomLiteral(rng, rng.IntN(60))
		if i%50 == 0 {
			lit = randomLiteral(rng, 30000) // beyond the flush size and the read buffer
		}
		body := []byte(`{"exitCode":` + []string{"0", "7", "-1", "255"}[i%4] + `,"result":"` + lit + `"}`)
		wantCode, wantText, werr := wantStdlib(body)
		require.NoError(t, werr, "%q", body)
		sizes := []int{1 + rng.IntN(13), 1 + rng.IntN(5), 1 + rng.IntN(70)}
		for _, r := range []io.Reader{bytes.NewReader(body), iotest.OneByteReader(bytes.NewReader(body)), &chunkReader{data: body, sizes: sizes}} {
			code, text, err := decodeAll(r)
			require.NoError(t, err, "%q", body)
			require.Equal(t, wantCode, code)
			require.Equal(t, wantText, text, "%q", lit)
		}
	}
}

// FuzzOneShotDecode: for any result literal, the decoder and encoding/json
// agree (both fail, or both give the same text), whatever the chunking.
func FuzzOneShotDecode(f *testing.F) {
	for _, s := range stringTokens {
		f.Add([]byte(s), uint8(3))
	}
	f.Add([]byte(`\uD83D\uDE42\uD83D`), uint8(1))
	f.Add([]byte(`\x`), uint8(2))
	f.Add([]byte("\x01"), uint8(2))
	f.Fuzz(func(t *testing.T, lit []byte, chunk uint8) {
		body := append(append([]byte(`{"result":"`), lit...), `","exitCode":3}`...)
		wantCode, wantText, werr := wantStdlib(body)
		code, text, err := decodeAll(&chunkReader{data: body, sizes: []int{int(chunk%16) + 1, 1, int(chunk%5) + 2}})
		if werr != nil {
			if err == nil {
				t.Fatalf("encoding/json refused %q (%v), the decoder did not", body, werr)
			}
			return
		}
		if err != nil {
			t.Fatalf("decoder refused %q: %v", body, err)
		}
		if code != wantCode || text != wantText {
			t.Fatalf("%q: got %d %q, want %d %q", body, code, text, wantCode, wantText)
		}
	})
}

func TestOneShotDecodeShapes(t *testing.T) {
	t.Parallel()
	ok := []struct {
		name, body string
		code       int
		text       string
	}{
		{"exitCode after result", `{"result":"hi\n","exitCode":4}`, 4, "hi\n"},
		{"whitespace everywhere", " \n{ \"exitCode\" :\t2 ,\r\n \"result\" : \"x\" } ", 2, "x"},
		{"unknown members skipped", `{"pid":12,"result":"r","meta":{"a":[1,2.5e3,-0,{"}":"]\""}],"b":null,"c":true,"d":false,"e":""},"exitCode":0,"list":[[],{}],"s":"\"}"}`, 0, "r"},
		{"result null", `{"exitCode":1,"result":null}`, 1, ""},
		{"result absent", `{"exitCode":1}`, 1, ""},
		{"exitCode null then set", `{"exitCode":null,"exitCode":5}`, 5, ""},
		{"last exitCode wins", `{"exitCode":1,"result":"","exitCode":2}`, 2, ""},
		{"names match regardless of case", `{"ExitCode":3,"RESULT":"up"}`, 3, "up"},
		{"long unknown name", `{"` + strings.Repeat("k", 500) + `":1,"exitCode":9}`, 9, ""},
		{"trailing data after the object is not read", `{"exitCode":0,"result":"a"} garbage`, 0, "a"},
	}
	for _, c := range ok {
		code, text, err := decodeAll(iotest.OneByteReader(strings.NewReader(c.body)))
		require.NoError(t, err, c.name)
		assert.Equal(t, c.code, code, c.name)
		assert.Equal(t, c.text, text, c.name)
		if !strings.HasSuffix(c.body, "garbage") && !strings.Contains(c.name, "case") {
			var v ExecuteResponse
			require.NoError(t, json.Unmarshal([]byte(c.body), &v), c.name)
			assert.Equal(t, ExecuteResponse{ExitCode: code, Result: text}, v, c.name)
		}
	}
	bad := []struct{ name, body, msg string }{
		{"empty", ``, "ended inside"},
		{"cut inside the result", `{"exitCode":0,"result":"abc`, "ended inside"},
		{"cut inside an escape", `{"exitCode":0,"result":"ab\u00`, "ended inside"},
		{"cut after the exit code", `{"exitCode":0`, "ended inside"},
		{"cut before the close", `{"exitCode":0,"result":""`, "ended inside"},
		{"no exitCode", `{"result":"x"}`, "no exitCode"},
		{"empty object", `{}`, "no exitCode"},
		{"fractional exitCode", `{"exitCode":1.5}`, "not an integer"},
		{"exponent exitCode", `{"exitCode":1e2}`, "not an integer"},
		{"huge exitCode", `{"exitCode":123456789012345678901234567890}`, "not an integer"},
		{"string exitCode", `{"exitCode":"0"}`, "invalid number"},
		{"number result", `{"exitCode":0,"result":5}`, "not a string"},
		{"duplicate result", `{"exitCode":0,"result":"a","result":"b"}`, "duplicate"},
		{"bad escape", `{"exitCode":0,"result":"\x"}`, "invalid escape"},
		{"bad unicode escape", `{"exitCode":0,"result":"\u12G4"}`, `invalid \u escape`},
		{"raw control character", "{\"exitCode\":0,\"result\":\"a\x01\"}", "control character"},
		{"not an object", `["exitCode",0]`, "expected '{'"},
		{"missing colon", `{"exitCode" 0}`, "expected ':'"},
		{"missing comma", `{"exitCode":0 "result":""}`, "expected ',' or '}'"},
		{"bad literal", `{"x":nul,"exitCode":0}`, "invalid literal"},
		{"bad unknown value", `{"x":[1,,2],"exitCode":0}`, "unexpected"},
		{"unclosed unknown value", `{"x":{"a":[1,2`, "ended inside"},
		{"too deep", `{"x":` + strings.Repeat("[", maxSkipDepth+1), "nested too deeply"},
	}
	for _, c := range bad {
		_, _, err := decodeAll(iotest.OneByteReader(strings.NewReader(c.body)))
		var se *jsonSyntaxError
		require.ErrorAs(t, err, &se, c.name)
		assert.Contains(t, err.Error(), c.msg, c.name)
	}
	// A reader failure is reported as such, not as bad JSON.
	_, _, err := decodeAll(io.MultiReader(strings.NewReader(`{"exitCode":0,"result":"ab`), iotest.ErrReader(io.ErrUnexpectedEOF)))
	var rf *readFailure
	require.ErrorAs(t, err, &rf)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

// TestExecuteStreamLargeAnswer: an answer far beyond the client's JSON
// limit is read through, in bounded pieces, with its exit code after the
// result; the callback's error stops the read and is returned as is.
func TestExecuteStreamLargeAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, WithRetryPolicy(RetryPolicy{MaxRetries: -1}))
	f.c.jsonLimit = 1 << 20
	const lines = 40000
	line := strings.Repeat("y", 99) + `\n`
	f.handle("POST /toolbox/sb-1/process/execute", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"result":"`)
		for range lines {
			_, _ = io.WriteString(w, line)
		}
		_, _ = io.WriteString(w, `","exitCode":3}`)
	})
	// The buffered form refuses it (it is over the limit)...
	_, _, err := f.c.Toolbox.Execute(t.Context(), f.ref, &ExecuteRequest{Command: "big"})
	require.ErrorIs(t, err, ErrMalformedResponse)
	// ...the streamed form reads it.
	var n, biggest int
	code, _, err := f.c.Toolbox.ExecuteStream(t.Context(), f.ref, &ExecuteRequest{Command: "big"}, func(p []byte) error {
		n += len(p)
		biggest = max(biggest, len(p))
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 3, code)
	assert.Equal(t, lines*100, n)
	assert.LessOrEqual(t, biggest, 2*oneShotFlush)

	stop := errors.New("enough")
	calls := 0
	_, _, err = f.c.Toolbox.ExecuteStream(t.Context(), f.ref, &ExecuteRequest{Command: "big"}, func(p []byte) error { calls++; return stop })
	require.ErrorIs(t, err, stop)
	assert.Equal(t, 1, calls)
}

// TestExecuteStreamCutAnswer: a connection lost in the middle of the
// answer is a transport error; an answer that is complete on the wire but
// ends inside the object is a malformed answer. Neither is taken for a
// result.
func TestExecuteStreamCutAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, WithRetryPolicy(RetryPolicy{MaxRetries: -1}))
	var cut atomic.Bool
	cut.Store(true)
	f.handle("POST /toolbox/sb-1/process/execute", func(w http.ResponseWriter, r *http.Request) {
		if !cut.Load() {
			_, _ = io.WriteString(w, `{"exitCode":0,"result":"partial`)
			return
		}
		// Promise more than is sent, then drop the connection.
		w.Header().Set("Content-Length", "100000")
		_, _ = io.WriteString(w, `{"exitCode":0,"result":"partial`)
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.(*net.TCPConn).SetLinger(0)
			_ = conn.Close()
		}
	})
	var got strings.Builder
	_, _, err := f.c.Toolbox.ExecuteStream(t.Context(), f.ref, &ExecuteRequest{Command: "x"}, func(p []byte) error { got.Write(p); return nil })
	var te *TransportError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "/process/execute", te.Route)

	cut.Store(false)
	_, _, err = f.c.Toolbox.ExecuteStream(t.Context(), f.ref, &ExecuteRequest{Command: "x"}, func(p []byte) error { return nil })
	require.ErrorIs(t, err, ErrMalformedResponse)
	assert.Contains(t, err.Error(), "ended inside the JSON object")

	_, _, err = f.c.Toolbox.ExecuteStream(t.Context(), f.ref, &ExecuteRequest{Command: " "}, func(p []byte) error { return nil })
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, _, err = f.c.Toolbox.ExecuteStream(t.Context(), f.ref, &ExecuteRequest{Command: "x"}, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// BenchmarkOneShotAnswer8MiB decodes the same 8 MiB one-shot answer (lines
// of 1 KiB, served from memory by a loopback server) through the buffered
// Execute (encoding/json, limit raised) and through ExecuteStream
// collecting the text, in the same run: stream/buffered is the cost of
// reading the answer as a stream.
func BenchmarkOneShotAnswer8MiB(b *testing.B) {
	text := strings.Repeat(strings.Repeat("a", 1023)+"\n", 8192)
	body, err := json.Marshal(ExecuteResponse{ExitCode: 0, Result: text})
	require.NoError(b, err)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /toolbox/{id}/process/execute", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	c, err := NewClient(WithAPIURL(srv.URL+"/api"), WithAPIKey(testKey))
	require.NoError(b, err)
	c.jsonLimit = 1 << 30
	ref := SandboxRef{ID: "perf", ToolboxProxyURL: srv.URL + "/toolbox"}
	req := &ExecuteRequest{Command: "x"}
	b.Run("buffered", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			res, _, err := c.Toolbox.Execute(b.Context(), ref, req)
			if err != nil || len(res.Result) != len(text) {
				b.Fatal(err)
			}
		}
	})
	b.Run("stream", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			var sb strings.Builder
			_, _, err := c.Toolbox.ExecuteStream(b.Context(), ref, req, func(p []byte) error { sb.Write(p); return nil })
			if err != nil || sb.Len() != len(text) {
				b.Fatal(err)
			}
		}
	})
}

// plainPrefix agrees with the byte table for every byte value at every
// position of a word and across the word boundary.
func TestPlainPrefixMatchesTheTable(t *testing.T) {
	for c := range 256 {
		for pos := range 17 {
			b := bytes.Repeat([]byte{'a'}, 17)
			b[pos] = byte(c)
			want := 17
			if !plainJSON[c] {
				want = pos
			}
			require.Equal(t, want, plainPrefix(b), "byte %#02x at %d", c, pos)
		}
	}
}

// BenchmarkOneShotDecode8MiB is the decoder alone on the 8 MiB answer
// (lines of 1 KiB) held in memory, next to encoding/json decoding the same
// answer in the same run: decoder-MB/s ÷ json-MB/s is the figure to track.
//
//	go test -run '^$' -bench OneShotDecode8MiB -benchtime 20x -count 3 ./daytona/
func BenchmarkOneShotDecode8MiB(b *testing.B) {
	text := strings.Repeat(strings.Repeat("a", 1023)+"\n", 8192)
	answer, err := json.Marshal(ExecuteResponse{ExitCode: 0, Result: text})
	require.NoError(b, err)
	var jsonTook, decTook time.Duration
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		start := time.Now()
		var res ExecuteResponse
		if err := json.Unmarshal(answer, &res); err != nil || len(res.Result) != len(text) {
			b.Fatal(err)
		}
		jsonTook += time.Since(start)
		start = time.Now()
		n := 0
		if _, err := decodeOneShot(bytes.NewReader(answer), func(p []byte) error { n += len(p); return nil }); err != nil || n != len(text) {
			b.Fatal(err)
		}
		decTook += time.Since(start)
	}
	mbs := func(d time.Duration) float64 { return float64(len(text)) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(mbs(jsonTook), "json-MB/s")
	b.ReportMetric(mbs(decTook), "decoder-MB/s")
	b.ReportMetric(jsonTook.Seconds()/decTook.Seconds(), "decoder/json")
}
