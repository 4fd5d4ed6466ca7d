package rpc

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/daytonaworker/daytona-worker/internal/clamp"
)

// The error codes the worker sends: JSON-RPC's own, and the Paperclip
// worker error every failed handler is reported as unless it chooses a code
// (the host's other codes: docs/host.md#error-codes).
const (
	CodeParseError     int64 = -32700
	CodeInvalidRequest int64 = -32600
	CodeMethodNotFound int64 = -32601
	CodeInvalidParams  int64 = -32602
	CodeWorkerError    int64 = -32002
	// CodeMethodNotImplemented answers a hook the SDK knows that this
	// plugin does not implement (see notFound).
	CodeMethodNotImplemented int64 = -32004
)

// Error is a JSON-RPC error object. Handlers return it (or wrap it with %w) to
// choose the code and the structured data the host receives; any other error
// becomes CodeWorkerError with the error's text as message, as the Paperclip
// SDK does. Message and Data reach the host and its logs: never put secrets in
// them.
type Error struct {
	Code    int64
	Message string
	// Data is marshalled into error.data when non-nil (e.g. the
	// environment-creation-cleanup envelope).
	Data any
}

func (e *Error) Error() string { return e.Message }

// Is reports whether target is an *Error with the same code, so sentinel
// errors such as ErrInvalidParams match any message.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code && (t.Message == "" || t.Message == e.Message)
	}
	return false
}

// ErrInvalidParams matches, with errors.Is, every *Error with its code.
var ErrInvalidParams = &Error{Code: CodeInvalidParams}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code int64, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// InvalidParams returns a CodeInvalidParams error.
func InvalidParams(format string, args ...any) *Error {
	return Errorf(CodeInvalidParams, format, args...)
}

// Coded lets packages that do not import rpc choose a JSON-RPC code for their
// typed errors.
type Coded interface {
	error
	RPCCode() int64
}

// DataCarrier lets a typed error attach structured error.data.
type DataCarrier interface {
	error
	RPCData() any
}

// MaxErrorMessage bounds the message of an error sent to the host.
const MaxErrorMessage = 8 << 10

// wireError converts a handler's error to the object sent to the host.
func wireError(err error) *wireErr {
	var e *Error
	out := &wireErr{Code: CodeWorkerError, Message: err.Error()}
	var data any
	switch {
	case errors.As(err, &e):
		out.Code = e.Code
		data = e.Data
	default:
		var c Coded
		if errors.As(err, &c) {
			out.Code = c.RPCCode()
		}
	}
	if data == nil {
		var d DataCarrier
		if errors.As(err, &d) {
			data = d.RPCData()
		}
	}
	if out.Message == "" {
		out.Message = "worker error"
	}
	// Each value a message quotes is capped where it is quoted; this is
	// the backstop for any path that forgot, so hostile input can never
	// turn into a multi-megabyte error on the wire or in the host's logs.
	// Otherwise the message leaves exactly as the handler made it: the host
	// and operators match the provider's own texts (the acquisition and
	// liveness timeouts name their budget and call), so nothing is
	// prefixed, even to an error that wraps a deadline.
	out.Message = clamp.Truncate(out.Message, MaxErrorMessage)
	if data != nil {
		if b, merr := json.Marshal(data); merr == nil {
			out.Data = b
		}
	}
	return out
}

type wireErr struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}
