package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// ToolboxService runs commands inside a sandbox through its toolbox
// (docs/daytona.md#process): work dirs, one-shot execute, sessions, command
// status, logs and input. Calls are addressed with a [SandboxRef].
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process
type ToolboxService service

type dirBody struct {
	Dir string `json:"dir"`
}

// WorkDir returns the daemon's working directory (image WORKDIR or home).
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/info/GET/work-dir
func (s *ToolboxService) WorkDir(ctx context.Context, ref SandboxRef) (string, *Response, error) {
	return s.dir(ctx, ref, rWorkDir)
}

// UserHomeDir returns the sandbox user's home directory.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/info/GET/user-home-dir
func (s *ToolboxService) UserHomeDir(ctx context.Context, ref SandboxRef) (string, *Response, error) {
	return s.dir(ctx, ref, rHomeDir)
}

func (s *ToolboxService) dir(ctx context.Context, ref SandboxRef, rt *route) (string, *Response, error) {
	var out dirBody
	r, err := s.client.do(ctx, &call{rt: rt, ref: ref}, &out)
	if err != nil {
		return "", r, err
	}
	if out.Dir == "" {
		return "", r, fmt.Errorf("%w: %s: empty dir", ErrMalformedResponse, rt)
	}
	return out.Dir, r, nil
}

// ExecuteRequest is the body of POST /process/execute. Timeout is in
// seconds; 0 means none (the daemon applies it only if > 0).
type ExecuteRequest struct {
	Command string            `json:"command"`
	Cwd     string            `json:"cwd,omitempty"`
	Envs    map[string]string `json:"envs,omitempty"`
	Timeout int               `json:"timeout,omitempty"`
}

// ExecuteResponse is the answer of a one-shot execute. Result holds stdout
// and stderr interleaved. ExitCode -1 means the process could not start.
type ExecuteResponse struct {
	ExitCode int    `json:"exitCode"`
	Result   string `json:"result"`
}

// Execute runs a one-shot command and waits for it (no client-side
// timeout; use ctx or req.Timeout). A server-side timeout is a 408 that
// matches ErrTimeout; its output is lost. Never retried.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/POST/process/execute
func (s *ToolboxService) Execute(ctx context.Context, ref SandboxRef, req *ExecuteRequest) (*ExecuteResponse, *Response, error) {
	if req == nil || strings.TrimSpace(req.Command) == "" {
		return nil, nil, fmt.Errorf("%w: command is empty", ErrInvalidArgument)
	}
	out := new(ExecuteResponse)
	r, err := s.client.do(ctx, &call{rt: rExecute, ref: ref, body: jsonBody(req)}, out)
	if err != nil {
		return nil, r, err
	}
	return out, r, nil
}

// ExecuteStream runs a one-shot command like Execute, but reads the answer
// as a stream: the result text is passed to onResult in pieces (each valid
// only during the call; a piece may end inside a UTF-8 character, the
// next one continues it) as it arrives, and the exit code is returned at
// the end. Memory stays bounded however much the command printed, and no
// answer size limit applies. The text is exactly what decoding the answer
// with encoding/json would give. An error from onResult ends the read and
// is returned as is; a malformed answer (including one without an integer
// exitCode, or one that ends inside the object) is ErrMalformedResponse; a
// connection lost while reading is a TransportError. Either way the
// command ran (or may have). Never retried.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/POST/process/execute
func (s *ToolboxService) ExecuteStream(ctx context.Context, ref SandboxRef, req *ExecuteRequest, onResult func(text []byte) error) (int, *Response, error) {
	if req == nil || strings.TrimSpace(req.Command) == "" {
		return 0, nil, fmt.Errorf("%w: command is empty", ErrInvalidArgument)
	}
	if onResult == nil {
		return 0, nil, fmt.Errorf("%w: callback is nil", ErrInvalidArgument)
	}
	resp, r, err := s.client.send(ctx, &call{rt: rExecute, ref: ref, body: jsonBody(req)})
	if err != nil {
		return 0, r, err
	}
	defer resp.Body.Close()
	var cbErr error
	code, err := decodeOneShot(resp.Body, func(p []byte) error {
		cbErr = onResult(p)
		return cbErr
	})
	switch {
	case err == nil:
		return code, r, nil
	case cbErr != nil: // the decoder stops at once and returns it
		return 0, r, cbErr
	case ctx.Err() != nil:
		return 0, r, &TransportError{Method: rExecute.method, Route: rExecute.tmpl, Err: ctx.Err()}
	}
	var rf *readFailure
	if errors.As(err, &rf) {
		return 0, r, &TransportError{Method: rExecute.method, Route: rExecute.tmpl, Err: s.client.cleanTransportErr(rf.err)}
	}
	return 0, r, fmt.Errorf("%w: %s: %s", ErrMalformedResponse, rExecute, s.client.redact(err.Error()))
}

