package provider

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/provider/config"
)

const attempt = "0b6c0d1e-6f4e-4c43-9d0a-6e5a4b1f2c3d"

func TestLabelKeysExact(t *testing.T) {
	// The names the TypeScript plugin uses (docs/behavior.md#labels); changing one would orphan
	// sandboxes created by the other plugin.
	assert.Equal(t, "paperclip-provider", LabelProvider)
	assert.Equal(t, "paperclip-company-id", LabelCompanyID)
	assert.Equal(t, "paperclip-environment-id", LabelEnvironmentID)
	assert.Equal(t, "paperclip-reuse-lease", LabelReuseLease)
	assert.Equal(t, "paperclip-run-id", LabelRunID)
	assert.Equal(t, "paperclip-setup-session-id", LabelSetupSessionID)
	assert.Equal(t, "paperclip-purpose", LabelPurpose)
	assert.Equal(t, "paperclip-create-attempt", LabelCreateAttempt)
	assert.Equal(t, "paperclip-task-workspace-id", LabelTaskWorkspaceID)
	assert.Equal(t, "daytona", ProviderLabelValue)
	for _, k := range []string{LabelProvider, LabelCompanyID, LabelEnvironmentID, LabelReuseLease, LabelRunID,
		LabelSetupSessionID, LabelPurpose, LabelCreateAttempt, LabelTaskWorkspaceID} {
		assert.True(t, IsLabelKey(k), k)
	}
	for _, v := range []string{PurposeInteractiveSetup, PurposeRuntimeService} {
		assert.True(t, IsEnvelopeID(v), v)
	}
}

func TestOwnershipLabels(t *testing.T) {
	// The envelope example of docs/behavior.md#envelope.
	labels, err := OwnershipLabels("company-1", "env-1", "run-1", attempt, false)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"paperclip-provider":       "daytona",
		"paperclip-company-id":     "company-1",
		"paperclip-environment-id": "env-1",
		"paperclip-reuse-lease":    "false",
		"paperclip-run-id":         "run-1",
		"paperclip-create-attempt": attempt,
	}, labels)

	labels, err = OwnershipLabels("company-1", "env-1", "", attempt, true)
	require.NoError(t, err)
	assert.Equal(t, "true", labels[LabelReuseLease])
	assert.NotContains(t, labels, LabelRunID, "run label only when the request has a runId")
	assert.Len(t, labels, 5)

	// Each call returns a fresh map.
	a, _ := OwnershipLabels("c", "e", "r", attempt, false)
	b, _ := OwnershipLabels("c", "e", "r", attempt, false)
	a["paperclip-extra"] = "x"
	assert.NotContains(t, b, "paperclip-extra")
}

// Hostile values: anything the host's envelope validator would reject must be
// refused before a sandbox is created under labels nobody could clean up.
func TestOwnershipLabelsRejectHostileValues(t *testing.T) {
	hostile := []string{
		"",
		"has space",
		"new\nline",
		"tab\t",
		"nul\x00byte",
		"semi;colon",
		"quote'",
		`dq"`,
		"../etc",
		"a/b",
		"a.b",
		"a=b",
		"a,b",
		"é",
		"ｆｕｌｌｗｉｄｔｈ",
		"emoji😀",
		"\u200bzero-width",
		"a\xffb",
		strings.Repeat("a", 201),
		"${HOME}",
		"$(id)",
	}
	for _, v := range hostile {
		for _, field := range []string{"company", "environment", "run", "attempt"} {
			args := []string{"company-1", "env-1", "run-1", attempt}
			switch field {
			case "company":
				args[0] = v
			case "environment":
				args[1] = v
			case "run":
				if v == "" {
					continue // an empty run id means "no run label"
				}
				args[2] = v
			case "attempt":
				args[3] = v
			}
			labels, err := OwnershipLabels(args[0], args[1], args[2], args[3], false)
			assert.Nil(t, labels, "%s %q", field, v)
			var lerr *LabelError
			require.ErrorAs(t, err, &lerr, "%s %q", field, v)
			// Errors name the key, never the hostile value.
			if len(v) > 3 {
				assert.NotContains(t, err.Error(), v)
			}
		}
	}
	// 200 characters is the limit for ids; the attempt id must also leave
	// room for the name prefix.
	_, err := OwnershipLabels(strings.Repeat("c", 200), "env-1", strings.Repeat("r", 200), strings.Repeat("a", MaxAttemptIDLength), false)
	require.NoError(t, err)
	_, err = OwnershipLabels("c", "e", "", strings.Repeat("a", MaxAttemptIDLength+1), false)
	var lerr *LabelError
	require.ErrorAs(t, err, &lerr)
	assert.Equal(t, LabelCreateAttempt, lerr.Key)
	assert.Len(t, CreationName(strings.Repeat("a", MaxAttemptIDLength)), MaxEnvelopeIDLength)
}

func TestValidateLabels(t *testing.T) {
	good := map[string]string{"paperclip-provider": "daytona", "paperclip-a-b-": "x_Y-9"}
	assert.NoError(t, ValidateLabels(good))
	assert.NoError(t, ValidateLabels(nil))

	for _, k := range []string{"paperclip-", "paperclip-run-id2", "paperclip-Run", "paperclip_run", "Paperclip-run",
		"other", "code-toolbox-language", "paperclip-run id", "paperclip-run\n", "paperclip-é", ""} {
		err := ValidateLabels(map[string]string{k: "v"})
		var lerr *LabelError
		require.ErrorAs(t, err, &lerr, "%q", k)
		assert.Equal(t, k, lerr.Key)
	}
	// A hostile, huge key is shortened in the message.
	huge := "paperclip-" + strings.Repeat("X", 10000)
	err := ValidateLabels(map[string]string{huge: "v"})
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 200)

	many := map[string]string{}
	for i := range MaxEnvelopeLabels {
		many["paperclip-"+strings.Repeat("a", i+1)] = "v"
	}
	assert.NoError(t, ValidateLabels(many))
	many["paperclip-one-too-many"] = "v"
	var lerr *LabelError
	require.ErrorAs(t, ValidateLabels(many), &lerr)
	assert.Empty(t, lerr.Key)
}

