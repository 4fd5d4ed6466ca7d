package rpc

// Written for bugs of the fresh sample of hand-planted bugs in
// docs/testing.md that no test caught.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/daytonaworker/daytona-worker/internal/testenv"
	"github.com/stretchr/testify/require"
)

type codedErr struct{ code int64 }

func (e codedErr) Error() string  { return "typed failure" }
func (e codedErr) RPCCode() int64 { return e.code }

// A typed error of another package chooses its JSON-RPC code, also when
// wrapped; an untyped one is a worker error. (Planted: the Coded code not
// copied.)
func TestWireErrorTakesTheCodeOfACodedError(t *testing.T) {
	require.EqualValues(t, -32002, wireError(codedErr{-32002}).Code)
	require.EqualValues(t, CodeInvalidParams, wireError(fmt.Errorf("context: %w", codedErr{CodeInvalidParams})).Code)
	require.EqualValues(t, CodeWorkerError, wireError(errors.New("plain")).Code)
	require.Equal(t, "typed failure", wireError(codedErr{-32002}).Message)
}

type dataErr struct{ data any }

func (e dataErr) Error() string { return "with data" }
func (e dataErr) RPCData() any  { return e.data }

// error.data comes from an *Error's own Data, else from a DataCarrier in
// the chain (a typed error of another package: the cleanup envelope, the
// sync-out diagnostic), wrapped or not; an *Error's own Data wins over a
// carrier it wraps; nothing at all sends no data. (Sample-5 bug 24: the
// carrier consulted only when Data was set.)
func TestWireErrorData(t *testing.T) {
	require.JSONEq(t, `{"k":1}`, string(wireError(dataErr{map[string]int{"k": 1}}).Data))
	require.JSONEq(t, `{"k":2}`, string(wireError(fmt.Errorf("sync: %w", dataErr{map[string]int{"k": 2}})).Data))
	own := &Error{Code: -32002, Message: "own", Data: map[string]int{"own": 1}}
	require.JSONEq(t, `{"own":1}`, string(wireError(own).Data))
	require.JSONEq(t, `{"own":1}`, string(wireError(errors.Join(own, dataErr{map[string]int{"k": 3}})).Data), "an *Error's own data first")
	require.JSONEq(t, `{"k":4}`, string(wireError(errors.Join(&Error{Code: -32002, Message: "no data"}, dataErr{map[string]int{"k": 4}})).Data),
		"an *Error without data takes the carrier's")
	require.Nil(t, wireError(errors.New("plain")).Data)
	require.Nil(t, wireError(dataErr{nil}).Data, "a carrier without data sends none")
	b, err := json.Marshal(wireError(errors.New("plain")))
	require.NoError(t, err)
	require.JSONEq(t, fmt.Sprintf(`{"code":%d,"message":"plain"}`, CodeWorkerError), string(b), "no data member at all")
}

// The library's log lines lose their line ending, CRLF included.
// (Planted: only \n stripped.)
func TestTrimNL(t *testing.T) {
	for in, want := range map[string]string{"x\n": "x", "x\r\n": "x", "x\r\n\r\n": "x", "x": "x", "": "", "a\nb\n": "a\nb"} {
		require.Equal(t, want, string(trimNL([]byte(in))), "%q", in)
	}
}

// errors.Is with an *Error target matches on the code, and on the message
// too unless the target's is empty (a sentinel such as ErrInvalidParams
// matches every message of its code).
func TestErrorIsMatchesCodeAndMessage(t *testing.T) {
	e := &Error{Code: CodeInvalidParams, Message: "bad x"}
	for _, c := range []struct {
		target *Error
		want   bool
	}{
		{&Error{Code: CodeInvalidParams}, true},
		{&Error{Code: CodeInvalidParams, Message: "bad x"}, true},
		{&Error{Code: CodeInvalidParams, Message: "bad y"}, false},
		{&Error{Code: CodeWorkerError, Message: "bad x"}, false},
		{&Error{Code: CodeWorkerError}, false},
	} {
		require.Equal(t, c.want, errors.Is(fmt.Errorf("call: %w", e), c.target), "%+v", c.target)
	}
	require.ErrorIs(t, e, ErrInvalidParams)
	require.False(t, errors.Is(e, errors.New("bad x")), "only an *Error target")
}

// Registering without a name, without a handler, or twice is a
// programming error: it panics at once instead of failing requests later.
func TestRegisterRefusesProgrammingErrors(t *testing.T) {
	h := func(context.Context, json.RawMessage) (any, error) { return nil, nil }
	reg := NewRegistry()
	require.Panics(t, func() { reg.Register("", h) })
	require.Panics(t, func() { reg.Register("m", nil) })
	reg.Register("m", h)
	require.Panics(t, func() { reg.Register("m", h) })
}

