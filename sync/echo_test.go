package sync

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClip(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "short", clip("short"))
	exact := strings.Repeat("a", maxEcho)
	assert.Equal(t, exact, clip(exact))
	assert.Equal(t, exact+"…", clip(exact+"b"))
	wide := strings.Repeat("ü", maxEcho) // 1024 bytes, 512 characters: kept whole
	assert.Equal(t, wide, clip(wide))
	got := clip(strings.Repeat("ü", maxEcho+1))
	assert.True(t, utf8.ValidString(got), "never splits a character")
	assert.Equal(t, maxEcho+1, utf8.RuneCountInString(got), "512 characters and the marker")
}

// TestErrorsCapEchoedInput: a 10 MB path (or kind) in a mapping gives an
// error that names it in at most 512 characters, wherever the error comes
// from: our own validation, the host filesystem or the sandbox.
func TestErrorsCapEchoedInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	huge := strings.Repeat("p", 10<<20)
	host := t.TempDir()
	writeFile(t, filepath.Join(e.root, "a.txt"), "alpha", 0o644)
	cases := []struct {
		name string
		in   bool
		m    Mapping
	}{
		{"sandbox source outside the root", false, Mapping{SourcePath: "/elsewhere/" + huge, TargetPath: host + "/x", Kind: KindFile}},
		{"sandbox target outside the root", true, Mapping{SourcePath: host, TargetPath: "/elsewhere/" + huge, Kind: KindDirectory}},
		{"host file source that cannot be read", true, Mapping{SourcePath: host + "/" + huge, TargetPath: e.root + "/x", Kind: KindFile}},
		{"host directory source that cannot be read", true, Mapping{SourcePath: host + "/" + huge, TargetPath: e.root + "/x", Kind: KindDirectory}},
		{"host file target that cannot be written", false, Mapping{SourcePath: e.root + "/a.txt", TargetPath: host + "/" + huge, Kind: KindFile}},
		{"host directory target that cannot be written", false, Mapping{SourcePath: e.root, TargetPath: host + "/" + huge + "/d", Kind: KindDirectory}},
		{"unknown kind", true, Mapping{SourcePath: host, TargetPath: e.root + "/x", Kind: Kind(huge)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops := []Operation{{ID: "o", Files: []Mapping{tc.m}}}
			var err error
			if tc.in {
				_, err = SyncIn(t.Context(), e.t, ops, Options{})
			} else {
				_, err = SyncOut(t.Context(), e.t, ops, Options{})
			}
			require.Error(t, err)
			msg := err.Error()
			require.Less(t, len(msg), 2048, "message of %d bytes: %.300s", len(msg), msg)
			assert.Contains(t, msg, strings.Repeat("p", 200)+"…", "the input is still named, clipped")
		})
	}
}

// TestNULInMappingsIsRefused: a NUL byte would make the kernel see a
// shorter path and a shell drop it; the mapping is refused before anything
// moves, naming the field.
func TestNULInMappingsIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := t.TempDir()
	for name, op := range map[string]Operation{
		"sourcePath":          {ID: "o", Files: []Mapping{{SourcePath: host + "/a\x00b", TargetPath: e.root + "/x", Kind: KindFile}}},
		"targetPath":          {ID: "o", Files: []Mapping{{SourcePath: host, TargetPath: e.root + "/x\x00y", Kind: KindDirectory}}},
		"exclude pattern":     {ID: "o", Files: []Mapping{{SourcePath: host, TargetPath: e.root + "/x", Kind: KindDirectory, Exclude: []string{"*.lo\x00g"}}}},
		"post-upload command": {ID: "o", PostUploadCommands: []Command{{Command: "ec\x00ho hi"}}},
	} {
		t.Run(name, func(t *testing.T) {
			e.srv.ResetRequests()
			_, err := SyncIn(t.Context(), e.t, []Operation{op}, Options{})
			require.ErrorIs(t, err, ErrInvalidOperation)
			assert.Contains(t, err.Error(), name+" contains a NUL byte")
			assert.Zero(t, e.srv.CountRequests("", ""), "nothing reached the sandbox")
		})
	}
}

// TestSentinelErrors: a sentinel is its own message and matches through
// wrapping, and only itself.
func TestSentinelErrors(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("context: %w", ErrTransfer)
	assert.ErrorIs(t, err, ErrTransfer)
	assert.NotErrorIs(t, err, ErrStream)
	assert.NotErrorIs(t, err, errors.New(ErrTransfer.Error()), "an equal text of another type is another error")
	assert.Equal(t, "daytona_sandbox_not_found", ErrSandboxNotFound.Error())
}
