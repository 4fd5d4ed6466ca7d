package rpc

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// readOne reads the first line of in through a stream of frame limit max.
func readOne(t *testing.T, in string, max int) ([]byte, error) {
	t.Helper()
	s := newStream(strings.NewReader(in), &bytes.Buffer{}, max, slog.New(slog.DiscardHandler))
	return s.readLine()
}

// Frame limits at the limit and one past (docs/testing.md, "Limits at the
// limit"). The limit counts a line's content: the newline that ends it is
// not content, and neither is the lack of one at the end of the input.
// (Planted: the newline counted as content.)
func TestFrameLimitAtTheLimit(t *testing.T) {
	const max = 64
	frame := func(n int) string { // a JSON object of exactly n bytes
		return `{"p":"` + strings.Repeat("x", n-8) + `"}`
	}
	require.Len(t, frame(max), max)
	// bufio's smallest buffer is 16 bytes: also cross a buffer boundary at
	// the limit, where the newline arrives in a chunk of its own.
	const big = 4096 + 1
	for _, c := range []struct {
		name string
		in   string
		max  int
		ok   bool
	}{
		{"exactly max and a newline", frame(max) + "\n", max, true},
		{"max+1 and a newline", frame(max+1) + "\n", max, false},
		{"exactly max, unterminated at the end", frame(max), max, true},
		{"max+1, unterminated at the end", frame(max + 1), max, false},
		{"exactly max and CRLF", frame(max) + "\r\n", max + 1, true},
		{"exactly max across the read buffer", frame(big) + "\n", big, true},
		{"max+1 across the read buffer", frame(big+1) + "\n", big, false},
		{"max+1 unterminated across the read buffer", frame(big + 1), big, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			line, err := readOne(t, c.in, c.max)
			if c.ok {
				require.NoError(t, err)
				require.Equal(t, strings.TrimSpace(c.in), string(line))
				return
			}
			var tl *errLineTooLong
			require.True(t, errors.As(err, &tl), "want an over-limit error, got %v", err)
			require.Nil(t, line)
		})
	}
}

// A read error inside an over-limit line is the read error, not the
// over-limit one: the stream is broken, not the frame. An over-limit line
// the input ends inside is over the limit.
func TestReadErrorInsideAnOverLimitLine(t *testing.T) {
	broken := errors.New("pipe broken")
	in := io.MultiReader(strings.NewReader(strings.Repeat("x", 200)), iotest.ErrReader(broken))
	s := newStream(in, &bytes.Buffer{}, 64, slog.New(slog.DiscardHandler))
	_, err := s.readLine()
	require.ErrorIs(t, err, broken)
	var tl *errLineTooLong
	require.False(t, errors.As(err, &tl))

	_, err = readOne(t, strings.Repeat("x", 200), 64)
	require.True(t, errors.As(err, &tl), "want an over-limit error, got %v", err)

	// Under the limit too: what came before the error is no line.
	s = newStream(io.MultiReader(strings.NewReader(`{"id":1`), iotest.ErrReader(broken)), &bytes.Buffer{}, 64, slog.New(slog.DiscardHandler))
	line, err := s.readLine()
	require.ErrorIs(t, err, broken)
	require.Nil(t, line)
}

// The id of an over-limit line is sniffed only when it is one the
// protocol allows (a string or a number) and at the top level.
func TestSniffIDTakesOnlyAValidTopLevelID(t *testing.T) {
	for prefix, want := range map[string]string{
		`{"jsonrpc":"2.0","id":7,"params":{"pad":"`:      `7`,
		`{"id":"a-1","params":`:                          `"a-1"`,
		`{"id":{"x":1},"params":{"pad":"`:                ``,
		`{"id":[1],"params":`:                            ``,
		`{"id":null,"params":`:                           ``,
		`{"id":true,"params":`:                           ``,
		`{"params":{"id":9},"pad":"`:                     ``,
		`["id",9,`:                                       ``,
		`{"method":"x","params":{"pad":"` + "xxxxxxxxxx": ``,
	} {
		require.Equal(t, want, string(sniffID([]byte(prefix))), prefix)
	}
}

// A frame the worker writes may be at most maxFrame bytes, its newline
// included (what the host reads).
func TestWrittenFrameLimitAtTheLimit(t *testing.T) {
	const max = 64
	var out bytes.Buffer
	s := newStream(strings.NewReader(""), &out, max, slog.New(slog.DiscardHandler))
	n, err := frameWriter{s}.Write([]byte(strings.Repeat("a", max-1) + "\n"))
	require.NoError(t, err)
	require.Equal(t, max, n)
	require.Equal(t, max, out.Len())
	_, err = frameWriter{s}.Write([]byte(strings.Repeat("a", max) + "\n"))
	var tl *errFrameTooLarge
	require.ErrorAs(t, err, &tl)
	require.Equal(t, max, out.Len(), "nothing of the refused frame is written")
}

// An error message of exactly MaxErrorMessage bytes leaves unchanged; one
// byte more is cut to the limit and marked.
func TestErrorMessageCapAtTheLimit(t *testing.T) {
	at := strings.Repeat("m", MaxErrorMessage)
	require.Equal(t, at, wireError(errors.New(at)).Message)
	over := wireError(errors.New(at + "x")).Message
	require.Equal(t, at+"…", over)
}

// An execute.log chunk holds at most MaxLogChunkChars UTF-16 units.
func TestLogChunkAtTheLimit(t *testing.T) {
	at := strings.Repeat("a", MaxLogChunkChars)
	head, units := splitChars(at, MaxLogChunkChars)
	require.Equal(t, at, head, "exactly the limit: one chunk")
	require.Equal(t, MaxLogChunkChars, units)
	head, units = splitChars(at+"b", MaxLogChunkChars)
	require.Equal(t, at, head, "one more: a second chunk")
	require.Equal(t, MaxLogChunkChars, units)
	// An astral rune (2 units) that would straddle the limit goes to the
	// next chunk.
	head, units = splitChars(strings.Repeat("a", MaxLogChunkChars-1)+"😀", MaxLogChunkChars)
	require.Len(t, head, MaxLogChunkChars-1)
	require.Equal(t, MaxLogChunkChars-1, units)
}
