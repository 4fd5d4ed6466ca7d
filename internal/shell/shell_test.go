package shell

import (
	osexec "os/exec"
	"testing"
)

func TestQuoteIsTheReferenceForm(t *testing.T) {
	for in, want := range map[string]string{
		"":         "''",
		"a b":      "'a b'",
		"it's":     `'it'"'"'s'`,
		"$(x) `y`": "'$(x) `y`'",
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestQuoteRoundTripsThroughSh checks that sh reads every quoted word back
// as the original bytes.
func TestQuoteRoundTripsThroughSh(t *testing.T) {
	sh, err := osexec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, in := range []string{"", "'", "''", `a'b"c\d`, "$HOME", "x\ny", "*", "\x01\xff"} {
		out, err := osexec.Command(sh, "-c", "printf %s "+Quote(in)).Output()
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if string(out) != in {
			t.Errorf("sh read %q back as %q", in, out)
		}
	}
}
