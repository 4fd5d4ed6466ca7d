package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Neither Config nor Normalized ever prints the API key through fmt, slog
// or encoding/json (Normalized's wire JSON aside).
func TestConfigRedaction(t *testing.T) {
	const key = "dtn_SUPER_SECRET_key_0123456789"
	c := mustParse(t, `{"apiKey":"`+key+`","apiUrl":"https://app.daytona.io/api","image":"node:20","cpu":2,
		"runnerLifecycleMode":"warm","warmRunnerIdleTimeoutMs":900000,"ttlMinutes":30}`)
	require.Equal(t, key, c.APIKey())
	n := Normalize(c)

	type exported struct{ C Config }
	type unexported struct{ c Config }
	type withNormalized struct{ n Normalized }
	var outputs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x", "%T %v", "%10.3v"} {
		outputs = append(outputs,
			fmt.Sprintf(verb, c), fmt.Sprintf(verb, &c), fmt.Sprintf(verb, n), fmt.Sprintf(verb, &n),
			fmt.Sprintf(verb, exported{c}), fmt.Sprintf(verb, unexported{c}), fmt.Sprintf(verb, []Config{c}),
			fmt.Sprintf(verb, map[string]any{"cfg": c}), fmt.Sprintf(verb, withNormalized{n}),
		)
	}
	outputs = append(outputs, fmt.Sprint(c), fmt.Sprintln(c), fmt.Sprint(n), fmt.Sprintln(n))
	outputs = append(outputs, fmt.Errorf("acquire failed for %v: %w", c, errors.New("boom")).Error())

	var logs bytes.Buffer
	jsonLog := slog.New(slog.NewJSONHandler(&logs, nil))
	jsonLog.Info("config", "cfg", c, "normalized", n, "ptr", &c)
	textLog := slog.New(slog.NewTextHandler(&logs, nil))
	textLog.Info("config", "cfg", c, "normalized", n)
	textLog.Info("config", slog.Any("group", c))
	outputs = append(outputs, logs.String())

	j, err := json.Marshal(c)
	require.NoError(t, err)
	outputs = append(outputs, string(j))
	assert.NotContains(t, string(j), "apiKey", "encoding/json never sees the key field")
	j, err = json.Marshal(exported{c})
	require.NoError(t, err)
	outputs = append(outputs, string(j))

	for _, out := range outputs {
		assert.NotContains(t, out, key)
		assert.NotContains(t, out, "SUPER_SECRET")
	}
	// What a dumper following the key pointer would find is masked too.
	require.NotNil(t, c.apiKey)
	assert.NotContains(t, string(*c.apiKey), "SUPER_SECRET")
	// Printed configs still say what is configured.
	assert.Contains(t, fmt.Sprint(c), "node:20")
	assert.Contains(t, string(j), "node:20")
	// The normalized view shows a placeholder where a key is configured, and
	// null where none is.
	assert.Contains(t, fmt.Sprint(n), `"apiKey":"`+RedactedPlaceholder+`"`)
	assert.Contains(t, fmt.Sprintf("%#v", n), "node:20")
	assert.Contains(t, logs.String(), RedactedPlaceholder)
	assert.Contains(t, fmt.Sprint(Normalize(mustParse(t, `{}`))), `"apiKey":null`, "no key: null, not a placeholder")

	// Masking keeps configs comparable: same key, equal configs.
	assert.Equal(t, c, mustParse(t, `{"apiKey":"`+key+`","apiUrl":"https://app.daytona.io/api","image":"node:20","cpu":2,
		"runnerLifecycleMode":"warm","warmRunnerIdleTimeoutMs":900000,"ttlMinutes":30}`))
	assert.NotEqual(t, c, mustParse(t, `{"apiKey":"other","apiUrl":"https://app.daytona.io/api","image":"node:20","cpu":2,
		"runnerLifecycleMode":"warm","warmRunnerIdleTimeoutMs":900000,"ttlMinutes":30}`))

	// The wire form of Normalized does carry the key: the host turns it
	// into a company secret (docs/behavior.md#validation). That is the only place it appears.
	wire, err := json.Marshal(n)
	require.NoError(t, err)
	assert.Contains(t, string(wire), key)
	assert.Equal(t, key, wireMap(t, n)["apiKey"])
}
