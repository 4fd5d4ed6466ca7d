package rpc

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
	"unicode/utf8"
)

// The execute result is the one frame that carries megabytes (a command's
// whole output). encoding/json would build it by reflection into a buffer
// grown from empty, doubling and copying the text as it goes, and then
// the stream copies it once more; here it is appended field by field into
// a buffer sized for the text up front and reused from a pool. The bytes
// are those encoding/json writes with HTML escaping off (a test compares
// them).

// framePool holds frame buffers of large results; maxPooledFrame keeps
// a rare huge one from staying around.
var framePool sync.Pool

const maxPooledFrame = 64 << 20

// appendResultFrame appends the response frame of a successful execute,
// newline included.
func appendResultFrame(dst []byte, id json.RawMessage, r *ExecuteResult) ([]byte, error) {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"result":{"exitCode":`...)
	if r.ExitCode == nil {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendInt(dst, int64(*r.ExitCode), 10)
	}
	dst = append(dst, `,"signal":`...)
	if r.Signal == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, *r.Signal)
	}
	dst = append(dst, `,"timedOut":`...)
	dst = strconv.AppendBool(dst, r.TimedOut)
	dst = append(dst, `,"stdout":`...)
	dst = appendJSONString(dst, r.Stdout)
	dst = append(dst, `,"stderr":`...)
	dst = appendJSONString(dst, r.Stderr)
	if len(r.Metadata) > 0 {
		var md bytes.Buffer
		enc := json.NewEncoder(&md)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r.Metadata); err != nil {
			return dst, err
		}
		dst = append(dst, `,"metadata":`...)
		dst = append(dst, bytes.TrimSuffix(md.Bytes(), []byte("\n"))...)
	}
	return append(dst, "}}\n"...), nil
}

// writeResultFrame writes the response to a successful execute through a
// pooled buffer; errors are those of writeFrame.
func (s *stream) writeResultFrame(id json.RawMessage, r *ExecuteResult) error {
	// The text plus room for a few escapes: one pass, no growth.
	n := len(r.Stdout) + len(r.Stderr)
	buf, err := appendResultFrame(getFrameBuf(n+n/32+4096), id, r)
	if err == nil {
		_, err = frameWriter{s}.Write(buf)
	}
	putFrameBuf(buf)
	return err
}

// getFrameBuf returns an empty buffer of at least need bytes, pooled if
// one is free.
func getFrameBuf(need int) []byte {
	if p, ok := framePool.Get().(*[]byte); ok && cap(*p) >= need {
		return (*p)[:0]
	}
	return make([]byte, 0, need)
}

// putFrameBuf returns a buffer to the pool once its frame is written.
func putFrameBuf(buf []byte) {
	if cap(buf) <= maxPooledFrame {
		buf = buf[:0]
		framePool.Put(&buf)
	}
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaped as encoding/json
// escapes it without HTML escaping: `"` and `\` and control characters
// (\b \f \n \r \t short, the rest \u00XX), U+2028 and U+2029 as \u2028 and
// \u2029, each invalid UTF-8 byte as \ufffd. Runs of plain ASCII, what
// output mostly is, are tested eight bytes at a time and copied at once.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) && plainWord(s[i:i+8]) {
			i += 8
			continue
		}
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// plainWord reports whether all eight bytes of w are printable ASCII
// other than `"` and `\` (bitwise: no byte ≥ 0x80, < 0x20, '"' or '\\').
func plainWord(w string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
	ctl := (x - 0x20*ones) &^ x
	q := x ^ '"'*ones
	bs := x ^ '\\'*ones
	return (x|ctl|(q-ones)&^q|(bs-ones)&^bs)&highs == 0
}
