package sync

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every archive limit at the limit and one past it (docs/testing.md,
// "Limits at the limit"). An archive exactly at a limit extracts whole; one
// unit more is refused with the limit's reason and nothing escapes the
// staging dir. (Planted: > for >= on the archive total.)
func TestArchiveLimitsAtTheLimit(t *testing.T) {
	reg := func(name, body string) member { return member{name: name, typ: tar.TypeReg, body: body} }
	cases := []struct {
		name   string
		lim    Limits
		ms     []member
		reason string // "" = extracts
	}{
		{"total exactly MaxTotal", Limits{MaxTotal: 8}, []member{reg("a", "0123"), reg("b", "4567")}, ""},
		{"total MaxTotal+1", Limits{MaxTotal: 8}, []member{reg("a", "0123"), reg("b", "45678")}, ReasonTotal},
		{"one file of exactly MaxTotal", Limits{MaxTotal: 4}, []member{reg("a", "0123")}, ""},
		{"entry exactly MaxEntrySize", Limits{MaxEntrySize: 4}, []member{reg("a", "0123")}, ""},
		{"entry MaxEntrySize+1", Limits{MaxEntrySize: 4}, []member{reg("a", "01234")}, ReasonOversized},
		{"exactly MaxEntries", Limits{MaxEntries: 2}, []member{reg("a", ""), reg("b", "")}, ""},
		{"MaxEntries+1", Limits{MaxEntries: 2}, []member{reg("a", ""), reg("b", ""), reg("c", "")}, ReasonTooMany},
		{"name of MaxNameLen", Limits{MaxNameLen: 8}, []member{reg(strings.Repeat("n", 8), "")}, ""},
		{"name of MaxNameLen+1", Limits{MaxNameLen: 8}, []member{reg(strings.Repeat("n", 9), "")}, ReasonOversized},
		{"link target of MaxNameLen", Limits{MaxNameLen: 8}, []member{{name: "l", typ: tar.TypeSymlink, link: strings.Repeat("t", 8)}}, ""},
		{"link target of MaxNameLen+1", Limits{MaxNameLen: 8}, []member{{name: "l", typ: tar.TypeSymlink, link: strings.Repeat("t", 9)}}, reasonLinkEscape},
		{"MaxDepth components", Limits{MaxDepth: 3}, []member{reg("a/b/c", "")}, ""},
		{"MaxDepth+1 components", Limits{MaxDepth: 3}, []member{reg("a/b/c/d", "")}, ReasonOversized},
		{"link up to the root", Limits{}, []member{{name: "a/b/l", typ: tar.TypeSymlink, link: "../../x"}}, ""},
		{"link one above the root", Limits{}, []member{{name: "a/b/l", typ: tar.TypeSymlink, link: "../../../x"}}, reasonLinkEscape},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base, x, err := extractInto(t, buildTar(t, c.ms...), c.lim, false)
			assertConfined(t, base)
			if c.reason == "" {
				require.NoError(t, err)
				require.EqualValues(t, len(c.ms), x.stats.Files, "every member extracted")
				return
			}
			var ae *ArchiveError
			require.True(t, errors.As(err, &ae), "want %q, got %v", c.reason, err)
			require.Equal(t, c.reason, ae.Reason)
		})
	}
}

// The bytes an extraction counts toward MaxTotal are the payloads it
// wrote: the total at the limit is recorded exactly.
func TestArchiveTotalCountsPayloadBytes(t *testing.T) {
	data := buildTar(t, member{name: "d/", typ: tar.TypeDir}, member{name: "d/a", typ: tar.TypeReg, body: "0123"},
		member{name: "l", typ: tar.TypeSymlink, link: "d/a"}, member{name: "b", typ: tar.TypeReg, body: "45"})
	base, x, err := extractInto(t, data, Limits{MaxTotal: 6}, false)
	require.NoError(t, err)
	require.Equal(t, extractStats{Files: 3, Bytes: 6}, x.stats)
	got, err := os.ReadFile(filepath.Join(base, "stage", "d", "a"))
	require.NoError(t, err)
	require.Equal(t, "0123", string(got))
}

// Limits left at zero take the defaults; a negative one does too.
func TestArchiveLimitDefaults(t *testing.T) {
	want := Limits{MaxEntries: DefaultMaxEntries, MaxEntrySize: DefaultMaxEntrySize, MaxNameLen: DefaultMaxNameLen, MaxDepth: DefaultMaxDepth}
	require.Equal(t, want, Limits{}.withDefaults())
	require.Equal(t, want, Limits{MaxEntries: -1, MaxEntrySize: -1, MaxNameLen: -1, MaxDepth: -1}.withDefaults())
	one := Limits{MaxEntries: 1, MaxEntrySize: 1, MaxNameLen: 1, MaxDepth: 1, MaxTotal: 1}
	require.Equal(t, one, one.withDefaults(), "1 is a limit, not unset")
}