type createSessionBody struct {
	SessionID string `json:"sessionId"`
}

// CreateSession creates a persistent shell session (201). An existing ID
// is a 409 (ErrConflict).
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/POST/process/session
func (s *ToolboxService) CreateSession(ctx context.Context, ref SandboxRef, sessionID string) (*Response, error) {
	if sessionID == "" {
		return nil, fmt.Errorf("%w: session ID is empty", ErrInvalidArgument)
	}
	return s.client.do(ctx, &call{rt: rCreateSession, ref: ref, body: jsonBody(createSessionBody{SessionID: sessionID})}, nil)
}

// Command is one command of a session. ExitCode is nil while it runs.
type Command struct {
	ID       string `json:"id"`
	Command  string `json:"command"`
	ExitCode *int   `json:"exitCode,omitempty"`
}

// Session is a session with its commands (order not guaranteed).
type Session struct {
	SessionID string    `json:"sessionId"`
	Commands  []Command `json:"commands"`
}

// GetSession returns a session and its commands.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/GET/process/session/{sessionId}
func (s *ToolboxService) GetSession(ctx context.Context, ref SandboxRef, sessionID string) (*Session, *Response, error) {
	out := new(Session)
	r, err := s.client.do(ctx, &call{rt: rGetSession, ref: ref, args: []string{sessionID}}, out)
	if err != nil {
		return nil, r, err
	}
	return out, r, nil
}

// DeleteSession terminates a session's processes and removes its logs.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/DELETE/process/session/{sessionId}
func (s *ToolboxService) DeleteSession(ctx context.Context, ref SandboxRef, sessionID string) (*Response, error) {
	return s.client.do(ctx, &call{rt: rDeleteSession, ref: ref, args: []string{sessionID}}, nil)
}

// SessionExecuteRequest is the body of POST /process/session/{id}/exec.
// Use RunAsync: true and poll the command (docs/daytona.md#session-exec).
type SessionExecuteRequest struct {
	Command           string `json:"command"`
	RunAsync          bool   `json:"runAsync,omitempty"`
	SuppressInputEcho bool   `json:"suppressInputEcho,omitempty"`
}

// SessionExecuteResponse is the exec answer. With RunAsync only CmdID is
// set; a synchronous exec also carries the output and exit code.
type SessionExecuteResponse struct {
	CmdID    string  `json:"cmdId"`
	Output   *string `json:"output,omitempty"` // raw, with stream markers
	Stdout   *string `json:"stdout,omitempty"`
	Stderr   *string `json:"stderr,omitempty"`
	ExitCode *int    `json:"exitCode,omitempty"`
}

// ExecuteSessionCommand runs a command in a session. Never retried: a lost
// answer may still have started the command.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/POST/process/session/{sessionId}/exec
func (s *ToolboxService) ExecuteSessionCommand(ctx context.Context, ref SandboxRef, sessionID string, req *SessionExecuteRequest) (*SessionExecuteResponse, *Response, error) {
	if req == nil || strings.TrimSpace(req.Command) == "" {
		return nil, nil, fmt.Errorf("%w: command is empty", ErrInvalidArgument)
	}
	out := new(SessionExecuteResponse)
	r, err := s.client.do(ctx, &call{rt: rSessionExec, ref: ref, args: []string{sessionID}, body: jsonBody(req)}, out)
	if err != nil {
		return nil, r, err
	}
	if out.CmdID == "" {
		return nil, r, fmt.Errorf("%w: %s: no cmdId", ErrMalformedResponse, rSessionExec)
	}
	return out, r, nil
}

// GetSessionCommand returns a command's status; ExitCode set ⇒ finished
// and its log complete.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/GET/process/session/{sessionId}/command/{commandId}
func (s *ToolboxService) GetSessionCommand(ctx context.Context, ref SandboxRef, sessionID, commandID string) (*Command, *Response, error) {
	out := new(Command)
	r, err := s.client.do(ctx, &call{rt: rGetCommand, ref: ref, args: []string{sessionID, commandID}}, out)
	if err != nil {
		return nil, r, err
	}
	return out, r, nil
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

type inputBody struct {
	Data string `json:"data"`
}

// SendInput writes data to the stdin of an async command (the daemon adds
// a trailing newline if missing). A finished command is a 410 (ErrGone).
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/POST/process/session/{sessionId}/command/{commandId}/input
func (s *ToolboxService) SendInput(ctx context.Context, ref SandboxRef, sessionID, commandID, data string) (*Response, error) {
	return s.client.do(ctx, &call{rt: rSendInput, ref: ref, args: []string{sessionID, commandID}, body: jsonBody(inputBody{Data: data})}, nil)
}
