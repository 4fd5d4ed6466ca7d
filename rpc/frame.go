package rpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Reading frames: one JSON object per line, CRLF accepted, blank lines
// ignored, at most maxFrame bytes. An over-limit line is discarded while it
// streams in, never buffered whole; only its start is kept to find the id
// its error reply needs. These functions only split and inspect bytes; what
// to answer is decided in stream.go.

// sniffPrefix is how much of an over-limit line is kept to find its id, so the
// host's call fails at once instead of timing out.
const sniffPrefix = 64 << 10

// errLineTooLong reports an over-limit line; id is its sniffed id or nil.
type errLineTooLong struct {
	size int64
	id   json.RawMessage
}

func (e *errLineTooLong) Error() string {
	return fmt.Sprintf("line of at least %d bytes exceeds the frame limit", e.size)
}

// readLine returns the next line without its terminator or surrounding
// white space (so CRLF and blank lines need no care). At EOF a final
// unterminated line is returned first; then io.EOF. A line over the limit is
// buffered only up to the limit; the rest is discarded as it streams in.
func (s *stream) readLine() ([]byte, error) {
	var buf []byte
	var size int64
	over := false
	for {
		chunk, err := s.in.ReadSlice('\n')
		size += int64(len(chunk))
		content := size
		if err == nil {
			content-- // the terminator is not content; a last line at EOF has none
		}
		switch {
		case over:
		case content > int64(s.maxFrame):
			over = true
			if len(buf) < sniffPrefix {
				buf = append(buf, chunk[:min(len(chunk), sniffPrefix-len(buf))]...)
			}
			buf = append([]byte(nil), buf[:min(len(buf), sniffPrefix)]...)
		default:
			buf = append(buf, chunk...)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case over && (err == nil || err == io.EOF):
			return nil, &errLineTooLong{size: size, id: sniffID(buf)}
		case err == nil, err == io.EOF && len(buf) > 0:
			return bytes.TrimSpace(buf), nil
		default:
			return nil, err
		}
	}
}

// sniffID finds a top-level "id" in the prefix of a truncated object.
func sniffID(prefix []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for {
		k, err := dec.Token()
		if err != nil {
			return nil
		}
		key, ok := k.(string)
		if !ok {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if key == "id" && validID(v) {
			return v
		}
	}
}

// validID reports whether raw is an id the protocol allows: a string or a number.
func validID(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case '"':
		return true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// frame is a line split into the top-level members the dispatcher needs, with
// the byte span of the id value so it can be replaced without re-encoding.
type frame struct {
	has                         map[string]bool
	jsonrpc, id, method, result json.RawMessage
	errorVal                    json.RawMessage
	idStart, idEnd              int
}

// parseFrame checks that line is exactly one JSON object (no trailing data)
// and records its members.
func parseFrame(line []byte) (*frame, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	f := &frame{has: make(map[string]bool, 6)}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := k.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		f.has[key] = true
		switch key {
		case "jsonrpc":
			f.jsonrpc = v
		case "id":
			f.id = v
			f.idEnd = int(dec.InputOffset())
			f.idStart = f.idEnd - len(v)
		case "method":
			f.method = v
		case "result":
			f.result = v
		case "error":
			f.errorVal = v
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON object")
	}
	return f, nil
}
