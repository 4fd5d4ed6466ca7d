package config

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envWith returns an EnvLookup serving only the given variables.
func envWith(kv map[string]string) EnvLookup {
	return func(k string) (string, bool) {
		v, ok := kv[k]
		return v, ok
	}
}

var withEnvKey = envWith(map[string]string{EnvAPIKey: "env-key"})

func mustParse(t *testing.T, raw string) Config {
	t.Helper()
	c, err := Parse(json.RawMessage(raw))
	require.NoError(t, err)
	return c
}

func TestResolveAPIKeyAndFingerprint(t *testing.T) {
	c := mustParse(t, `{"apiKey":" cfg-key ","apiUrl":"https://app.daytona.io/api","target":"us"}`)
	k, err := ResolveAPIKey(c, withEnvKey)
	require.NoError(t, err)
	assert.Equal(t, "cfg-key", k, "config key wins over DAYTONA_API_KEY")

	c = mustParse(t, `{}`)
	k, err = ResolveAPIKey(c, envWith(map[string]string{EnvAPIKey: "  env-key \n"}))
	require.NoError(t, err)
	assert.Equal(t, "env-key", k, "env key is trimmed")

	_, err = ResolveAPIKey(c, nil)
	assert.ErrorIs(t, err, ErrMissingAPIKey)
	assert.Equal(t, MsgAPIKeyRequired, err.Error())

	// fingerprint is the account identity the provider derives for a config:
	// the resolved key (none = null) and apiUrl.
	fingerprint := func(c Config, env EnvLookup) string {
		key, _ := ResolveAPIKey(c, env)
		return AccountFingerprint(key, c.APIURL)
	}
	// The fingerprint ignores target (test 154: the host fills in the actual
	// region later) and follows the resolved key and apiUrl.
	a := mustParse(t, `{"apiKey":"test-key"}`)
	b := mustParse(t, `{"apiKey":"test-key","target":"eu","image":"x"}`)
	assert.Equal(t, fingerprint(a, nil), fingerprint(b, nil))
	assert.Equal(t, "c231e5699afa53aecca21ad4c1fbdf9dfa02efbb9f73ef9cc137ddd2bf5403a6", fingerprint(a, nil))
	assert.Equal(t, fingerprint(a, nil), fingerprint(mustParse(t, `{}`), envWith(map[string]string{EnvAPIKey: "test-key"})))
	// fences failed-creation retries by account (test 23): another key or
	// endpoint is another account.
	assert.NotEqual(t, fingerprint(a, nil), fingerprint(mustParse(t, `{"apiKey":"other"}`), nil))
	assert.NotEqual(t, fingerprint(a, nil), fingerprint(mustParse(t, `{"apiKey":"test-key","apiUrl":"https://x.example/api"}`), nil))
	assert.Equal(t, AccountFingerprint("", ""), fingerprint(mustParse(t, `{}`), nil))

	assert.Equal(t, "k2", mustParse(t, `{"apiKey":" k2 "}`).APIKey())
	assert.Equal(t, "", mustParse(t, `{"apiKey":"  "}`).APIKey())
}

func TestCreationTTLMinutes(t *testing.T) {
	m, err := mustParse(t, `{"ttlMinutes":30}`).CreationTTLMinutes()
	require.NoError(t, err)
	assert.Equal(t, int64(30), m)
	m, err = mustParse(t, `{}`).CreationTTLMinutes()
	require.NoError(t, err)
	assert.Zero(t, m)
	// An invalid value in an unvalidated config fails closed instead of
	// silently creating a sandbox without the lifetime the operator set.
	_, err = mustParse(t, `{"ttlMinutes":"1.5"}`).CreationTTLMinutes()
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	assert.Equal(t, []string{MsgTTLMinutesInvalid}, verr.Errors)
}

// Parsing and helpers are pure: concurrent use is race-free.
// TestConcurrentUse: the config functions share no mutable state. Eight
// goroutines get exactly the answers one goroutine gets, and the parsed
// Config they all read is left as it was.
func TestConcurrentUse(t *testing.T) {
	raw := json.RawMessage(`{"apiKey":"k","image":"i","cpu":2,"warmRunnerIdleTimeoutMs":900000,"reuseLease":true}`)
	c := mustParse(t, string(raw))
	type answers struct {
		problems    []string
		fingerprint string
		printed     string
		autoStop    int64
		normalized  Normalized
		err         error
	}
	compute := func() answers {
		n, err := ValidateAndNormalize(raw, nil)
		return answers{Validate(raw, withEnvKey), AccountFingerprint(c.APIKey(), c.APIURL),
			fmt.Sprint(c, Normalize(c)), EffectiveAutoStopMinutes(c, true, 0), n, err}
	}
	want := compute()
	require.NoError(t, want.err)
	require.Empty(t, want.problems)
	require.EqualValues(t, 20, want.autoStop, "the warm floor: 15 min of idle window + 5")
	before := fmt.Sprintf("%#v", c)

	got := make(chan answers, 8*50)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				got <- compute()
			}
		})
	}
	wg.Wait()
	close(got)
	n := 0
	for a := range got {
		n++
		require.Equal(t, want, a)
	}
	require.Equal(t, 8*50, n)
	require.Equal(t, before, fmt.Sprintf("%#v", c), "nothing wrote to the shared Config")
}

func TestAccountFingerprint(t *testing.T) {
	// Digests computed with Node's crypto over the reference stableStringify.
	assert.Equal(t, "c231e5699afa53aecca21ad4c1fbdf9dfa02efbb9f73ef9cc137ddd2bf5403a6", AccountFingerprint("test-key", ""))
	assert.Equal(t, "180f7677fea535012172e8d6b12ce850192b1c706dac56edad81785196400381", AccountFingerprint("", "https://app.daytona.io/api"))
	assert.Equal(t, "0b08987ed4f6da63800f8cf49807f5360cdd139169ca0d54af56326e17279fb4", AccountFingerprint("dtn_secret", "https://app.daytona.io/api"))

	// hands non-secret cleanup ownership to the host when creation is uncertain (test 17):
	// 64 lowercase hex, and nothing of the key in it.
	fp := AccountFingerprint("dtn_secret", "")
	assert.Regexp(t, "^[0-9a-f]{64}$", fp)
	assert.NotContains(t, fp, "dtn_secret")

	// keeps account credentials and API endpoints isolated for the same sandbox ID (test 128).
	assert.NotEqual(t, AccountFingerprint("key-a", ""), AccountFingerprint("key-b", ""))
	assert.NotEqual(t, AccountFingerprint("key-a", "https://a.example/api"), AccountFingerprint("key-a", "https://b.example/api"))
}
