package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
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
		var out bytes.Buffer // written only under the stream's write lock
		if err := Serve(context.Background(), bytes.NewReader(data), &out, Options{Registry: reg, MaxFrame: 4096}); err != nil {
			t.Fatal(err)
		}
		checkFrames(t, out.Bytes())
	})
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
