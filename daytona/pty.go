package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/coder/websocket"
)

// PTYService creates and drives pseudo-terminals (docs/daytona.md#pty).
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/POST/process/pty
type PTYService service

// PTYCreateRequest is the body of POST /process/pty. Set LazyStart (as the
// TS SDK does) so no output is lost before the first connection.
type PTYCreateRequest struct {
	ID        string            `json:"id"`
	Cwd       string            `json:"cwd,omitempty"`
	Envs      map[string]string `json:"envs,omitempty"`
	Cols      int               `json:"cols,omitempty"`
	Rows      int               `json:"rows,omitempty"`
	LazyStart bool              `json:"lazyStart,omitempty"`
}

type ptyCreateResponse struct {
	SessionID string `json:"sessionId"`
}

// PTYSessionInfo describes a PTY session.
type PTYSessionInfo struct {
	ID        string            `json:"id"`
	Cwd       string            `json:"cwd,omitempty"`
	Envs      map[string]string `json:"envs,omitempty"`
	Cols      int               `json:"cols"`
	Rows      int               `json:"rows"`
	CreatedAt string            `json:"createdAt,omitempty"`
	Active    bool              `json:"active"`
	LazyStart bool              `json:"lazyStart"`
}

// Create creates a PTY session and returns its ID. Never retried.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/POST/process/pty
func (s *PTYService) Create(ctx context.Context, ref SandboxRef, req *PTYCreateRequest) (string, *Response, error) {
	if req == nil || req.ID == "" {
		return "", nil, fmt.Errorf("%w: PTY session ID is empty", ErrInvalidArgument)
	}
	if req.Cols < 0 || req.Cols > 1000 || req.Rows < 0 || req.Rows > 1000 {
		return "", nil, fmt.Errorf("%w: PTY size must be 1-1000", ErrInvalidArgument)
	}
	var out ptyCreateResponse
	r, err := s.client.do(ctx, &call{rt: rCreatePTY, ref: ref, body: jsonBody(req)}, &out)
	if err != nil {
		return "", r, err
	}
	if out.SessionID == "" {
		out.SessionID = req.ID
	}
	return out.SessionID, r, nil
}

// Get returns a PTY session's info.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/GET/process/pty/{sessionId}
func (s *PTYService) Get(ctx context.Context, ref SandboxRef, id string) (*PTYSessionInfo, *Response, error) {
	out := new(PTYSessionInfo)
	r, err := s.client.do(ctx, &call{rt: rGetPTY, ref: ref, args: []string{id}}, out)
	if err != nil {
		return nil, r, err
	}
	return out, r, nil
}

type ptyResizeBody struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// Resize changes the terminal size (SIGWINCH). A terminated PTY is ErrGone.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/POST/process/pty/{sessionId}/resize
func (s *PTYService) Resize(ctx context.Context, ref SandboxRef, id string, cols, rows int) (*PTYSessionInfo, *Response, error) {
	if cols < 1 || cols > 1000 || rows < 1 || rows > 1000 {
		return nil, nil, fmt.Errorf("%w: PTY size must be 1-1000", ErrInvalidArgument)
	}
	out := new(PTYSessionInfo)
	r, err := s.client.do(ctx, &call{rt: rResizePTY, ref: ref, args: []string{id}, body: jsonBody(ptyResizeBody{Cols: cols, Rows: rows})}, out)
	if err != nil {
		return nil, r, err
	}
	return out, r, nil
}

// Kill deletes a PTY session, killing its process tree (SIGKILL); a
// connected client then sees exit code 137.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/DELETE/process/pty/{sessionId}
func (s *PTYService) Kill(ctx context.Context, ref SandboxRef, id string) (*Response, error) {
	return s.client.do(ctx, &call{rt: rDeletePTY, ref: ref, args: []string{id}}, nil)
}

// PTYExit is how a PTY's process ended, from the WebSocket close reason.
type PTYExit struct {
	Code   int    `json:"exitCode"`
	Reason string `json:"exitReason,omitempty"` // e.g. "SIGKILL", "Ctrl+C"
}

// MaxPTYInputChunk is the largest input message sent: 60 KiB (61,440
// bytes, a multiple of 3), under the 64 KiB above which the server closes
// the socket with 1009. Input is sliced by bytes, so a multi-byte
// character may straddle two messages; the terminal rejoins it.
const MaxPTYInputChunk = 60 << 10

// PTYConn is a connected terminal: an io.ReadWriteCloser of raw terminal
// bytes. Read returns io.EOF when the process exited (see Exit). One
// reader and one writer may run concurrently.
type PTYConn struct {
	conn   *websocket.Conn
	client *Client
	ctx    context.Context // lives until Close
	cancel context.CancelFunc

	rmu     sync.Mutex
	cur     io.Reader
	pending []byte // a non-control first message read during Connect

	emu  sync.Mutex
	exit *PTYExit
}

type ptyControl struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Error  string `json:"error"`
}