// The omission budget of an export's first pass: unsafe links whose
// exclude arguments fit maxOmitBytes exactly are omitted; one byte more is
// refused.
func TestFirstPassOmissionBudgetAtTheLimit(t *testing.T) {
	// Each link's cost is len(excludeArg(name)); pad the last name so the
	// total lands exactly on the budget.
	var ms []member
	total := 0
	for i := 0; total+len(excludeArg("x"))+200 < maxOmitBytes; i++ {
		name := strings.Repeat("l", 100) + string(rune('a'+i%26)) + strings.Repeat("m", i/26+1)
		ms = append(ms, member{name: name, typ: tar.TypeSymlink, link: "/abs"})
		total += len(excludeArg(name))
	}
	fill := maxOmitBytes - total - len(excludeArg(""))
	last := strings.Repeat("z", fill)
	require.Equal(t, maxOmitBytes, total+len(excludeArg(last)))
	exact := append(append([]member(nil), ms...), member{name: last, typ: tar.TypeSymlink, link: "/abs"})
	_, x, err := extractInto(t, buildTar(t, exact...), Limits{}, true)
	require.NoError(t, err, "links that fit the budget exactly are omitted")
	require.Equal(t, maxOmitBytes, x.omitBytes)

	over := append(append([]member(nil), ms...), member{name: last + "z", typ: tar.TypeSymlink, link: "/abs"})
	_, _, err = extractInto(t, buildTar(t, over...), Limits{}, true)
	var ae *ArchiveError
	require.True(t, errors.As(err, &ae), "one byte over the budget: refused, got %v", err)
	require.Equal(t, reasonLinkEscape, ae.Reason)
}

// minimumTimeoutMs: 1 to 1,800,000 ms, whole numbers.
func TestMinimumTimeoutAtTheLimit(t *testing.T) {
	t.Parallel()
	for v, ok := range map[float64]bool{1: true, 0: false, 1_800_000: true, 1_800_001: false, 0.5: false} {
		_, err := ValidateMinimumTimeout(&v)
		require.Equal(t, ok, err == nil, "%v", v)
	}
	// The minimum only raises a configured limit.
	require.Equal(t, MaxMinimumTimeout, Options{Timeout: 1, MinimumTimeout: MaxMinimumTimeout}.transferTimeout())
	require.Zero(t, Options{MinimumTimeout: MaxMinimumTimeout}.transferTimeout())
}

// A file of exactly directMinSize goes direct; one byte less travels in
// the archive.
func TestDirectSizeAtTheLimit(t *testing.T) {
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "at"), make([]byte, directMinSize), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(src, "under"), make([]byte, directMinSize-1), 0o600))
	direct, err := planDirect(context.Background(), src, nil, false, nil)
	require.NoError(t, err)
	var names []string
	for _, f := range direct {
		names = append(names, f.name)
	}
	require.Equal(t, []string{"at"}, names)
}

// A mapping whose source is not of its kind is refused before anything
// is sent: a directory mapping of a file, a file mapping of a directory.
func TestMappingSourceOfTheWrongKindIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := t.TempDir()
	file := filepath.Join(host, "f.txt")
	writeFile(t, file, "f", 0o644)
	e.srv.ResetRequests()
	_, err := e.syncIn(t, Options{}, dirMapping(file, e.root+"/d"))
	require.ErrorIs(t, err, ErrInvalidOperation)
	require.ErrorContains(t, err, "is not a directory")
	_, err = e.syncIn(t, Options{}, fileMapping(host, e.root+"/f"))
	require.ErrorIs(t, err, ErrInvalidOperation)
	require.ErrorContains(t, err, "is not a regular file")
	require.NoFileExists(t, filepath.Join(e.root, "d"))
	require.NoFileExists(t, filepath.Join(e.root, "f"))
	require.Zero(t, e.srv.CountRequests("POST", "/files/bulk-upload"), "nothing uploaded")
}

// StageOf names the stage of the first sandbox command or transfer
// error in a chain, wrapped or joined, and nothing for other errors: the
// provider's sync diagnostics read it.
func TestStageOfFindsTheStageInTheChain(t *testing.T) {
	t.Parallel()
	sce := &SandboxCommandError{What: "x", Exit: 43, Stage: StageExport}
	te := &transferError{msg: "m", err: errors.New("e"), stage: StageArchiveDownload}
	require.Equal(t, StageExport, StageOf(fmt.Errorf("wrapped: %w", sce)))
	require.Equal(t, StageArchiveDownload, StageOf(errors.Join(errors.New("other"), te)))
	require.Equal(t, StageExport, StageOf(errors.Join(sce, te)), "the command error first")
	require.Equal(t, Stage(""), StageOf(errors.New("plain")))
	require.Equal(t, Stage(""), StageOf(nil))
}

// A timeout reaches the toolbox in whole seconds rounded up: a part of a
// second is a whole one, never none (0 means no timeout at all to the
// toolbox). (Sample-7 bug 20: rounded down.)
func TestTimeoutSecondsRoundUp(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]int{
		-time.Second: 0, 0: 0, time.Nanosecond: 1, 500 * time.Millisecond: 1, time.Second: 1,
		time.Second + time.Nanosecond: 2, 1500 * time.Millisecond: 2, 30 * time.Minute: 1800,
	} {
		require.Equal(t, want, seconds(d), "%s", d)
	}
}
