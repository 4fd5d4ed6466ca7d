package daytona

import (
	"context"
	"fmt"
	"strings"
)

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
