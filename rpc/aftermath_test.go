package rpc

// Written for bugs of the fresh sample of hand-planted bugs in
// docs/testing.md that no test caught.

import (
	"errors"
	"fmt"
	"testing"

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

// The library's log lines lose their line ending, CRLF included.
// (Planted: only \n stripped.)
func TestTrimNL(t *testing.T) {
	for in, want := range map[string]string{"x\n": "x", "x\r\n": "x", "x\r\n\r\n": "x", "x": "x", "": "", "a\nb\n": "a\nb"} {
		require.Equal(t, want, string(trimNL([]byte(in))), "%q", in)
	}
}
