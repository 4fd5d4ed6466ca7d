package livetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGate(t *testing.T) {
	for name, tc := range map[string]struct {
		env      map[string]string
		skip     bool
		err      error
		wantLive Account
	}{
		"unset":                  {env: nil, skip: true},
		"key alone starts none":  {env: map[string]string{KeyEnv: "k"}, skip: true},
		"not exactly 1":          {env: map[string]string{Env: "true", KeyEnv: "k"}, skip: true},
		"opted in without a key": {env: map[string]string{Env: "1"}, err: ErrNoKey},
		"opted in": {env: map[string]string{Env: "1", KeyEnv: "k", URLEnv: "https://x/api", TargetEnv: "eu", SnapshotEnv: "s"},
			wantLive: Account{APIKey: "k", APIURL: "https://x/api", Target: "eu", Snapshot: "s"}},
	} {
		t.Run(name, func(t *testing.T) {
			l, skip, err := Gate(func(k string) string { return tc.env[k] })
			require.ErrorIs(t, err, tc.err)
			assert.Equal(t, tc.skip, skip != "", "skip %q", skip)
			if tc.skip {
				assert.Contains(t, skip, "DAYTONA_LIVE=1", "the skip says how to run the tier")
			}
			assert.Equal(t, tc.wantLive, l)
		})
	}
}

// recTB records what Require did to a test.
type recTB struct {
	testing.TB
	fatal, skip string
}

func (r *recTB) Helper()        {}
func (r *recTB) Fatal(a ...any) { r.fatal = fmt.Sprint(a...) }
func (r *recTB) Skip(a ...any)  { r.skip = fmt.Sprint(a...) }

// TestRequireFailsOrSkips: DAYTONA_LIVE=1 without a key fails the
// test (it must not pass green having run nothing); unset, it skips.
func TestRequireFailsOrSkips(t *testing.T) {
	t.Setenv(Env, "1")
	t.Setenv(KeyEnv, "")
	r := &recTB{}
	Require(r)
	assert.Contains(t, r.fatal, "DAYTONA_API_KEY is not set")
	assert.Empty(t, r.skip)

	t.Setenv(Env, "")
	t.Setenv(KeyEnv, "secret-key")
	r = &recTB{}
	Require(r)
	assert.Empty(t, r.fatal)
	assert.Contains(t, r.skip, "make live")
}

func TestCapacity(t *testing.T) {
	n, err := Capacity(func(string) string { return "" })
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	n, err = Capacity(func(string) string { return "7" })
	require.NoError(t, err)
	assert.Equal(t, 7, n)
	for _, bad := range []string{"0", "-2", "x"} {
		_, err = Capacity(func(string) string { return bad })
		assert.Error(t, err, bad)
	}
}
