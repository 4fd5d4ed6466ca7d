package daytonatest

import (
	"encoding/binary"
	"io"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"
)

// A one-shot execute answers {"exitCode":N,"result":"<all output>"} once
// the command has exited, so the whole output is held until then. It used
// to be collected in a bytes.Buffer, copied into a string and encoded with
// json.Marshal: for 8 MiB of output that was three growing 8-16 MiB
// buffers (each step copied, each fresh allocation zeroed) and most of the
// emulator's time per command. The output is now kept in pooled chunks
// read straight from the pipe and escaped piece by piece onto the reply,
// byte for byte what json.Marshal wrote (keys in its sorted order, HTML
// characters escaped, invalid UTF-8 as \ufffd), still without a
// Content-Length, so the reply's bytes and framing are unchanged.

// outputChunk is the size of one piece of held output (and of the escaped
// pieces written to the reply).
const outputChunk = 256 << 10

var chunkPool = sync.Pool{New: func() any { return new([outputChunk]byte) }}

// outputBuffer holds a command's combined output as a list of pooled
// chunks. os/exec copies the pipe into it through ReadFrom (no
// intermediate buffer). The lock matters only when Wait gave up on the
// copy (WaitDelay): the copying goroutine may then still be finishing a
// read while the handler takes the output.
type outputBuffer struct {
	mu     sync.Mutex
	chunks []*[outputChunk]byte
	last   int  // bytes used in the last chunk
	taken  bool // take ran: later output is discarded, chunks are no longer ours
}

// ReadFrom reads r to its end into the chunks.
func (o *outputBuffer) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	for {
		o.mu.Lock()
		if o.taken {
			o.mu.Unlock()
			return total, io.ErrClosedPipe
		}
		if len(o.chunks) == 0 || o.last == outputChunk {
			o.chunks = append(o.chunks, chunkPool.Get().(*[outputChunk]byte))
			o.last = 0
		}
		c := o.chunks[len(o.chunks)-1]
		n, err := r.Read(c[o.last:])
		o.last += n
		o.mu.Unlock()
		total += int64(n)
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// Write is for writers that do not go through ReadFrom.
func (o *outputBuffer) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.taken {
		return 0, io.ErrClosedPipe
	}
	n := len(p)
	for len(p) > 0 {
		if len(o.chunks) == 0 || o.last == outputChunk {
			o.chunks = append(o.chunks, chunkPool.Get().(*[outputChunk]byte))
			o.last = 0
		}
		k := copy(o.chunks[len(o.chunks)-1][o.last:], p)
		o.last += k
		p = p[k:]
	}
	return n, nil
}

// take returns the output as slices of the chunks and the function that
// gives the chunks back to the pool once the slices are no longer used.
// Output written after take is dropped, as it was when it came after the
// answer's snapshot.
func (o *outputBuffer) take() ([][]byte, func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.taken = true
	parts := make([][]byte, len(o.chunks))
	for i, c := range o.chunks {
		parts[i] = c[:]
		if i == len(o.chunks)-1 {
			parts[i] = c[:o.last]
		}
	}
	chunks := o.chunks
	o.chunks = nil
	return parts, func() {
		for _, c := range chunks {
			chunkPool.Put(c)
		}
	}
}

// writeExecuteAnswer writes the one-shot answer for exit code code and the
// output parts, as writeJSON would write
// map[string]any{"exitCode": code, "result": string(concatenated parts)}.
func writeExecuteAnswer(w http.ResponseWriter, code int, parts [][]byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	e := jsonStringWriter{w: w, buf: make([]byte, 0, outputChunk+64)}
	e.buf = append(e.buf, `{"exitCode":`...)
	e.buf = strconv.AppendInt(e.buf, int64(code), 10)
	e.buf = append(e.buf, `,"result":"`...)
	for _, p := range parts {
		if e.escape(p, false) != nil {
			return
		}
	}
	if e.escape(nil, true) != nil {
		return
	}
	e.buf = append(e.buf, `"}`...)
	_, _ = w.Write(e.buf)
}

// jsonEscapes is what encoding/json writes for each ASCII byte inside a
// string, and jsonPlain the bytes it writes as themselves: escaped are the
// control characters (the five with short forms, the rest as \u00XX), the
// quote, the backslash, and <, > and & (json.Marshal escapes them for
// HTML).
var jsonEscapes, jsonPlain = func() (t [utf8.RuneSelf]string, plain [utf8.RuneSelf]bool) {
	const hex = "0123456789abcdef"
	for b := range 0x20 {
		t[b] = `\u00` + string(hex[b>>4]) + string(hex[b&0xf])
	}
	for b, s := range map[byte]string{'\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`,
		'"': `\"`, '\\': `\\`, '<': `\u003c`, '>': `\u003e`, '&': `\u0026`} {
		t[b] = s
	}
	for b := range t {
		plain[b] = t[b] == ""
	}
	return t, plain
}()

