package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Stream names one output stream of a session command.
type Stream int

// Output streams, numbered like their markers (01 01 01 / 02 02 02).
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

// String returns "stdout" or "stderr".
func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return fmt.Sprintf("stream(%d)", int(s))
}

// LogChunk is a piece of one stream. Offset is the byte offset of Data[0]
// within its stream (counted from the start of the log, which every follow
// connection replays), so a reconnecting reader skips what it has already
// delivered. Data is only valid during the callback that receives it.
type LogChunk struct {
	Stream Stream
	Data   []byte
	Offset int64
}

var (
	markerStdout = []byte{1, 1, 1}
	markerStderr = []byte{2, 2, 2}
)

// Demuxer splits a Daytona session log (docs/daytona.md#session-exec, docs/daytona.md#follow-logs) into
// stdout and stderr: bytes after 01 01 01 belong to stdout, bytes after
// 02 02 02 to stderr; bytes before the first marker are dropped, as the
// SDKs do. A marker split across writes is recognised: at most two trailing
// bytes are held back. Memory is bounded by the largest single write.
type Demuxer struct {
	cur     Stream
	pend    [2]byte
	npend   int
	scratch []byte
	off     [3]int64
}

// NewDemuxer returns a demuxer at the start of a log.
func NewDemuxer() *Demuxer { return &Demuxer{} }

// Write feeds the next bytes of the log; emit receives the classified
// chunks in order (Data aliases an internal buffer).
func (d *Demuxer) Write(p []byte, emit func(LogChunk)) {
	buf := p
	if d.npend > 0 {
		d.scratch = append(append(d.scratch[:0], d.pend[:d.npend]...), p...)
		buf = d.scratch
		d.npend = 0
	}
	for {
		j1 := bytes.Index(buf, markerStdout)
		j2 := bytes.Index(buf, markerStderr)
		j, next := j1, Stdout
		if j < 0 || (j2 >= 0 && j2 < j) {
			j, next = j2, Stderr
		}
		if j < 0 {
			break
		}
		d.emit(buf[:j], emit)
		d.cur = next
		buf = buf[j+3:]
	}
	n := len(buf)
	keep := 0
	if n >= 1 && (buf[n-1] == 1 || buf[n-1] == 2) {
		keep = 1
		if n >= 2 && buf[n-2] == buf[n-1] {
			keep = 2
		}
	}
	d.emit(buf[:n-keep], emit)
	copy(d.pend[:], buf[n-keep:])
	d.npend = keep
}

// Flush emits the held-back bytes (end of log).
func (d *Demuxer) Flush(emit func(LogChunk)) {
	d.emit(d.pend[:d.npend], emit)
	d.npend = 0
}

func (d *Demuxer) emit(b []byte, emit func(LogChunk)) {
	if len(b) == 0 || d.cur == 0 {
		return
	}
	off := d.off[d.cur]
	d.off[d.cur] += int64(len(b))
	emit(LogChunk{Stream: d.cur, Data: b, Offset: off})
}

// StreamError is a WebSocket stream that ended abnormally: a close code
// other than normal/going-away, a broken connection, or an idle timeout.
type StreamError struct {
	Route  string
	Code   int    // WebSocket close code, -1 if none was received
	Reason string // close reason (redacted)
	Idle   bool   // no frame within FollowOptions.IdleTimeout
	Err    error
}

// Error implements error.
func (e *StreamError) Error() string {
	switch {
	case e.Idle:
		return fmt.Sprintf("daytona: %s: stream idle: %v", e.Route, e.Err)
	case e.Code >= 0:
		return fmt.Sprintf("daytona: %s: stream closed with %d %s", e.Route, e.Code, e.Reason)
	}
	return fmt.Sprintf("daytona: %s: stream broken: %v", e.Route, e.Err)
}

// Unwrap returns the cause.
func (e *StreamError) Unwrap() error { return e.Err }

// Is matches ErrTimeout for an idle stream.
func (e *StreamError) Is(target error) bool { return target == ErrTimeout && e.Idle }

// FollowOptions tunes [ToolboxService.FollowSessionCommandLogs].
type FollowOptions struct {
	// IdleTimeout ends the stream with a *StreamError matching ErrTimeout
	// if no frame arrives for this long (0 = no limit). The server sends
	// nothing while a command is silent, so pick it above expected silences.
	IdleTimeout time.Duration
	// PingInterval sends WebSocket pings to keep intermediaries from
	// closing an idle connection (0 = 25 s, negative = never).
	PingInterval time.Duration
}

// readChunk bounds the bytes read from a WebSocket message at once.
const readChunk = 32 << 10

