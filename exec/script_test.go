package exec

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestBuildScriptExact(t *testing.T) {
	s := buildScript("printf", []string{"hello"}, "/workspace", map[string]string{"FOO": "bar"}, "")
	got := s.String()
	want := profilePrelude + ` && cd '/workspace' && env GIT_TERMINAL_PROMPT='0' GCM_INTERACTIVE='Never' GIT_ASKPASS='echo' SSH_ASKPASS='echo' SSH_ASKPASS_REQUIRE='force' FOO='bar' 'printf' 'hello'`
	assert.Equal(t, want, got)
	assert.True(t, strings.HasPrefix(got, "if [ -f /etc/profile ]; then"))
	assert.NotContains(t, got, "nvm.sh")
	assert.NotContains(t, got, "exec ")
	// The session path's form differs by exec before the final env only.
	assert.Equal(t, profilePrelude+` && cd '/workspace' && exec env GIT_TERMINAL_PROMPT='0' GCM_INTERACTIVE='Never' GIT_ASKPASS='echo' SSH_ASKPASS='echo' SSH_ASKPASS_REQUIRE='force' FOO='bar' 'printf' 'hello'`, s.execLast())

	s = buildScript("cat", nil, "", map[string]string{"GIT_ASKPASS": "my helper", "B": "2", "A": "1"}, "/tmp/paperclip-stdin-x")
	got = s.String()
	assert.True(t, strings.HasSuffix(got, ` && env GIT_TERMINAL_PROMPT='0' GCM_INTERACTIVE='Never' GIT_ASKPASS='my helper' SSH_ASKPASS='echo' SSH_ASKPASS_REQUIRE='force' A='1' B='2' 'cat' < '/tmp/paperclip-stdin-x'`), got)
	assert.NotContains(t, got, " && cd ")
}

// TestBuildScriptQuotesEveryWord: the command and each argument reach the
// shell as one literal word in the reference '"'"' form, whatever they hold.
func TestBuildScriptQuotesEveryWord(t *testing.T) {
	got := buildScript("abc", []string{"", "it's", "$(rm -rf /) `x` \"q\""}, "", nil, "").String()
	assert.True(t, strings.HasSuffix(got, ` 'abc' '' 'it'"'"'s' '$(rm -rf /) `+"`x`"+` "q"'`), got)
}

func TestGitNetworkDetection(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		args []string
		want bool
	}{
		{"git", []string{"push"}, true},
		{"/usr/bin/git", []string{"fetch", "origin"}, true},
		{"git", []string{"-C", "repo", "pull"}, true},
		{"git", []string{"-c", "http.x=y", "--git-dir", "d", "--work-tree", "w", "clone", "u"}, true},
		{"git", []string{"--no-pager", "ls-remote"}, true},
		{"git", []string{"remote", "update"}, true},
		{"git", []string{"submodule", "update", "--init"}, true},
		{"git", []string{"remote", "-v"}, false},
		{"git", []string{"status"}, false},
		{"git", []string{"-C", "push"}, false},
		{"git", nil, false},
		{"gitx", []string{"push"}, false},
		{"sh", []string{"-c", "git push"}, false},
	} {
		assert.Equal(t, c.want, isGitNetworkCommand(c.cmd, c.args), "%s %v", c.cmd, c.args)
	}
}

func TestToTimeoutSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{
		time.Millisecond:        1,
		time.Second:             1,
		1001 * time.Millisecond: 2,
		2 * time.Hour:           7200,
	} {
		assert.Equal(t, want, toTimeoutSeconds(d), "%v", d)
	}
}