// A typed handler takes absent params and null as its params' zero
// value; anything else is decoded, and a wrong shape is invalid params.
func TestTypedParamsAbsentOrNull(t *testing.T) {
	type params struct{ N int }
	h := Typed(func(_ context.Context, p params) (int, error) { return p.N, nil })
	for raw, want := range map[string]any{"": 0, "null": 0, `{"N":3}`: 3} {
		got, err := h(context.Background(), json.RawMessage(raw))
		require.NoError(t, err, "%q", raw)
		require.Equal(t, want, got, "%q", raw)
	}
	_, err := h(context.Background(), json.RawMessage(`[1]`))
	require.ErrorIs(t, err, ErrInvalidParams)
}

// The handler tracker: close's channel is closed only once the last
// handler in flight is done, not when any one of them is; after close no
// handler is admitted.
func TestTrackerDrainsOnlyWhenTheLastHandlerIsDone(t *testing.T) {
	var tr tracker
	require.True(t, tr.add())
	require.True(t, tr.add())
	idle := tr.close()
	require.False(t, tr.add(), "closed: nothing more admitted")
	tr.done()
	select {
	case <-idle:
		t.Fatal("drained with a handler still running")
	default:
	}
	tr.done()
	<-idle
	var none tracker
	<-none.close() // nothing in flight: drained at once
}

// Sanitize keeps each field only inside the host's allowlist, each bound
// at the bound and one past it, and reports whether anything but an
// unknown errorCode is left (any one field alone is enough).
func TestSyncDiagnosticSanitizeAtTheLimits(t *testing.T) {
	for status, kept := range map[int]bool{399: false, 400: true, 599: true, 600: false} {
		d, _ := SyncErrorDiagnostic{ErrorCode: "EIO", HTTPStatus: status}.Sanitize()
		require.Equal(t, kept, d.HTTPStatus == status, "httpStatus %d", status)
	}
	for code, kept := range map[int]bool{0: false, 1: true, 255: true, 256: false, -1: false} {
		d, _ := SyncErrorDiagnostic{ErrorCode: "EIO", ExitCode: code}.Sanitize()
		require.Equal(t, kept, d.ExitCode == code && code != 0, "exitCode %d", code)
	}
	for _, d := range []SyncErrorDiagnostic{
		{ErrorCode: "EIO"}, {ErrorCode: "nope", HTTPStatus: 500}, {ErrorCode: "nope", ExitCode: 2},
		{ErrorCode: "nope", TransferStep: "archive_extract"}, {ErrorCode: "nope", TransferFailureKind: "command_failed"},
	} {
		got, ok := d.Sanitize()
		require.True(t, ok, "%+v alone is a diagnostic", d)
		if d.ErrorCode == "nope" {
			require.Equal(t, "unknown", got.ErrorCode)
		}
	}
	got, ok := SyncErrorDiagnostic{ErrorCode: "nope", HTTPStatus: 200, ExitCode: 300, TransferStep: "x", TransferFailureKind: "y"}.Sanitize()
	require.False(t, ok, "nothing the host accepts")
	require.Equal(t, SyncErrorDiagnostic{ErrorCode: "unknown"}, got)
}

// A response from the host that answers nothing the worker asked (no id,
// an id the protocol does not allow, an id that is not a span's) is
// dropped without an answer: the next frame out answers the next request.
func TestStrayResponsesAreDroppedUnanswered(t *testing.T) {
	reg, _ := testRegistry()
	p := startPeer(t, reg, Options{})
	for i, line := range []string{
		`{"jsonrpc":"2.0","result":1}`,
		`{"jsonrpc":"2.0","id":{"x":1},"result":1}`,
		`{"jsonrpc":"2.0","id":[1],"error":{"code":1,"message":"m"}}`,
		`{"jsonrpc":"2.0","id":7,"result":1}`,
	} {
		p.send(line)
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"after-%d","method":"health"}`, i))
		require.Equal(t, fmt.Sprintf("after-%d", i), p.recv()["id"], "%s got an answer", line)
	}
}

// Answers that went out log nothing at error level, up to the end of
// serving: only a broken output is worth an operator's attention.
func TestAnsweredRequestsLogNoError(t *testing.T) {
	var logs testenv.LogBuffer
	reg, _ := testRegistry()
	p := startPeer(t, reg, Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))})
	for i := range 3 {
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"health"}`, i))
		require.Contains(t, p.recv(), "result")
	}
	p.end() // a log written after an answer went out is in place too
	require.Empty(t, logs.String())
}
