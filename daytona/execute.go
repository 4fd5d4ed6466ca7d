package daytona

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

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
