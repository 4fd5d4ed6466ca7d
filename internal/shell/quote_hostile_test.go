package shell

import (
	osexec "os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The provider's own quoting cases, kept when its copy of Quote was removed:
// the exact form of repeated quotes and a round trip of hostile words
// through bash.
func TestQuoteHostileWords(t *testing.T) {
	assert.Equal(t, `'plain'`, Quote("plain"))
	assert.Equal(t, `''`, Quote(""))
	assert.Equal(t, `'it'"'"'s'`, Quote("it's"))
	assert.Equal(t, `''"'"''"'"''`, Quote("''"))

	bash, err := osexec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed; round trip through a real shell skipped")
	}
	// Round trip through a real shell: the quoted word must reach the
	// command as exactly the original bytes.
	hostile := []string{
		"", "it's", "''", `"$HOME"`, "$(touch /tmp/pwned)", "`id`", "a\nb", "tab\there",
		`back\slash`, "*?[]{}~!#&;|<>()", "unicode é 😀", " leading and trailing ", "-n",
	}
	for _, s := range hostile {
		out, err := osexec.Command(bash, "-c", "printf %s "+Quote(s)).Output()
		require.NoError(t, err, "%q", s)
		assert.Equal(t, s, string(out), "%q", s)
	}
}
