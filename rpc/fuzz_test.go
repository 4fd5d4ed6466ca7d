package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var fuzzSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
	`{"jsonrpc":"2.0","id":"a","method":"health"}` + "\r\n\n",
	`{"jsonrpc":"2.0","method":"configChanged","params":{"config":{}}}`,
	`{"jsonrpc":"2.0","id":2.5e3,"method":"echo","params":[1,{"x":null}]}`,
	`{"jsonrpc":"2.0","id":-1,"method":"typed","params":{"timeoutMs":"x"}}`,
	`{"jsonrpc":"2.0","id":3,"result":{}}`,
	`{"jsonrpc":"2.0","id":null,"method":"health"}`,
	`{"id":1}`, `[]`, `nul`, "\xff\xfe", `{"jsonrpc":"2.0","id":1,"method":"health"}{}`,
	`{"jsonrpc":"2.0","id":{"a":1},"method":"boom"}`,
	`{"jsonrpc":"2.0","id":7,"method":"shutdown"}` + "\n" + `{"jsonrpc":"2.0","id":8,"method":"health"}`,
}

// FuzzReader feeds arbitrary bytes to the NDJSON reader: it must never panic,
// and everything it hands the library or writes back must be one valid frame.
func FuzzReader(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		s := newStream(bytes.NewReader(data), &out, 1024, slog.New(slog.DiscardHandler))
		for {
			line, err := s.readLine()
			if err != nil {
				if _, ok := err.(*errLineTooLong); ok {
					continue
				}
				break
			}
			line = bytes.TrimSpace(line)
			if len(line) == 0 {
				continue
			}
			if b, ok := s.classify(line); ok {
				var v map[string]any
				if err := json.Unmarshal(b, &v); err != nil {
					t.Fatalf("classify admitted invalid JSON %q: %v", b, err)
				}
			}
		}
		checkFrames(t, out.Bytes())
	})
}

// FuzzDispatch runs whole Serve sessions on arbitrary input: no panic, Serve
// returns, and every output line is a JSON-RPC 2.0 frame.
func FuzzDispatch(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		reg, release := testRegistry()
		close(release)
		out, err := serveBounded(bytes.NewReader(data), reg, fuzzServeBound)
		if err != nil {
			t.Fatalf("input %q: %v", data, err)
		}
		checkFrames(t, out)
	})
}

// fuzzServeBound is how long one fuzz input may take. Serve returns within
// its shutdown grace (300 ms) of EOF, so an input still being served after
// this long hangs it: the fuzz case then fails with its input instead of
// stalling the fuzzer with no report.
const fuzzServeBound = 10 * time.Second

// serveBounded serves in and returns what Serve wrote, or an error when
// Serve has not returned within bound (its goroutine is then left behind).
func serveBounded(in io.Reader, reg *Registry, bound time.Duration) ([]byte, error) {
	var out bytes.Buffer // written only by Serve; read only after it returned
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), in, &out, Options{Registry: reg, MaxFrame: 4096}) }()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case err := <-done:
		return out.Bytes(), err
	case <-timer.C:
		return nil, fmt.Errorf("Serve did not return within %v", bound)
	}
}

// TestFuzzDispatchFailsInsteadOfHanging: an input that never lets Serve
// return (here: stdin that never ends) is reported as an error after the
// bound, which FuzzDispatch turns into a failed case.
func TestFuzzDispatchFailsInsteadOfHanging(t *testing.T) {
	reg, release := testRegistry()
	close(release)
	r, w := io.Pipe()
	defer w.Close() // lets the abandoned Serve end
	_, err := serveBounded(r, reg, 50*time.Millisecond)
	require.ErrorContains(t, err, "Serve did not return within 50ms")
	// A finished input is served and returned (a fresh registry: Serve adds
	// its built-in methods to the one it is given).
	reg, release = testRegistry()
	close(release)
	out, err := serveBounded(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}`+"\n"), reg, fuzzServeBound)
	require.NoError(t, err)
	require.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":[1]}`, strings.TrimSpace(string(out)))
}

func checkFrames(t *testing.T, out []byte) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("output line is not a JSON object: %q", sc.Bytes())
		}
		if string(m["jsonrpc"]) != `"2.0"` {
			t.Fatalf("output line without jsonrpc 2.0: %q", sc.Bytes())
		}
		_, hasID := m["id"]
		_, hasResult := m["result"]
		_, hasErr := m["error"]
		_, hasMethod := m["method"]
		if !hasMethod && (!hasID || hasResult == hasErr) {
			t.Fatalf("response must carry an id and exactly one of result/error: %q", sc.Bytes())
		}
	}
}
