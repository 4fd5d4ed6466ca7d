package clamp

import (
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestMillis(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want time.Duration
	}{
		{0, 0}, {-5, 0}, {math.NaN(), 0}, {math.Inf(-1), 0},
		{1, time.Millisecond}, {1500, 1500 * time.Millisecond},
		{86_400_000, 24 * time.Hour}, {86_400_001, 24 * time.Hour},
		{1e13, 24 * time.Hour}, {9e15, 24 * time.Hour}, {math.MaxFloat64, 24 * time.Hour}, {math.Inf(1), 24 * time.Hour},
	} {
		if got := Millis(c.in); got != c.want {
			t.Errorf("Millis(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if got := Millis(int64(math.MaxInt64)); got != MaxDuration {
		t.Errorf("Millis(MaxInt64) = %v", got)
	}
	if got := Millis(int64(math.MinInt64)); got != 0 {
		t.Errorf("Millis(MinInt64) = %v", got)
	}
}

func TestEcho(t *testing.T) {
	if got := Echo("short"); got != "short" {
		t.Errorf("Echo(short) = %q", got)
	}
	long := strings.Repeat("é", 10<<20)
	got := Echo(long)
	if utf8.RuneCountInString(got) != MaxEcho+1 || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("Echo(10 MiB) = %d characters, valid %v", utf8.RuneCountInString(got), utf8.ValidString(got))
	}
	if got := Echo(strings.Repeat("é", MaxEcho)); got != strings.Repeat("é", MaxEcho) {
		t.Errorf("Echo(%d two-byte characters) was cut", MaxEcho)
	}
	if got := Truncate("abc", -1); got != "…" {
		t.Errorf("Truncate(n<0) = %q", got)
	}
}