// Connect attaches to a PTY over WebSocket and waits (under ctx) for the
// server's "connected" control message. ctx bounds the handshake only; the
// connection lives until Close or process exit. Closing the connection
// does not kill the process (use Kill).
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/GET/process/pty/{sessionId}/connect
func (s *PTYService) Connect(ctx context.Context, ref SandboxRef, id string) (*PTYConn, error) {
	conn, err := s.client.dialWS(ctx, &call{rt: rConnectPTY, ref: ref, args: []string{id}})
	if err != nil {
		return nil, err
	}
	conn.SetReadLimit(1 << 20)
	lctx, cancel := context.WithCancel(context.Background())
	p := &PTYConn{conn: conn, client: s.client, ctx: lctx, cancel: cancel}
	// Reading with ctx: if it ends, the library closes the connection.
	typ, msg, err := conn.Read(ctx)
	if err != nil {
		p.Close()
		if ctx.Err() != nil {
			return nil, &TransportError{Method: rConnectPTY.method, Route: rConnectPTY.tmpl, Err: ctx.Err()}
		}
		return nil, s.client.streamError(rConnectPTY, err)
	}
	if c, ok := parseControl(typ, msg); ok {
		if c.Status != "connected" {
			p.Close()
			return nil, &StreamError{Route: rConnectPTY.tmpl, Code: -1, Reason: s.client.redact(c.Error),
				Err: fmt.Errorf("%w: PTY connect refused: %s", ptyRefusal(c.Error), s.client.redact(c.Error))}
		}
	} else {
		p.pending = msg
	}
	return p, nil
}

// ptyRefusal classifies a PTY control error text.
func ptyRefusal(text string) error {
	t := strings.ToLower(text)
	switch {
	case strings.Contains(t, "not found"):
		return ErrNotFound
	case strings.Contains(t, "terminated") || strings.Contains(t, "no longer available"):
		return ErrGone
	}
	return ErrServer
}

func parseControl(typ websocket.MessageType, msg []byte) (ptyControl, bool) {
	if typ != websocket.MessageText {
		return ptyControl{}, false
	}
	var c ptyControl
	if json.Unmarshal(msg, &c) != nil || c.Type != "control" {
		return ptyControl{}, false
	}
	return c, true
}

// Read reads terminal output. At process exit it returns io.EOF and Exit
// reports the exit code.
func (p *PTYConn) Read(b []byte) (int, error) {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	if len(p.pending) > 0 {
		n := copy(b, p.pending)
		p.pending = p.pending[n:]
		return n, nil
	}
	for {
		if p.cur != nil {
			n, err := p.cur.Read(b)
			if errors.Is(err, io.EOF) {
				p.cur = nil
				if n > 0 {
					return n, nil
				}
				continue
			}
			if err != nil {
				p.cur = nil
				return n, p.closed(err)
			}
			return n, nil
		}
		typ, r, err := p.conn.Reader(p.ctx)
		if err != nil {
			return 0, p.closed(err)
		}
		if typ == websocket.MessageText {
			// Control messages are small; anything else is output.
			msg, err := io.ReadAll(io.LimitReader(r, 1<<20))
			if err != nil {
				return 0, p.closed(err)
			}
			if _, ok := parseControl(typ, msg); ok {
				continue
			}
			p.pending = msg
			n := copy(b, p.pending)
			p.pending = p.pending[n:]
			return n, nil
		}
		p.cur = r
	}
}

// closed turns the end of the connection into io.EOF plus an exit status,
// or an error.
func (p *PTYConn) closed(err error) error {
	var ce websocket.CloseError
	if errors.As(err, &ce) && (ce.Code == websocket.StatusNormalClosure || ce.Code == websocket.StatusInternalError || ce.Code == websocket.StatusGoingAway) {
		ex := &PTYExit{}
		if json.Unmarshal([]byte(ce.Reason), ex) != nil {
			// No parsable reason: SDKs default to 0 for a normal close.
			ex = &PTYExit{}
			if ce.Code != websocket.StatusNormalClosure {
				ex.Code = -1
				ex.Reason = p.client.redact(ce.Reason)
			}
		}
		p.emu.Lock()
		p.exit = ex
		p.emu.Unlock()
		return io.EOF
	}
	if p.ctx.Err() != nil {
		return io.ErrClosedPipe
	}
	return p.client.streamError(rConnectPTY, err)
}

// Exit returns the process exit status once Read has returned io.EOF.
func (p *PTYConn) Exit() (PTYExit, bool) {
	p.emu.Lock()
	defer p.emu.Unlock()
	if p.exit == nil {
		return PTYExit{}, false
	}
	return *p.exit, true
}

// Write sends input as binary messages of at most MaxPTYInputChunk bytes.
func (p *PTYConn) Write(b []byte) (int, error) {
	return p.WriteContext(p.ctx, b)
}

// WriteContext is Write under ctx. If ctx ends mid-write the connection is
// closed (a partial message cannot be taken back).
func (p *PTYConn) WriteContext(ctx context.Context, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		end := min(n+MaxPTYInputChunk, len(b))
		if err := p.conn.Write(ctx, websocket.MessageBinary, b[n:end]); err != nil {
			return n, p.client.streamError(rConnectPTY, err)
		}
		n = end
	}
	return n, nil
}

// Close detaches from the PTY (the process keeps running). Closing an
// already ended connection is not an error.
func (p *PTYConn) Close() error {
	p.cancel()
	_ = p.conn.CloseNow()
	return nil
}