func TestIsEnvelopeID(t *testing.T) {
	for _, s := range []string{"a", "A-z_0", attempt, strings.Repeat("x", 200), "sandbox-123", "-", "_"} {
		assert.True(t, IsEnvelopeID(s), s)
	}
	for _, s := range []string{"", strings.Repeat("x", 201), "a b", "a.b", "é", "a\n"} {
		assert.False(t, IsEnvelopeID(s), "%q", s)
	}
}

// uses distinct creation identities for concurrent attempts on the same run (test 32).
func TestCreationNames(t *testing.T) {
	assert.Equal(t, "paperclip-create-"+attempt, CreationName(attempt))
	id, ok := AttemptIDFromCreationName("paperclip-create-" + attempt)
	assert.True(t, ok)
	assert.Equal(t, attempt, id)
	for _, name := range []string{"paperclip-create-", "paperclip-env-1", "sandbox-1", "paperclip-create-a b", "xpaperclip-create-1",
		"paperclip-create-" + strings.Repeat("a", MaxAttemptIDLength+1)} {
		_, ok := AttemptIDFromCreationName(name)
		assert.False(t, ok, name)
	}

	seen := map[string]bool{}
	for range 100 {
		a := NewAttemptID()
		_, err := uuid.Parse(a)
		require.NoError(t, err)
		assert.Equal(t, strings.ToLower(a), a)
		assert.False(t, seen[a])
		seen[a] = true
		labels, err := OwnershipLabels("company-1", "env-1", "run-1", a, false)
		require.NoError(t, err)
		assert.Equal(t, a, labels[LabelCreateAttempt])
		assert.True(t, IsEnvelopeID(CreationName(a)))
	}
}

func TestCopyLabels(t *testing.T) {
	// preserves ownership when the SDK adds labels to its mutable create input (test 18):
	// the copy sent to Daytona may be mutated; the original stays intact.
	orig, err := OwnershipLabels("company-1", "env-1", "run-1", attempt, false)
	require.NoError(t, err)
	sent := CopyLabels(orig)
	sent["code-toolbox-language"] = "python"
	sent[LabelCompanyID] = "mutated"
	assert.NotContains(t, orig, "code-toolbox-language")
	assert.Equal(t, "company-1", orig[LabelCompanyID])

	empty := CopyLabels(nil)
	require.NotNil(t, empty)
	empty["k"] = "v" // writable
}

// never deletes a sandbox with a mismatched label (test 25, each label) —
// the verification half; cleanup/ owns the deletion.
func TestVerifyOwnershipLabels(t *testing.T) {
	expected, err := OwnershipLabels("company-1", "env-1", "run-1", attempt, false)
	require.NoError(t, err)

	actual := CopyLabels(expected)
	actual["code-toolbox-language"] = "python" // extra labels are fine
	require.NoError(t, VerifyOwnershipLabels(expected, actual))

	for _, k := range []string{LabelCompanyID, LabelEnvironmentID, LabelRunID, LabelCreateAttempt, LabelProvider, LabelReuseLease} {
		t.Run("mismatched "+k, func(t *testing.T) {
			wrong := CopyLabels(actual)
			wrong[k] = expected[k] + "-other"
			err := VerifyOwnershipLabels(expected, wrong)
			var oerr *OwnershipError
			require.ErrorAs(t, err, &oerr)
			assert.Equal(t, k, oerr.Label)
			assert.NotContains(t, err.Error(), "-other", "values stay out of errors")

			missing := CopyLabels(actual)
			delete(missing, k)
			require.ErrorAs(t, VerifyOwnershipLabels(expected, missing), &oerr)
			assert.Equal(t, k, oerr.Label)
		})
	}
	// Case and whitespace differences are mismatches: comparison is exact.
	wrong := CopyLabels(actual)
	wrong[LabelCompanyID] = "Company-1"
	assert.Error(t, VerifyOwnershipLabels(expected, wrong))
	wrong[LabelCompanyID] = "company-1 "
	assert.Error(t, VerifyOwnershipLabels(expected, wrong))

	// An expectation that proves nothing never verifies.
	var oerr *OwnershipError
	require.ErrorAs(t, VerifyOwnershipLabels(nil, actual), &oerr)
	require.ErrorAs(t, VerifyOwnershipLabels(map[string]string{}, map[string]string{}), &oerr)
	require.ErrorAs(t, VerifyOwnershipLabels(map[string]string{LabelCompanyID: "company-1"}, actual), &oerr)
	assert.Equal(t, LabelProvider, oerr.Label)
	var lerr *LabelError
	require.ErrorAs(t, VerifyOwnershipLabels(map[string]string{LabelProvider: "daytona", "bad key": "x"}, actual), &lerr)
	assert.NoError(t, VerifyOwnershipLabels(map[string]string{LabelProvider: "daytona"}, actual))
	assert.Error(t, VerifyOwnershipLabels(expected, nil))

	// Neither map is modified.
	before := CopyLabels(expected)
	_ = VerifyOwnershipLabels(expected, actual)
	assert.Equal(t, before, expected)
	assert.False(t, errors.Is(VerifyOwnershipLabels(expected, actual), config.ErrInvalid))
}
