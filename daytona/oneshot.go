package daytona

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The one-shot execute answer is one JSON object, {"exitCode": n,
// "result": "<everything the command printed>"}, so its size is the
// command's output: it cannot be read whole through a size limit without
// failing commands that print a lot (after they ran). oneShotDecoder walks
// that object with bounded memory: the result string is unescaped as it is
// read and handed on in pieces, other members are skipped without being
// kept. The text it produces is byte for byte what encoding/json would
// decode the same string to (invalid UTF-8 becomes U+FFFD per byte, a lone
// or unpaired UTF-16 surrogate escape becomes U+FFFD).

const (
	// oneShotReadBuf is the read buffer; oneShotFlush the size of the
	// decoded pieces handed to the callback.
	oneShotReadBuf = 64 << 10
	oneShotFlush   = 64 << 10
	// maxSkipDepth bounds the nesting of a skipped unknown member (the
	// limit encoding/json applies).
	maxSkipDepth = 10000
	// maxKeyLen bounds a member name that is kept for matching; longer
	// names cannot be ours and are skipped unread.
	maxKeyLen = 64
)

// errDuplicateResult: a second "result" member cannot replace text that
// has already been handed on.
var errDuplicateResult = errors.New("duplicate result member")

// jsonSyntaxError is a malformed answer at a byte offset.
type jsonSyntaxError struct {
	msg string
	off int64
}

func (e *jsonSyntaxError) Error() string { return fmt.Sprintf("%s at byte %d", e.msg, e.off) }

// readFailure is an error of the underlying reader (not of the JSON).
type readFailure struct{ err error }

func (e *readFailure) Error() string { return e.err.Error() }
func (e *readFailure) Unwrap() error { return e.err }

// isJSONSpace is JSON's insignificant whitespace.
func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// plainJSON marks the bytes a JSON string carries as themselves: not '"',
// not '\\', not a control character, ASCII.
var plainJSON = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// Bytes of every lane of a 64-bit word, for scanning 8 bytes at once.
const (
	lanes01 = 0x0101010101010101
	lanes80 = 0x8080808080808080
)

// plainPrefix is the length of the run of plain bytes (plainJSON) that
// starts b. Eight bytes are tested at a time while none of them can be
// special: output is mostly long plain runs, and a byte-at-a-time table
// lookup was the decoder's own main cost.
func plainPrefix(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		// Exact tests of "some byte is": >= 0x80, < 0x20, '"', '\\'.
		ascii := w & lanes80
		ctl := (w - 0x20*lanes01) &^ w & lanes80
		quote := (w ^ '"'*lanes01 - lanes01) &^ (w ^ '"'*lanes01) & lanes80
		slash := (w ^ '\\'*lanes01 - lanes01) &^ (w ^ '\\'*lanes01) & lanes80
		if ascii|ctl|quote|slash != 0 {
			break
		}
	}
	for i < len(b) && plainJSON[b[i]] {
		i++
	}
	return i
}

type oneShotDecoder struct {
	r        io.Reader
	buf      []byte
	pos, end int
	base     int64 // stream offset of buf[0]
	rerr     error // sticky read error (io.EOF at the end)
	out      []byte
	emit     func([]byte) error
}

// decodeOneShot reads one answer from r, passing the unescaped result text
// to emit in pieces (valid only during the call), and returns the exit
// code. The answer must hold an integer exitCode; result may be absent or
// null (no output); other members are ignored; nothing after the object is
// read. Member names match as encoding/json matches them (exactly, else
// ignoring case).
func decodeOneShot(r io.Reader, emit func([]byte) error) (int, error) {
	d := &oneShotDecoder{r: r, buf: make([]byte, oneShotReadBuf), emit: emit}
	return d.object()
}

func (d *oneShotDecoder) off() int64 { return d.base + int64(d.pos) }

func (d *oneShotDecoder) syntax(msg string) error {
	return &jsonSyntaxError{msg: msg, off: d.off()}
}

// fill makes at least need bytes available at pos, if the stream holds
// them; it reports whether it could.
func (d *oneShotDecoder) fill(need int) bool {
	for d.end-d.pos < need {
		if d.rerr != nil {
			return false
		}
		if d.pos > 0 {
			n := copy(d.buf, d.buf[d.pos:d.end])
			d.base += int64(d.pos)
			d.pos, d.end = 0, n
		}
		n, err := d.r.Read(d.buf[d.end:])
		d.end += n
		if err != nil {
			d.rerr = err
		}
	}
	return true
}

// unexpectedEnd is the error for a stream that ended inside the object:
// the reader's own error, or a syntax error at a clean EOF.
func (d *oneShotDecoder) unexpectedEnd() error {
	if d.rerr != nil && !errors.Is(d.rerr, io.EOF) {
		return &readFailure{err: d.rerr}
	}
	return d.syntax("answer ended inside the JSON object")
}

