// Package clamp bounds untrusted numbers and strings before the worker uses
// them: millisecond values before they become a time.Duration (which
// overflows past about 292 years, turning a huge timeout into an instant
// deadline), and input echoed in an error message (a multi-megabyte
// parameter must not become a multi-megabyte error). It imports nothing
// of the module, so every package can use it.
package clamp

import (
	"math"
	"time"
	"unicode/utf8"
)

// MaxMillis is the largest millisecond value the worker honours: one day,
// the largest timeoutMs the configuration accepts.
const MaxMillis = 86_400_000

// MaxDuration is MaxMillis as a duration.
const MaxDuration = MaxMillis * time.Millisecond

// Millis converts milliseconds to a duration, clamped to [0, MaxDuration].
// NaN and negative values give 0; callers that treat 0 as "no limit" must
// check positivity first, as they do for the raw value.
func Millis[T int | int64 | float64](ms T) time.Duration {
	f := float64(ms)
	switch {
	case math.IsNaN(f) || f <= 0:
		return 0
	case f >= MaxMillis:
		return MaxDuration
	}
	return time.Duration(f * float64(time.Millisecond))
}

// MaxEcho bounds the input (and server text) quoted in an error message,
// in characters.
const MaxEcho = 512

// Echo is s cut to its first MaxEcho characters, with "…" appended when
// anything was cut. Counting characters, not bytes, keeps a quoted path
// the same length to a reader whatever its script.
func Echo(s string) string {
	if len(s) <= MaxEcho {
		return s // at most MaxEcho bytes, so at most MaxEcho characters
	}
	i := 0
	for n := 0; i < len(s) && n < MaxEcho; n++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	if i == len(s) {
		return s
	}
	return s[:i] + "…"
}

// Truncate is s cut to at most n bytes on a character boundary, with "…"
// appended when anything was cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