// FollowSessionCommandLogs follows a command's log over the toolbox
// WebSocket (…/logs?follow=true, docs/daytona.md#follow-logs) and calls fn for each
// stdout/stderr chunk, in order, with per-stream byte offsets. The server
// replays from byte 0 on every connection. Memory stays bounded whatever
// the frame sizes. It returns nil when the server closes normally (1000 or
// 1001, after flushing held-back bytes), fn's error if fn fails, and
// otherwise a *StreamError or *ErrorResponse (for a refused upgrade, e.g.
// 404). The final chunk can be lost by the daemon: reconcile with
// GetSessionCommandLogs once the exit code is known.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/GET/process/session/{sessionId}/command/{commandId}/logs
func (s *ToolboxService) FollowSessionCommandLogs(ctx context.Context, ref SandboxRef, sessionID, commandID string, opts *FollowOptions, fn func(LogChunk) error) error {
	if fn == nil {
		return fmt.Errorf("%w: callback is nil", ErrInvalidArgument)
	}
	var o FollowOptions
	if opts != nil {
		o = *opts
	}
	if o.PingInterval == 0 {
		o.PingInterval = 25 * time.Second
	}
	conn, err := s.client.dialWS(ctx, &call{rt: rFollowLogs, ref: ref, args: []string{sessionID, commandID},
		query: url.Values{"follow": {"true"}}})
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(-1) // messages are read in bounded pieces below

	stopPing := startPinger(ctx, conn, o.PingInterval)
	defer stopPing()

	d := NewDemuxer()
	var fnErr error
	emit := func(c LogChunk) {
		if fnErr == nil {
			fnErr = fn(c)
		}
	}
	buf := make([]byte, readChunk)
	for {
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if o.IdleTimeout > 0 {
			rctx, cancel = context.WithTimeout(ctx, o.IdleTimeout)
		}
		_, r, err := conn.Reader(rctx)
		if err == nil {
			err = copyMessage(r, buf, func(p []byte) { d.Write(p, emit) })
		}
		idle := rctx.Err() != nil && ctx.Err() == nil
		cancel()
		if fnErr != nil {
			return fnErr
		}
		if err == nil {
			continue
		}
		code := websocket.CloseStatus(err)
		switch {
		case code == websocket.StatusNormalClosure || code == websocket.StatusGoingAway:
			d.Flush(emit)
			return fnErr
		case ctx.Err() != nil:
			return &TransportError{Method: rFollowLogs.method, Route: rFollowLogs.tmpl, Err: ctx.Err()}
		case idle:
			return &StreamError{Route: rFollowLogs.tmpl, Code: -1, Idle: true, Err: context.DeadlineExceeded}
		}
		return s.client.streamError(rFollowLogs, err)
	}
}