// next skips whitespace and returns the next byte without consuming it.
func (d *oneShotDecoder) next() (byte, error) {
	for {
		for d.pos < d.end {
			if c := d.buf[d.pos]; !isJSONSpace(c) {
				return c, nil
			}
			d.pos++
		}
		if !d.fill(1) {
			return 0, d.unexpectedEnd()
		}
	}
}

func (d *oneShotDecoder) expect(c byte) error {
	got, err := d.next()
	if err != nil {
		return err
	}
	if got != c {
		return d.syntax(fmt.Sprintf("expected %q, found %q", c, got))
	}
	d.pos++
	return nil
}

func (d *oneShotDecoder) object() (int, error) {
	if err := d.expect('{'); err != nil {
		return 0, err
	}
	code, haveCode, haveResult := 0, false, false
	c, err := d.next()
	if err != nil {
		return 0, err
	}
	if c == '}' {
		d.pos++
		return 0, d.syntax("answer has no exitCode")
	}
	for {
		if err := d.expect('"'); err != nil {
			return 0, err
		}
		key, err := d.key()
		if err != nil {
			return 0, err
		}
		if err := d.expect(':'); err != nil {
			return 0, err
		}
		c, err := d.next()
		if err != nil {
			return 0, err
		}
		switch {
		case matchKey(key, "result"):
			if haveResult {
				return 0, d.syntax(errDuplicateResult.Error())
			}
			haveResult = true
			switch c {
			case '"':
				d.pos++
				if err := d.str(true); err != nil {
					return 0, err
				}
			case 'n':
				if err := d.literal("null"); err != nil {
					return 0, err
				}
			default:
				return 0, d.syntax(fmt.Sprintf("result is not a string (found %q)", c))
			}
		case matchKey(key, "exitCode"):
			if c == 'n' { // null leaves the field as it is, as encoding/json does
				if err := d.literal("null"); err != nil {
					return 0, err
				}
				break
			}
			start := d.off()
			lit, err := d.number()
			if err != nil {
				return 0, err
			}
			n, perr := strconv.ParseInt(string(lit), 10, 0)
			if perr != nil {
				return 0, &jsonSyntaxError{msg: fmt.Sprintf("exitCode %.32q is not an integer", lit), off: start}
			}
			code, haveCode = int(n), true
		default:
			if err := d.skipValue(); err != nil {
				return 0, err
			}
		}
		c, err = d.next()
		if err != nil {
			return 0, err
		}
		d.pos++
		switch c {
		case ',':
			continue
		case '}':
			if !haveCode {
				return 0, d.syntax("answer has no exitCode")
			}
			return code, nil
		default:
			d.pos--
			return 0, d.syntax(fmt.Sprintf("expected ',' or '}', found %q", c))
		}
	}
}

// matchKey matches a member name as encoding/json matches a field name:
// exactly, else case-insensitively.
func matchKey(key []byte, name string) bool {
	return string(key) == name || bytes.EqualFold(key, []byte(name))
}

// key reads a member name (after its opening quote); a name longer than
// maxKeyLen is validated but returned empty (it matches nothing).
func (d *oneShotDecoder) key() ([]byte, error) {
	var k []byte
	long := false
	save := d.emit
	d.emit = func(p []byte) error {
		if !long && len(k)+len(p) <= maxKeyLen {
			k = append(k, p...)
		} else {
			long, k = true, nil
		}
		return nil
	}
	err := d.str(true)
	d.emit = save
	return k, err
}

