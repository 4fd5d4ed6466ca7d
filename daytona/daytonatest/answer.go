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
// emulator's time per command. The output is now escaped as it comes out
// of the pipe, while the command runs, into pooled chunks that are written
// to the reply as they are once it has exited: byte for byte what
// json.Marshal wrote (keys in its sorted order, HTML characters escaped,
// invalid UTF-8 as \ufffd), still without a Content-Length, so the reply's
// bytes and framing are unchanged.

const (
	// outputChunk is the size of one chunk of escaped output, and so of
	// one write of the reply.
	outputChunk = 256 << 10
	// pipeRead is the most read from the output pipe at once (a pipe
	// holds 64 KiB by default).
	pipeRead = 64 << 10
)

var (
	chunkPool = sync.Pool{New: func() any { b := make([]byte, 0, outputChunk+64); return &b }}
	readPool  = sync.Pool{New: func() any { return new([pipeRead]byte) }}
)

// outputBuffer holds a command's combined output, escaped as the inside of
// a JSON string. os/exec copies the pipe into it through ReadFrom. The
// lock matters only when Wait gave up on the copy (WaitDelay): the copying
// goroutine may then still be finishing a write while the handler takes
// the output.
type outputBuffer struct {
	mu    sync.Mutex
	enc   jsonStringWriter
	taken bool // take ran: later output is dropped, the chunks are no longer ours
}

// ReadFrom reads r to its end into the buffer.
func (o *outputBuffer) ReadFrom(r io.Reader) (int64, error) {
	scratch := readPool.Get().(*[pipeRead]byte)
	defer readPool.Put(scratch)
	var total int64
	for {
		n, err := r.Read(scratch[:])
		total += int64(n)
		if n > 0 {
			if _, werr := o.Write(scratch[:n]); werr != nil {
				return total, werr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// Write escapes p onto the held output.
func (o *outputBuffer) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.taken {
		return 0, io.ErrClosedPipe
	}
	o.enc.escape(p, false)
	return len(p), nil
}

// take returns the escaped output as chunks and the function that gives
// them back to the pool once they are written. Output written after take
// is dropped, as it was when it came after the answer's snapshot.
func (o *outputBuffer) take() ([][]byte, func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.taken = true
	o.enc.escape(nil, true)
	parts := append(o.enc.full, o.enc.buf)
	o.enc = jsonStringWriter{}
	return parts, func() {
		for _, b := range parts {
			b = b[:0]
			chunkPool.Put(&b)
		}
	}
}

// writeExecuteAnswer writes the one-shot answer for exit code code and the
// escaped output parts (from take): what writeJSON wrote for
// map[string]any{"exitCode": code, "result": output}.
func writeExecuteAnswer(w http.ResponseWriter, code int, parts [][]byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	head := strconv.AppendInt([]byte(`{"exitCode":`), int64(code), 10)
	if _, err := w.Write(append(head, `,"result":"`...)); err != nil {
		return
	}
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			return
		}
	}
	_, _ = w.Write([]byte(`"}`))
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

// jsonStringWriter escapes the inside of a JSON string given in pieces
// into buf, which moves to full whenever it holds outputChunk bytes. A
// UTF-8 sequence may be split between two pieces: its start is kept in
// carry until the next piece completes it, so the result is the same as
// escaping the concatenation at once.
type jsonStringWriter struct {
	full  [][]byte
	buf   []byte
	carry [utf8.UTFMax]byte
	nc    int
}

// escape appends p escaped; final says no more bytes follow (an
// incomplete sequence at the end is then invalid UTF-8).
func (e *jsonStringWriter) escape(p []byte, final bool) {
	if e.buf == nil {
		e.buf = *chunkPool.Get().(*[]byte)
	}
	for e.nc > 0 && (len(p) > 0 || final) {
		// Complete the carried sequence from p. A byte that cannot
		// continue it makes its lead byte invalid, as in one pass.
		var tmp [utf8.UTFMax]byte
		n := copy(tmp[:], e.carry[:e.nc])
		k := copy(tmp[n:], p)
		if !final && !utf8.FullRune(tmp[:n+k]) {
			// Still incomplete: p is shorter than the sequence's rest.
			e.nc += copy(e.carry[e.nc:], p)
			return
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
				// The run stops where buf would be full, so buf keeps its size.
				room := outputChunk - len(e.buf) - (i - start)
				i += plainRun(p[i:min(len(p), i+max(room, 1))])
				if len(e.buf)+i-start >= outputChunk {
					e.buf = append(e.buf, p[start:i]...)
					start = i
					e.flushFull()
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
				e.flushFull()
				return
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
			e.flushFull()
		}
	}
	e.buf = append(e.buf, p[start:]...)
	e.flushFull()
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

// flushFull moves buf to full once it holds outputChunk bytes, so the
// reply goes out in a few large writes.
func (e *jsonStringWriter) flushFull() {
	if len(e.buf) >= outputChunk {
		e.full = append(e.full, e.buf)
		e.buf = *chunkPool.Get().(*[]byte)
	}
}
