package daytona

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// matches ErrTimeout; its output is lost. Never retried. It is ExecuteStream
// collecting the text, bounded by the client's JSON answer limit: a larger
// answer is ErrMalformedResponse (use ExecuteStream for unbounded output).
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process/POST/process/execute
func (s *ToolboxService) Execute(ctx context.Context, ref SandboxRef, req *ExecuteRequest) (*ExecuteResponse, *Response, error) {
	var text strings.Builder // String() hands over its bytes without a copy
	code, r, err := s.execute(ctx, ref, req, s.client.jsonLimit, func(p []byte) error {
		text.Write(p)
		return nil
	})
	if err != nil {
		return nil, r, err
	}
	return &ExecuteResponse{ExitCode: code, Result: text.String()}, r, nil
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
	if onResult == nil {
		return 0, nil, fmt.Errorf("%w: callback is nil", ErrInvalidArgument)
	}
	return s.execute(ctx, ref, req, 0, onResult)
}

// execute sends a one-shot execute and decodes its answer with the one
// streaming decoder; limit > 0 bounds the answer's size in bytes.
func (s *ToolboxService) execute(ctx context.Context, ref SandboxRef, req *ExecuteRequest, limit int64, onResult func(text []byte) error) (int, *Response, error) {
	if req == nil || strings.TrimSpace(req.Command) == "" {
		return 0, nil, fmt.Errorf("%w: command is empty", ErrInvalidArgument)
	}
	resp, r, err := s.client.send(ctx, &call{rt: rExecute, ref: ref, body: jsonBody(req)})
	if err != nil {
		return 0, r, err
	}
	defer resp.Body.Close()
	body := io.Reader(resp.Body)
	lr := &io.LimitedReader{R: resp.Body, N: limit + 1}
	if limit > 0 {
		body = lr
	}
	var cbErr error
	code, err := decodeOneShot(body, func(p []byte) error {
		cbErr = onResult(p)
		return cbErr
	})
	switch {
	case err == nil:
		drain(resp.Body)
		return code, r, nil
	case cbErr != nil: // the decoder stops at once and returns it
		return 0, r, cbErr
	case limit > 0 && lr.N <= 0:
		return 0, r, fmt.Errorf("%w: %s: answer larger than %d bytes", ErrMalformedResponse, rExecute, limit)
	case ctx.Err() != nil:
		return 0, r, &TransportError{Method: rExecute.method, Route: rExecute.tmpl, Err: ctx.Err()}
	}
	var rf *readFailure
	if errors.As(err, &rf) {
		return 0, r, &TransportError{Method: rExecute.method, Route: rExecute.tmpl, Err: s.client.cleanTransportErr(rf.err)}
	}
	return 0, r, fmt.Errorf("%w: %s: %s", ErrMalformedResponse, rExecute, s.client.redact(err.Error()))
}
