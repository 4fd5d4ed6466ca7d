package cleanup

import (
	"fmt"
	"maps"
	"strings"

	"github.com/google/uuid"

	"github.com/daytonaworker/daytona-worker/internal/jsvalue"
)

// Labels and names on Daytona (docs/behavior.md#labels, docs/behavior.md#create-request, docs/behavior.md#envelope, docs/behavior.md#creation-operations).
// A sandbox's name and labels are the only proof that it is ours: nothing is
// deleted unless its name and every ownership label were verified. The keys
// and values are identical to the TypeScript plugin's so that either plugin
// can clean up after the other.

// Label keys the plugin sets on sandboxes.
const (
	LabelProvider        = "paperclip-provider"          // always ProviderValue
	LabelCompanyID       = "paperclip-company-id"        // always
	LabelEnvironmentID   = "paperclip-environment-id"    // always
	LabelReuseLease      = "paperclip-reuse-lease"       // always "true" or "false"
	LabelRunID           = "paperclip-run-id"            // when the request has a runId
	LabelSetupSessionID  = "paperclip-setup-session-id"  // interactive setup
	LabelPurpose         = "paperclip-purpose"           // when a purpose applies
	LabelCreateAttempt   = "paperclip-create-attempt"    // every create: the attempt UUID
	LabelTaskWorkspaceID = "paperclip-task-workspace-id" // services branch only
)

// Label values and name parts.
const (
	// ProviderValue is the value of LabelProvider (the driver key).
	ProviderValue = "daytona"
	// PurposeInteractiveSetup and PurposeRuntimeService are LabelPurpose
	// values.
	PurposeInteractiveSetup = "interactive_setup"
	PurposeRuntimeService   = "runtime_service"
	// CreationNamePrefix starts every sandbox name the plugin creates; the
	// attempt id follows.
	CreationNamePrefix = "paperclip-create-"
	// MaxEnvelopeLabels is the most labels the host accepts in a cleanup
	// envelope (docs/behavior.md#envelope).
	MaxEnvelopeLabels = 16
	// MaxEnvelopeIDLength is the longest id the envelope accepts.
	MaxEnvelopeIDLength = 200
	// MaxAttemptIDLength keeps CreationName(attemptID) within
	// MaxEnvelopeIDLength, since the name is the envelope's providerLeaseId.
	MaxAttemptIDLength = MaxEnvelopeIDLength - len(CreationNamePrefix)
)

// LabelError reports a label set the host's envelope validator would reject
// (docs/behavior.md#envelope). It names the offending key (quoted and shortened) and the reason,
// never the value: values come from callers and may be hostile or large.
type LabelError struct {
	Key    string // "" when the problem is the set as a whole
	Reason string
}

func (e *LabelError) Error() string {
	if e.Key == "" {
		return "invalid Daytona sandbox labels: " + e.Reason
	}
	return fmt.Sprintf("invalid Daytona sandbox label %s: %s", quoteShort(e.Key), e.Reason)
}

// quoteShort quotes a caller-supplied string for an error message, cut to a
// bounded length so hostile input cannot bloat errors or logs.
func quoteShort(s string) string {
	const limit = 64
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// IsEnvelopeID reports whether s matches ^[A-Za-z0-9_-]{1,200}$, the shape the
// host requires of every envelope id and label value (docs/behavior.md#envelope).
func IsEnvelopeID(s string) bool {
	if len(s) == 0 || len(s) > MaxEnvelopeIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// IsLabelKey reports whether k matches ^paperclip-[a-z-]+$ (docs/behavior.md#envelope). Digits and
// upper case are not allowed.
func IsLabelKey(k string) bool {
	rest, ok := strings.CutPrefix(k, "paperclip-")
	if !ok || rest == "" {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !(c >= 'a' && c <= 'z' || c == '-') {
			return false
		}
	}
	return true
}

// ValidateLabels checks a label set against the host's envelope rules (docs/behavior.md#envelope):
// at most 16 labels, keys ^paperclip-[a-z-]+$, values ^[A-Za-z0-9_-]{1,200}$.
// It returns a *LabelError for the first problem (keys checked in sorted
// order, so the result is deterministic).
func ValidateLabels(labels map[string]string) error {
	if len(labels) > MaxEnvelopeLabels {
		return &LabelError{Reason: fmt.Sprintf("%d labels exceed the limit of %d", len(labels), MaxEnvelopeLabels)}
	}
	// JavaScript's key order (UTF-16), as the reference reports the first
	// bad key.
	for _, k := range jsvalue.SortedKeys(labels) {
		if !IsLabelKey(k) {
			return &LabelError{Key: k, Reason: "key must match ^paperclip-[a-z-]+$"}
		}
		if !IsEnvelopeID(labels[k]) {
			return &LabelError{Key: k, Reason: "value must be 1 to 200 characters of A-Z, a-z, 0-9, _ or -"}
		}
	}
	return nil
}

// NewAttemptID returns a fresh random attempt id (a lowercase UUID), used
// when the host supplies no creation-operation id (docs/behavior.md#create-request, docs/behavior.md#creation-operations).
func NewAttemptID() string { return uuid.NewString() }

// CreationName is the provider name of a creation attempt:
// "paperclip-create-<attemptID>" (docs/behavior.md#create-request). Callers validate attemptID through
// OwnershipLabels, which every create goes through.
func CreationName(attemptID string) string { return CreationNamePrefix + attemptID }

// OwnershipLabels returns a new map with the ownership labels of a creation
// attempt (docs/behavior.md#labels): provider, company, environment, reuse flag, create attempt,
// and the run id when runID is non-empty. Every value must be envelope-shaped
// (docs/behavior.md#envelope) — otherwise the host could not read the cleanup envelope for this
// sandbox — and attemptID must also fit CreationName within 200 characters;
// a *LabelError says which label is wrong.
//
// Each call returns a fresh map. Send a copy (CopyLabels) to Daytona — the
// SDKs add labels such as code-toolbox-language to the map they are given —
// and keep this one for ownership checks.
func OwnershipLabels(companyID, environmentID, runID, attemptID string, reuse bool) (map[string]string, error) {
	labels := map[string]string{
		LabelProvider:      ProviderValue,
		LabelCompanyID:     companyID,
		LabelEnvironmentID: environmentID,
		LabelReuseLease:    "false",
		LabelCreateAttempt: attemptID,
	}
	if reuse {
		labels[LabelReuseLease] = "true"
	}
	if runID != "" {
		labels[LabelRunID] = runID
	}
	if err := ValidateLabels(labels); err != nil {
		return nil, err
	}
	if len(attemptID) > MaxAttemptIDLength {
		return nil, &LabelError{Key: LabelCreateAttempt, Reason: fmt.Sprintf("value must be at most %d characters to fit the sandbox name", MaxAttemptIDLength)}
	}
	return labels, nil
}

// CopyLabels returns an independent copy of labels (never nil, never the
// same map).
func CopyLabels(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels))
	maps.Copy(out, labels)
	return out
}
