package rpc

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"unicode/utf8"

	"github.com/sourcegraph/jsonrpc2"
)

// DefaultMaxFrame is the largest line, in bytes, the worker reads or writes:
// the host's 128 Mi character limit (docs/host.md#framing). Because a UTF-8 byte
// count is never below the UTF-16 length JavaScript measures, a frame within
// this many bytes is always within the host's limit.
const DefaultMaxFrame = 128 << 20

// stream is the NDJSON jsonrpc2.ObjectStream the library's Conn runs on.
//
// Why it has this shape: the library reads requests, dispatches them and
// sends the worker's notifications, but it cannot answer the host the way
// the host needs, for three reasons.
//
//   - Its ID holds only a uint64 or a string, and it rejects any other
//     number while decoding. The host must get its id back verbatim, with
//     its JSON type (-7, 2.5, 1e3, 2^70 and "\u00e9" included). So
//     ReadObject quotes the id's JSON text into a string id, which the
//     library hands to the handler untouched; [hostID] takes it back out.
//     The id travels with its request: there is no table to fill or drain.
//   - It closes the connection on the first undecodable frame, and it
//     cannot reply to a frame it never decoded (bad JSON, over-limit lines,
//     invalid requests). ReadObject therefore answers those itself and
//     hands the library only frames it can decode.
//   - Its Reply marshals a result into a RawMessage before the frame is
//     marshalled again: results are tens of MiB of command output, copied
//     several times over.
//
// So every response, to a handled request or to a rejected frame, goes
// through [stream.respond]: the id as the host wrote it, the result encoded
// straight into the one Write of its frame. The library writes only what the
// worker originates (execute.log notifications) through WriteObject; the
// worker's span.record requests go straight to writeFrame. All share
// writeFrame: one mutex-guarded Write per frame, never over the limit,
// nothing after Close.
type stream struct {
	in       *bufio.Reader
	inClose  func() error
	out      io.Writer
	maxFrame int
	log      *slog.Logger
	// onAnswer is told the id (its JSON text) of each answer to a
	// worker-to-host request; set before reading starts.
	onAnswer func(id string)

	wmu sync.Mutex // one Write per frame, frames never interleave

	eof       chan struct{} // closed when the input ends
	eofOnce   sync.Once
	readErr   error         // why the input ended; set before eof closes
	done      chan struct{} // closed by Close
	closeOnce sync.Once
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
		eof:      make(chan struct{}),
		done:     make(chan struct{}),
	}
	if c, ok := in.(io.Closer); ok {
		s.inClose = c.Close
	}
	return s
}

