package rpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"unicode/utf8"
)

// DefaultMaxFrame is the largest line, in bytes, the worker reads or writes:
// the host's 128 Mi character limit (docs/host.md#framing). Because a UTF-8 byte
// count is never below the UTF-16 length JavaScript measures, a frame within
// this many bytes is always within the host's limit.
const DefaultMaxFrame = 128 << 20

// sniffPrefix is how much of an over-limit line is kept to find its id, so the
// host's call fails at once instead of timing out.
const sniffPrefix = 64 << 10

// stream is the NDJSON jsonrpc2.ObjectStream. The library closes its
// connection on any decode error, so ReadObject never returns one: it answers
// bad lines itself and reads on. It also rewrites inbound request ids to
// private string ids and restores the original bytes on the way out, because
// the library can only represent unsigned integer and string ids.
type stream struct {
	in       *bufio.Reader
	inClose  func() error
	out      io.Writer
	maxFrame int
	log      *slog.Logger

	wmu sync.Mutex // one Write per frame, frames never interleave

	mu     sync.Mutex
	nextID uint64
	ids    map[string]json.RawMessage // private id -> id as the host sent it
	closed bool

	eof     chan struct{} // closed when the input ends
	eofOnce sync.Once
	readErr error         // why the input ended; set before eof closes
	done    chan struct{} // closed by Close
}

func newStream(in io.Reader, out io.Writer, maxFrame int, log *slog.Logger) *stream {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	s := &stream{
		in:       bufio.NewReaderSize(in, 64<<10),
		out:      out,
		maxFrame: maxFrame,
		log:      log,
		ids:      make(map[string]json.RawMessage),
		eof:      make(chan struct{}),
		done:     make(chan struct{}),
	}
	if c, ok := in.(io.Closer); ok {
		s.inClose = c.Close
	}
	return s
}

// errLineTooLong reports an over-limit line; id is its sniffed id or nil.
type errLineTooLong struct {
	size int64
	id   json.RawMessage
}

func (e *errLineTooLong) Error() string {
	return fmt.Sprintf("line of at least %d bytes exceeds the frame limit", e.size)
}