// jsonStringWriter escapes the inside of a JSON string in pieces onto w,
// through buf, which it writes whenever it holds outputChunk bytes. A
// UTF-8 sequence may be split between two pieces: its start is kept in
// carry until the next piece completes it, so the result is the same as
// escaping the concatenation at once.
type jsonStringWriter struct {
	w     io.Writer
	buf   []byte
	carry [utf8.UTFMax]byte
	nc    int
}

// escape appends p escaped; final says no more bytes follow (an
// incomplete sequence at the end is then invalid UTF-8).
func (e *jsonStringWriter) escape(p []byte, final bool) error {
	for e.nc > 0 && (len(p) > 0 || final) {
		// Complete the carried sequence from p. A byte that cannot
		// continue it makes its lead byte invalid, as in one pass.
		var tmp [utf8.UTFMax]byte
		n := copy(tmp[:], e.carry[:e.nc])
		k := copy(tmp[n:], p)
		if !final && !utf8.FullRune(tmp[:n+k]) {
			// Still incomplete: p is shorter than the sequence's rest.
			e.nc += copy(e.carry[e.nc:], p)
			return nil
		}
		r, size := utf8.DecodeRune(tmp[:n+k])
		e.appendRune(tmp[:size], r, size)
		if size >= n {
			p = p[size-n:]
			e.nc = 0
		} else {
			// The lead byte alone was invalid: the carried bytes after it
			// are decoded anew.
			e.nc = copy(e.carry[:], e.carry[size:e.nc])
		}
	}
	start := 0
	for i := 0; i < len(p); {
		if b := p[i]; b < utf8.RuneSelf {
			if jsonPlain[b] {
				i += plainRun(p[i:])
				if len(e.buf)+i-start >= outputChunk {
					e.buf = append(e.buf, p[start:i]...)
					start = i
					if err := e.flushFull(); err != nil {
						return err
					}
				}
				continue
			}
			e.buf = append(e.buf, p[start:i]...)
			e.buf = append(e.buf, jsonEscapes[b]...)
			i++
			start = i
		} else {
			if !final && !utf8.FullRune(p[i:]) {
				e.buf = append(e.buf, p[start:i]...)
				e.nc = copy(e.carry[:], p[i:])
				return e.flushFull()
			}
			r, size := utf8.DecodeRune(p[i:])
			if size == 1 || r == '\u2028' || r == '\u2029' {
				e.buf = append(e.buf, p[start:i]...)
				e.appendRune(p[i:i+size], r, size)
				start = i + size
			}
			i += size
		}
		if len(e.buf)+i-start >= outputChunk {
			e.buf = append(e.buf, p[start:i]...)
			start = i
			if err := e.flushFull(); err != nil {
				return err
			}
		}
	}
	e.buf = append(e.buf, p[start:]...)
	return e.flushFull()
}

// Every byte lane of a 64-bit word, for testing 8 bytes at once.
const (
	lanes1  = 0x0101010101010101
	lanesHi = 0x8080808080808080
)

// hasByteBelow reports whether a byte of w is below c (c <= 0x80).
func hasByteBelow(w uint64, c byte) bool { return (w-lanes1*uint64(c))&^w&lanesHi != 0 }

// hasByteEqual reports whether a byte of w equals c.
func hasByteEqual(w uint64, c byte) bool { return hasByteBelow(w^lanes1*uint64(c), 1) }

// plainRun is the length of the run of jsonPlain bytes that starts p (at
// least 1: p[0] is one). Output is mostly long plain runs; testing eight
// bytes a word at a time is several times faster than the table alone.
func plainRun(p []byte) int {
	i := 1
	for ; i+8 <= len(p); i += 8 {
		w := binary.LittleEndian.Uint64(p[i:])
		if w&lanesHi != 0 || hasByteBelow(w, 0x20) || hasByteEqual(w, '"') || hasByteEqual(w, '\\') ||
			hasByteEqual(w, '<') || hasByteEqual(w, '>') || hasByteEqual(w, '&') {
			break
		}
	}
	for i < len(p) && p[i] < utf8.RuneSelf && jsonPlain[p[i]] {
		i++
	}
	return i
}

// appendRune appends one non-ASCII sequence as encoding/json writes it:
// invalid UTF-8 (size 1) as \ufffd, U+2028 and U+2029 escaped, any other
// rune as itself.
func (e *jsonStringWriter) appendRune(seq []byte, r rune, size int) {
	switch {
	case r == utf8.RuneError && size == 1:
		e.buf = append(e.buf, `\ufffd`...)
	case r == '\u2028' || r == '\u2029':
		e.buf = append(e.buf, `\u202`...)
		e.buf = append(e.buf, "0123456789abcdef"[r&0xf])
	default:
		e.buf = append(e.buf, seq...)
	}
}

// flushFull writes buf once it holds outputChunk bytes, so the reply goes
// out in a few large writes; the caller writes the rest at the end.
func (e *jsonStringWriter) flushFull() error {
	if len(e.buf) < outputChunk {
		return nil
	}
	_, err := e.w.Write(e.buf)
	e.buf = e.buf[:0]
	return err
}
