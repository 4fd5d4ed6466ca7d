package daytonatest

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noteBuffer takes the note as it is written, from any goroutine.
type noteBuffer struct {
	mu   sync.Mutex
	text []byte
}

func (n *noteBuffer) Write(p []byte) (int, error) {
	n.mu.Lock()
	n.text = append(n.text, p...)
	n.mu.Unlock()
	return len(p), nil
}

func (n *noteBuffer) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return string(n.text)
}

// withNote routes the fallback note to a fresh once and buffer.
func withNote(t *testing.T) *noteBuffer {
	w := &noteBuffer{}
	noteMu.Lock()
	old := note
	note = &fallbackNote{w: w}
	noteMu.Unlock()
	t.Cleanup(func() {
		noteMu.Lock()
		note = old
		noteMu.Unlock()
	})
	return w
}

// Forcing the host layout (WithIsolation, or the environment variable
// for a whole run) is said once on stderr, naming why, however many
// servers start; the sandboxes then have today's host paths.
func TestIsolationOffFallsBackAndSaysSoOnce(t *testing.T) {
	w := withNote(t)
	t.Setenv(IsolationEnv, "off")
	for range 3 {
		for _, s := range []*Server{New(WithIsolation(IsolationOff)), New()} {
			ok, why := s.Isolated()
			assert.False(t, ok)
			assert.Contains(t, why, "isolation turned off")
			s.mu.Lock()
			sb, err := s.newSandboxLocked("", "")
			s.mu.Unlock()
			require.NoError(t, err)
			assert.Equal(t, sb.hostHome, sb.home, "host paths")
			assert.True(t, strings.HasPrefix(sb.home, s.Dir()+"/"), sb.home)
			s.Close()
		}
	}
	lines := strings.Split(strings.TrimSuffix(w.String(), "\n"), "\n")
	require.Len(t, lines, 1, w.String())
	assert.Contains(t, lines[0], "daytonatest: sandboxes use the host layout")
	assert.Contains(t, lines[0], "DAYTONATEST_ISOLATION=off")
}

// An unknown isolation value is a fallback with a reason, not a crash.
func TestIsolationUnknownFallsBack(t *testing.T) {
	w := withNote(t)
	s := New(WithIsolation("chroot"))
	defer s.Close()
	ok, why := s.Isolated()
	assert.False(t, ok)
	assert.Contains(t, why, `unknown isolation "chroot"`)
	assert.Contains(t, w.String(), `unknown isolation "chroot"`)
}
