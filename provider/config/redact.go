package config

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/daytonaworker/daytona-worker/internal/jsvalue"
)

// How a Config keeps its API key out of fmt, slog and encoding/json: the key
// is not a field but an unexported pointer to a masked copy. encoding/json
// (and so slog's JSON handler) skips unexported fields; fmt (and so slog's
// text handler) prints a pointer inside a struct as its address, for every
// verb; reflection-based dumpers that do follow pointers (spew, testify's
// diffs) find only the masked bytes. That holds without any method, so Config
// has no String, Format, LogValue or MarshalJSON: nothing in the worker
// formats a Config, and methods nobody calls would be dead code guarding
// what the representation already guarantees. TestConfigRedaction pins it.
//
// Normalized is different: it carries the key in plain text because the
// host needs it on the wire (as JSON), so its fmt and slog forms are
// redacted by Format and LogValue below.

// secret is the API key masked (XOR with a random per-process pad whose
// bytes are never zero), so that even a dumper following the pointer never
// sees the key; equal keys still compare equal (reflect.DeepEqual) within
// the process. It is a string type, not a struct: fmt prints a pointer to a
// struct as &{...} when a verb does not suit it (%s, %q, %d), but a pointer
// to a string only ever as an address.
type secret string

var secretPad = newSecretPad()

func newSecretPad() [32]byte {
	var pad [32]byte
	_, _ = rand.Read(pad[:]) // crypto/rand.Read never fails (it aborts the process instead)
	for i := range pad {
		if pad[i] == 0 {
			pad[i] = 0xa5 // a zero byte would leave that key byte readable
		}
	}
	return pad
}

// sealSecret masks plain; "" (no key) is nil.
func sealSecret(plain string) *secret {
	if plain == "" {
		return nil
	}
	return new(secret(xorPad(plain)))
}

func (s *secret) reveal() string {
	if s == nil {
		return ""
	}
	return xorPad(string(*s))
}

func xorPad(s string) string {
	b := []byte(s)
	for i := range b {
		b[i] ^= secretPad[i%len(secretPad)]
	}
	return string(b)
}

// RedactedPlaceholder is the placeholder shown instead of the API key.
const RedactedPlaceholder = "[REDACTED]"

// redacted returns n's JSON object with apiKey replaced by
// RedactedPlaceholder (still null when no key is configured).
func (n Normalized) redacted() map[string]any {
	if n.APIKey != nil {
		n.APIKey = new(RedactedPlaceholder)
	}
	b, err := json.Marshal(n)
	if err != nil {
		// Only a hand-built Normalized holding NaN or ±Inf gets here.
		return map[string]any{"error": err.Error()}
	}
	v, _ := jsvalue.ParseJSON(b) // json.Marshal wrote one valid object
	m, _ := v.(map[string]any)
	return m
}

// Format makes every fmt verb (%v, %+v, %#v, %s, %q, %d, %x, ...) print the
// redacted view as canonical JSON; without it, fmt would print the key.
func (n Normalized) Format(s fmt.State, verb rune) {
	text, err := jsvalue.StableStringify(n.redacted())
	if err != nil {
		text = []byte("{}")
	}
	out := "config.Normalized" + string(text)
	if verb == 'q' {
		out = strconv.Quote(out)
	}
	_, _ = s.Write([]byte(out))
}

// LogValue makes slog log the redacted view, one attribute a key.
func (n Normalized) LogValue() slog.Value {
	m := n.redacted()
	attrs := make([]slog.Attr, 0, len(m))
	for _, k := range jsvalue.SortedKeys(m) {
		attrs = append(attrs, slog.Any(k, m[k]))
	}
	return slog.GroupValue(attrs...)
}