// str decodes a string whose opening quote was consumed. With deliver the
// decoded text goes to d.emit in pieces of about oneShotFlush bytes;
// without, it is only validated.
func (d *oneShotDecoder) str(deliver bool) error {
	out := d.out[:0]
	defer func() { d.out = out[:0] }()
	flush := func() error {
		if deliver && len(out) > 0 {
			err := d.emit(out)
			out = out[:0]
			return err
		}
		out = out[:0]
		return nil
	}
	// ended hands on what was decoded before the answer broke off (it is
	// genuine output) and reports the break.
	ended := func() error {
		if err := flush(); err != nil {
			return err
		}
		return d.unexpectedEnd()
	}
	for {
		if d.pos == d.end && !d.fill(1) {
			return ended()
		}
		// Plain bytes are copied in one go; output is mostly such runs.
		b := d.buf[d.pos:d.end]
		i := plainPrefix(b)
		out = append(out, b[:i]...)
		d.pos += i
		if len(out) >= oneShotFlush {
			if err := flush(); err != nil {
				return err
			}
		}
		if i == len(b) {
			continue
		}
		switch c := b[i]; {
		case c == '"':
			d.pos++
			return flush()
		case c == '\\':
			if !d.fill(2) {
				return ended()
			}
			switch e := d.buf[d.pos+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				d.fill(6)
				rr := getu4(d.buf[d.pos:d.end])
				if rr < 0 {
					if d.end-d.pos < 6 && d.rerr != nil {
						return ended()
					}
					return d.syntax("invalid \\u escape in string")
				}
				d.pos += 6
				if utf16.IsSurrogate(rr) {
					// A pair only if the very next escape completes it;
					// otherwise this half alone becomes U+FFFD and what
					// follows is decoded on its own (encoding/json does
					// the same).
					d.fill(6)
					if dec := utf16.DecodeRune(rr, getu4(d.buf[d.pos:d.end])); dec != utf8.RuneError {
						d.pos += 6
						out = utf8.AppendRune(out, dec)
						continue
					}
					rr = utf8.RuneError
				}
				out = utf8.AppendRune(out, rr)
				continue
			default:
				return d.syntax(fmt.Sprintf("invalid escape %q in string", e))
			}
			d.pos += 2
		case c < 0x20:
			return d.syntax(fmt.Sprintf("control character %#02x in string", c))
		default:
			// Non-ASCII: decode one UTF-8 sequence, completing it across
			// reads first; an invalid byte becomes U+FFFD on its own.
			d.fill(utf8.UTFMax)
			r, size := utf8.DecodeRune(d.buf[d.pos:d.end])
			if r == utf8.RuneError && size == 1 {
				out = append(out, "\uFFFD"...)
			} else {
				out = append(out, d.buf[d.pos:d.pos+size]...)
			}
			d.pos += size
		}
	}
}

// getu4 decodes a \uXXXX escape at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// literal consumes one of true, false, null.
func (d *oneShotDecoder) literal(want string) error {
	if !d.fill(len(want)) {
		if d.end-d.pos < len(want) && string(d.buf[d.pos:d.end]) == want[:d.end-d.pos] {
			return d.unexpectedEnd()
		}
	}
	n := min(len(want), d.end-d.pos)
	if string(d.buf[d.pos:d.pos+n]) != want {
		return d.syntax(fmt.Sprintf("invalid literal, expected %s", want))
	}
	d.pos += len(want)
	return nil
}

// number consumes a JSON number and returns its text (valid until the
// next read). Numbers are short; a longer one than the buffer is refused.
func (d *oneShotDecoder) number() ([]byte, error) {
	const maxNumber = 4096
	d.fill(maxNumber)
	b := d.buf[d.pos:d.end]
	i := 0
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return nil, d.syntax("invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return nil, d.syntax("invalid number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return nil, d.syntax("invalid number")
		}
	}
	if i == len(b) {
		if d.rerr == nil {
			return nil, d.syntax("number too long")
		}
		return nil, d.unexpectedEnd() // a number cannot end the object
	}
	d.pos += i
	return b[:i], nil
}

// skipValue validates and discards one value of an unknown member without
// keeping it (nesting is counted, not recursed).
func (d *oneShotDecoder) skipValue() error {
	var stack []byte // open containers: '{' or '['
	for {
		c, err := d.next()
		if err != nil {
			return err
		}
		// A value.
		switch {
		case c == '{' || c == '[':
			if len(stack) >= maxSkipDepth {
				return d.syntax("value nested too deeply")
			}
			d.pos++
			stack = append(stack, c)
			closeC := byte('}')
			if c == '[' {
				closeC = ']'
			}
			n, err := d.next()
			if err != nil {
				return err
			}
			if n == closeC {
				d.pos++
				stack = stack[:len(stack)-1]
				break
			}
			if c == '{' {
				if err := d.memberName(); err != nil {
					return err
				}
			}
			continue // the first element or member value
		case c == '"':
			d.pos++
			if err := d.str(false); err != nil {
				return err
			}
		case c == 't':
			err = d.literal("true")
		case c == 'f':
			err = d.literal("false")
		case c == 'n':
			err = d.literal("null")
		case c == '-' || (c >= '0' && c <= '9'):
			_, err = d.number()
		default:
			return d.syntax(fmt.Sprintf("unexpected %q", c))
		}
		if err != nil {
			return err
		}
		// After a value: close containers or move to the next element.
		for {
			if len(stack) == 0 {
				return nil
			}
			c, err := d.next()
			if err != nil {
				return err
			}
			top := stack[len(stack)-1]
			closeC := byte('}')
			if top == '[' {
				closeC = ']'
			}
			if c == closeC {
				d.pos++
				stack = stack[:len(stack)-1]
				continue
			}
			if c != ',' {
				return d.syntax(fmt.Sprintf("expected ',' or %q, found %q", closeC, c))
			}
			d.pos++
			if top == '{' {
				if err := d.memberName(); err != nil {
					return err
				}
			}
			break
		}
	}
}

// memberName consumes `"name":` inside a skipped object.
func (d *oneShotDecoder) memberName() error {
	if err := d.expect('"'); err != nil {
		return err
	}
	if err := d.str(false); err != nil {
		return err
	}
	return d.expect(':')
}