// copyMessage reads one message in readChunk pieces.
func copyMessage(r io.Reader, buf []byte, fn func([]byte)) error {
	for {
		n, err := r.Read(buf)
		if n > 0 {
			fn(buf[:n])
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (c *Client) streamError(rt *route, err error) error {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return &StreamError{Route: rt.tmpl, Code: int(ce.Code), Reason: c.redact(ce.Reason), Err: err}
	}
	return &StreamError{Route: rt.tmpl, Code: -1, Err: c.cleanTransportErr(err)}
}

// startPinger pings every interval until the returned stop is called;
// stop waits for the goroutine.
func startPinger(ctx context.Context, conn *websocket.Conn, every time.Duration) func() {
	if every <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				pctx, pcancel := context.WithTimeout(ctx, every)
				_ = conn.Ping(pctx) // a dead peer shows up on the reader side
				pcancel()
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// dialWS opens a toolbox WebSocket with the normal headers. A refused
// upgrade becomes the typed HTTP error of its answer.
func (c *Client) dialWS(ctx context.Context, cl *call) (*websocket.Conn, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	for i, a := range cl.args {
		if a == "" {
			return nil, fmt.Errorf("%w: %s: path argument %d is empty", ErrInvalidArgument, cl.rt, i+1)
		}
	}
	target, err := c.requestURL(cl)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	c.setHeaders(h)
	conn, resp, err := websocket.Dial(ctx, target, &websocket.DialOptions{HTTPClient: c.hc, HTTPHeader: h})
	if err != nil {
		if ctx.Err() != nil {
			return nil, &TransportError{Method: cl.rt.method, Route: cl.rt.tmpl, Err: ctx.Err()}
		}
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols && resp.Body != nil {
			return nil, c.newErrorResponse(cl.rt, resp)
		}
		return nil, &TransportError{Method: cl.rt.method, Route: cl.rt.tmpl, Err: c.cleanTransportErr(err)}
	}
	return conn, nil
}

// CommandLogs is a log snapshot with stdout and stderr separated.
type CommandLogs struct {
	Output string `json:"output"` // raw log with markers (ignore)
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// DefaultMaxLogSnapshot bounds GetSessionCommandLogs (a JSON snapshot is
// necessarily held in memory). Pass a larger limit for bigger logs.
const DefaultMaxLogSnapshot = 64 << 20

// GetSessionCommandLogs reads the whole log of a command (
// docs/daytona.md#log-snapshot) through a size limit (maxBytes <= 0 means DefaultMaxLogSnapshot).
// With the SDK-version header the toolbox answers JSON with stdout/stderr;
// a text/plain answer (older daemon) is demultiplexed here from its markers.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/GET/process/session/{sessionId}/command/{commandId}/logs
func (s *ToolboxService) GetSessionCommandLogs(ctx context.Context, ref SandboxRef, sessionID, commandID string, maxBytes int64) (*CommandLogs, *Response, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxLogSnapshot
	}
	resp, r, err := s.client.send(ctx, &call{rt: rCommandLogs, ref: ref, args: []string{sessionID, commandID}})
	if err != nil {
		return nil, r, err
	}
	defer resp.Body.Close()
	lr := &io.LimitedReader{R: resp.Body, N: maxBytes + 1}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	out := new(CommandLogs)
	if mt == "application/json" {
		err = json.NewDecoder(lr).Decode(out)
	} else {
		var raw []byte
		raw, err = io.ReadAll(lr)
		if err == nil {
			*out = splitLogs(raw)
		}
	}
	if lr.N <= 0 {
		return nil, r, fmt.Errorf("%w: %s: log larger than %d bytes", ErrMalformedResponse, rCommandLogs, maxBytes)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, r, &TransportError{Method: rCommandLogs.method, Route: rCommandLogs.tmpl, Err: ctx.Err()}
		}
		return nil, r, fmt.Errorf("%w: %s: %s", ErrMalformedResponse, rCommandLogs, s.client.redact(err.Error()))
	}
	drain(lr)
	return out, r, nil
}

// StreamSessionCommandLogs reads the whole log of a command once, streamed
// and demultiplexed with bounded memory, calling fn for each stdout/stderr
// chunk with its per-stream byte offset (the same offsets as
// FollowSessionCommandLogs, so a caller can append only the bytes it has
// not seen). It asks for the raw marker format (X-Daytona-Split-Output
// instead of the SDK-version header, docs/daytona.md#version-headers); if the server
// answers JSON anyway, that answer is decoded through DefaultMaxLogSnapshot.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/GET/process/session/{sessionId}/command/{commandId}/logs
func (s *ToolboxService) StreamSessionCommandLogs(ctx context.Context, ref SandboxRef, sessionID, commandID string, fn func(LogChunk) error) error {
	if fn == nil {
		return fmt.Errorf("%w: callback is nil", ErrInvalidArgument)
	}
	resp, _, err := s.client.send(ctx, &call{rt: rCommandLogs, ref: ref, args: []string{sessionID, commandID}, rawLogs: true,
		header: http.Header{"Accept": {"text/plain, application/json"}}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var fnErr error
	emit := func(c LogChunk) {
		if fnErr == nil {
			fnErr = fn(c)
		}
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/json" {
		var logs CommandLogs
		lr := &io.LimitedReader{R: resp.Body, N: DefaultMaxLogSnapshot + 1}
		if err := json.NewDecoder(lr).Decode(&logs); err != nil || lr.N <= 0 {
			return fmt.Errorf("%w: %s: undecodable JSON log", ErrMalformedResponse, rCommandLogs)
		}
		if logs.Stdout != "" {
			emit(LogChunk{Stream: Stdout, Data: []byte(logs.Stdout)})
		}
		if logs.Stderr != "" {
			emit(LogChunk{Stream: Stderr, Data: []byte(logs.Stderr)})
		}
		return fnErr
	}
	d := NewDemuxer()
	buf := make([]byte, readChunk)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			d.Write(buf[:n], emit)
		}
		if fnErr != nil {
			return fnErr
		}
		if errors.Is(err, io.EOF) {
			d.Flush(emit)
			return fnErr
		}
		if err != nil {
			if ctx.Err() != nil {
				return &TransportError{Method: rCommandLogs.method, Route: rCommandLogs.tmpl, Err: ctx.Err()}
			}
			return &TransportError{Method: rCommandLogs.method, Route: rCommandLogs.tmpl, Err: s.client.cleanTransportErr(err)}
		}
	}
}

// splitLogs demultiplexes a raw marker log held in memory.
func splitLogs(raw []byte) CommandLogs {
	var out, e strings.Builder
	d := NewDemuxer()
	emit := func(c LogChunk) {
		if c.Stream == Stdout {
			out.Write(c.Data)
		} else {
			e.Write(c.Data)
		}
	}
	d.Write(raw, emit)
	d.Flush(emit)
	return CommandLogs{Output: string(raw), Stdout: out.String(), Stderr: e.String()}
}