// readLine returns the next line without its terminator. At EOF a final
// unterminated line is returned first; then io.EOF. A line over the limit is
// buffered only up to the limit; the rest is discarded as it streams in.
func (s *stream) readLine() ([]byte, error) {
	var buf []byte
	var size int64
	over := false
	for {
		chunk, err := s.in.ReadSlice('\n')
		size += int64(len(chunk))
		switch {
		case over:
		case size > int64(s.maxFrame)+1: // +1: the terminator is not content
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
		case err == nil:
			return bytes.TrimSuffix(buf, []byte("\n")), nil
		case err == io.EOF && len(buf) > 0:
			return buf, nil
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

// ReadObject implements jsonrpc2.ObjectStream. It returns only valid requests,
// notifications and responses; everything else is answered or dropped here.
func (s *stream) ReadObject(v any) error {
	for {
		line, err := s.readLine()
		var tooLong *errLineTooLong
		if errors.As(err, &tooLong) {
			s.log.Warn("rejected over-limit frame", "bytes", tooLong.size, "limit", s.maxFrame)
			s.writeError(tooLong.id, CodeInvalidRequest,
				fmt.Sprintf("Invalid Request: frame exceeds the %d-byte limit", s.maxFrame))
			continue
		}
		if err != nil {
			// Hold the connection open until Serve closes it: the library
			// would close it at once, and in-flight handlers could no longer
			// answer requests that arrived just before EOF.
			s.eofOnce.Do(func() { s.readErr = err; close(s.eof) })
			<-s.done
			return err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		out, ok := s.classify(line)
		if !ok {
			continue
		}
		if err := json.Unmarshal(out, v); err != nil {
			// classify admits only what the library decodes; this is a bug,
			// but it must not kill the connection.
			s.log.Error("frame rejected by the JSON-RPC library", "err", err)
			continue
		}
		return nil
	}
}

// classify validates a line. It returns the bytes to hand to the library
// (with a request's id replaced by a private one) or false when it has
// answered or dropped the line itself.
func (s *stream) classify(line []byte) ([]byte, bool) {
	if !utf8.Valid(line) {
		s.writeError(nil, CodeParseError, "Parse error: frame is not valid UTF-8")
		return nil, false
	}
	f, err := parseFrame(line)
	if err != nil {
		s.writeError(nil, CodeParseError, "Parse error: "+err.Error())
		return nil, false
	}
	hasID := f.has["id"]
	idOK := hasID && validID(f.id)
	replyID := json.RawMessage(nil)
	if idOK {
		replyID = f.id
	}
	if string(f.jsonrpc) != `"2.0"` {
		if f.has["method"] && !hasID {
			s.log.Warn("dropped notification without jsonrpc 2.0")
			return nil, false
		}
		s.writeError(replyID, CodeInvalidRequest, `Invalid Request: "jsonrpc" must be "2.0"`)
		return nil, false
	}
	isResponse := f.has["result"] || f.has["error"]
	if f.has["method"] {
		if isResponse {
			s.writeError(replyID, CodeInvalidRequest, "Invalid Request: a frame cannot be both a request and a response")
			return nil, false
		}
		if len(f.method) == 0 || f.method[0] != '"' {
			if hasID {
				s.writeError(replyID, CodeInvalidRequest, `Invalid Request: "method" must be a string`)
			}
			return nil, false
		}
		if !hasID {
			return line, true // notification
		}
		if !idOK {
			s.writeError(nil, CodeInvalidRequest, `Invalid Request: "id" must be a string or a number`)
			return nil, false
		}
		return s.rewriteID(line, f), true
	}
	if isResponse {
		// A reply to one of our worker→host calls: those ids are unsigned
		// integers we chose; anything else cannot be ours.
		if _, err := strconv.ParseUint(string(f.id), 10, 64); err != nil {
			s.log.Warn("dropped response with an id the worker never used")
			return nil, false
		}
		return line, true
	}
	s.writeError(replyID, CodeInvalidRequest, "Invalid Request: neither a request, a notification nor a response")
	return nil, false
}

func (s *stream) rewriteID(line []byte, f *frame) []byte {
	s.mu.Lock()
	s.nextID++
	private := "r" + strconv.FormatUint(s.nextID, 10)
	s.ids[private] = append(json.RawMessage(nil), f.id...)
	s.mu.Unlock()
	out := make([]byte, 0, len(line)+len(private)+2)
	out = append(out, line[:f.idStart]...)
	out = append(out, '"')
	out = append(out, private...)
	out = append(out, '"')
	return append(out, line[f.idEnd:]...)
}

// responsePrefix starts every response the library marshals: its Response
// type encodes "id" first, and only responses carry our private string ids
// (our own requests use numeric ids).
var responsePrefix = []byte(`{"id":"r`)

// WriteObject implements jsonrpc2.ObjectStream: one frame, one Write.
func (s *stream) WriteObject(obj any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if bytes.HasPrefix(b, responsePrefix) {
		end := bytes.IndexByte(b[len(responsePrefix):], '"')
		if end < 0 {
			return errors.New("rpc: malformed response id")
		}
		private := string(b[len(`{"id":"`) : len(responsePrefix)+end])
		rest := b[len(responsePrefix)+end+1:]
		s.mu.Lock()
		orig, ok := s.ids[private]
		delete(s.ids, private)
		s.mu.Unlock()
		if !ok {
			return fmt.Errorf("rpc: response for unknown request %s", private)
		}
		if len(orig)+len(rest)+len(`{"id":`)+1 > s.maxFrame {
			s.log.Error("response exceeds the frame limit; replying with an error instead", "bytes", len(b))
			return s.writeError(orig, CodeWorkerError,
				fmt.Sprintf("result of %d bytes exceeds the host's %d-byte frame limit", len(b), s.maxFrame))
		}
		out := make([]byte, 0, len(`{"id":`)+len(orig)+len(rest)+1)
		out = append(out, `{"id":`...)
		out = append(out, orig...)
		out = append(out, rest...)
		b = out
	} else if len(b)+1 > s.maxFrame {
		return fmt.Errorf("rpc: frame of %d bytes exceeds the %d-byte limit", len(b), s.maxFrame)
	}
	return s.writeLine(b)
}

// writeResult answers a request with a success frame encoded straight into
// one write: results can be tens of MiB (command output), and the library's
// path would copy them five times over.
func (s *stream) writeResult(private string, result any) error {
	s.mu.Lock()
	orig, ok := s.ids[private]
	delete(s.ids, private)
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("rpc: response for unknown request %s", private)
	}
	enc := json.NewEncoder(frameWriter{s})
	enc.SetEscapeHTML(false)
	err := enc.Encode(responseFrame{JSONRPC: "2.0", ID: orig, Result: result})
	var big *errFrameTooLarge
	switch {
	case errors.As(err, &big):
		s.log.Error("response exceeds the frame limit; replying with an error instead", "bytes", big.n)
		return s.writeError(orig, CodeWorkerError,
			fmt.Sprintf("result of %d bytes exceeds the host's %d-byte frame limit", big.n, s.maxFrame))
	case err != nil:
		var je *json.MarshalerError
		var ue *json.UnsupportedValueError
		var ute *json.UnsupportedTypeError
		if errors.As(err, &je) || errors.As(err, &ue) || errors.As(err, &ute) {
			s.log.Error("could not encode a result", "err", err)
			return s.writeError(orig, CodeWorkerError, "could not encode the result")
		}
		return err
	}
	return nil
}

// responseFrame is a success response; result is always present (null for
// void methods).
type responseFrame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result"`
}

// frameWriter writes one encoded frame (a json.Encoder writes a value and
// its newline in a single Write) under the write lock, refusing frames the
// host would drop.
type frameWriter struct{ s *stream }

type errFrameTooLarge struct{ n int }

func (e *errFrameTooLarge) Error() string { return fmt.Sprintf("frame of %d bytes is too large", e.n) }

func (w frameWriter) Write(b []byte) (int, error) {
	if len(b) > w.s.maxFrame {
		return 0, &errFrameTooLarge{n: len(b)}
	}
	w.s.wmu.Lock()
	defer w.s.wmu.Unlock()
	return w.s.out.Write(b)
}

func (s *stream) writeLine(b []byte) error {
	b = append(b, '\n')
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err := s.out.Write(b)
	return err
}

// writeError answers a frame the library never sees. id nil means null.
func (s *stream) writeError(id json.RawMessage, code int64, msg string) error {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireErr         `json:"error"`
	}{"2.0", id, wireErr{Code: code, Message: msg}})
	if err != nil {
		return err
	}
	return s.writeLine(b)
}

// Close implements jsonrpc2.ObjectStream. It closes the input when it can so
// a blocked read returns; the output belongs to the caller.
func (s *stream) Close() error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if already {
		return nil
	}
	close(s.done)
	if s.inClose == nil {
		return nil
	}
	return s.inClose()
}