// ReadObject implements jsonrpc2.ObjectStream. It returns only requests and
// notifications the library can decode; everything else is answered or
// dropped here, and reading goes on.
func (s *stream) ReadObject(v any) error {
	for {
		line, err := s.readLine()
		var tooLong *errLineTooLong
		if errors.As(err, &tooLong) {
			s.log.Warn("rejected over-limit frame", "bytes", tooLong.size, "limit", s.maxFrame)
			s.reject(tooLong.id, CodeInvalidRequest,
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
// (a request's id quoted into a string id) or false when it has answered or
// dropped the line itself.
func (s *stream) classify(line []byte) ([]byte, bool) {
	if !utf8.Valid(line) {
		s.reject(nil, CodeParseError, "Parse error: frame is not valid UTF-8")
		return nil, false
	}
	f, err := parseFrame(line)
	if err != nil {
		s.reject(nil, CodeParseError, "Parse error: "+err.Error())
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
		s.reject(replyID, CodeInvalidRequest, `Invalid Request: "jsonrpc" must be "2.0"`)
		return nil, false
	}
	isResponse := f.has["result"] || f.has["error"]
	switch {
	case f.has["method"] && isResponse:
		s.reject(replyID, CodeInvalidRequest, "Invalid Request: a frame cannot be both a request and a response")
	case f.has["method"] && (len(f.method) == 0 || f.method[0] != '"'):
		if hasID {
			s.reject(replyID, CodeInvalidRequest, `Invalid Request: "method" must be a string`)
		}
	case f.has["method"] && !hasID:
		return line, true // notification
	case f.has["method"] && !idOK:
		s.reject(nil, CodeInvalidRequest, `Invalid Request: "id" must be a string or a number`)
	case f.has["method"]:
		return quoteID(line, f), true
	case isResponse && isSpanAnswer(f.id):
		// The answer to a span.record: nothing waits for it, but until it
		// came the host's write was not known to be done.
		s.log.Debug("span.record answered", "error", f.has["error"])
		if s.onAnswer != nil {
			s.onAnswer(string(f.id))
		}
	case isResponse:
		// The worker sends the host no other requests, so no response is for it.
		s.log.Warn("dropped a response: the worker sent the host no request")
	default:
		s.reject(replyID, CodeInvalidRequest, "Invalid Request: neither a request, a notification nor a response")
	}
	return nil, false
}

// quoteID replaces the request's id with a JSON string holding the id's JSON
// text, the one id form the library passes through unchanged.
func quoteID(line []byte, f *frame) []byte {
	quoted, _ := json.Marshal(string(f.id)) // a string always marshals
	out := make([]byte, 0, len(line)+len(quoted))
	out = append(out, line[:f.idStart]...)
	out = append(out, quoted...)
	return append(out, line[f.idEnd:]...)
}

// hostID is the id, as the host wrote it, of a request classify admitted.
func hostID(id jsonrpc2.ID) json.RawMessage { return json.RawMessage(id.Str) }

// response is a response frame: exactly one of Result (null for void
// methods) and Error.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  *any            `json:"result,omitempty"`
	Error   *wireErr        `json:"error,omitempty"`
}

// respond writes the response to a host request: id is the request's id as
// the host wrote it (nil for null), e nil means success with result. A
// result that cannot be encoded, or a frame the host would drop for its
// size, is answered with an error instead, so the host's call never hangs.
func (s *stream) respond(id json.RawMessage, result any, e *wireErr) error {
	if id == nil {
		id = json.RawMessage("null")
	}
	r := response{JSONRPC: "2.0", ID: id, Error: e}
	if e == nil {
		r.Result = &result
	}
	var err error
	if res, ok := result.(ExecuteResult); ok && e == nil {
		err = s.writeResultFrame(id, &res) // megabytes of output: see resultjson.go
	} else {
		err = s.writeFrame(r)
	}
	var big *errFrameTooLarge
	switch {
	case err == nil:
		return nil
	case errors.As(err, &big):
		s.log.Error("response exceeds the frame limit; replying with an error instead", "bytes", big.n)
		r.Error = &wireErr{Code: CodeWorkerError,
			Message: fmt.Sprintf("result of %d bytes exceeds the host's %d-byte frame limit", big.n, s.maxFrame)}
	case encodeFailed(err):
		s.log.Error("could not encode a result", "err", err)
		r.Error = &wireErr{Code: CodeWorkerError, Message: "could not encode the result"}
	default:
		return err
	}
	r.Result = nil
	return s.writeFrame(r)
}

// reject answers a frame the library never sees.
func (s *stream) reject(id json.RawMessage, code int64, msg string) {
	if err := s.respond(id, nil, &wireErr{Code: code, Message: msg}); err != nil {
		s.log.Error("could not answer a rejected frame", "err", err)
	}
}

// encodeFailed reports whether err came from encoding a value rather than
// from writing it.
func encodeFailed(err error) bool {
	var me *json.MarshalerError
	var ve *json.UnsupportedValueError
	var te *json.UnsupportedTypeError
	return errors.As(err, &me) || errors.As(err, &ve) || errors.As(err, &te)
}

// WriteObject implements jsonrpc2.ObjectStream for what the library sends:
// the worker's notifications.
func (s *stream) WriteObject(obj any) error { return s.writeFrame(obj) }

// writeFrame encodes v as one line; a json.Encoder hands a value and its
// newline to a single Write.
func (s *stream) writeFrame(v any) error {
	enc := json.NewEncoder(frameWriter{s})
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// frameWriter writes one encoded frame under the write lock, refusing frames
// the host would drop and anything after Close.
type frameWriter struct{ s *stream }

type errFrameTooLarge struct{ n int }

func (e *errFrameTooLarge) Error() string { return fmt.Sprintf("frame of %d bytes is too large", e.n) }

func (w frameWriter) Write(b []byte) (int, error) {
	if len(b) > w.s.maxFrame {
		return 0, &errFrameTooLarge{n: len(b)}
	}
	w.s.wmu.Lock()
	defer w.s.wmu.Unlock()
	select {
	case <-w.s.done:
		return 0, jsonrpc2.ErrClosed
	default:
	}
	return w.s.out.Write(b)
}

// Close implements jsonrpc2.ObjectStream. It closes the input when it can so
// a blocked read returns; the output belongs to the caller.
func (s *stream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.done)
		if s.inClose != nil {
			err = s.inClose()
		}
	})
	return err
}
