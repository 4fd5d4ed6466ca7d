// Package cleanup is the one home of sandbox ownership: the names and labels
// that prove a sandbox is ours (labels.go), the failed-creation envelope the
// host journals (paperclip/environment-creation-cleanup/v1,
// docs/behavior.md#envelope), verification by exact name and every ownership
// label, and delete-and-wait; provider uses it for every create and teardown.
// It never deletes a sandbox whose name and every ownership label it has not
// verified, and never treats the absence of a never-observed creation name as
// proof of removal: an uncertain outcome is reported, not guessed.
package cleanup

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"

	"github.com/daytonaworker/daytona-worker/internal/clamp"
)

// Schema is the envelope's schema id on the wire.
const Schema = "paperclip/environment-creation-cleanup/v1"

var fingerprintPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Envelope is PluginEnvironmentCreationCleanup: what the host needs to find
// and delete an allocation later, and nothing else (no provider error text,
// no credential).
type Envelope struct {
	ProviderLeaseID         string            `json:"providerLeaseId"`
	ObservedProviderLeaseID string            `json:"observedProviderLeaseId,omitempty"`
	CompanyID               string            `json:"companyId"`
	EnvironmentID           string            `json:"environmentId"`
	RunID                   string            `json:"runId,omitempty"`
	AttemptID               string            `json:"attemptId"`
	AccountFingerprint      string            `json:"accountFingerprint"`
	Labels                  map[string]string `json:"labels"`
}

// Clone returns a deep copy.
func (e Envelope) Clone() Envelope {
	e.Labels = maps.Clone(e.Labels)
	return e
}

// Validate applies the host's envelope validator, so every envelope the
// worker emits is one the host can read.
func (e Envelope) Validate() error {
	for name, v := range map[string]string{
		"providerLeaseId": e.ProviderLeaseID, "companyId": e.CompanyID,
		"environmentId": e.EnvironmentID, "attemptId": e.AttemptID,
	} {
		if !IsEnvelopeID(v) {
			return fmt.Errorf("cleanup envelope: %s is not an id", name)
		}
	}
	for name, v := range map[string]string{"runId": e.RunID, "observedProviderLeaseId": e.ObservedProviderLeaseID} {
		if v != "" && !IsEnvelopeID(v) {
			return fmt.Errorf("cleanup envelope: %s is not an id", name)
		}
	}
	if !fingerprintPattern.MatchString(e.AccountFingerprint) {
		return errors.New("cleanup envelope: accountFingerprint must be 64 lowercase hex characters")
	}
	if len(e.Labels) == 0 || len(e.Labels) > MaxEnvelopeLabels {
		return errors.New("cleanup envelope: labels must hold 1 to 16 entries")
	}
	for k, v := range e.Labels {
		if !IsLabelKey(k) || !IsEnvelopeID(v) {
			return fmt.Errorf("cleanup envelope: label %q is not valid", clamp.Echo(k))
		}
	}
	return nil
}

// ParseEnvelope reads leaseMetadata.failedCreateCleanup as the host stored it.
// It returns an error for anything the host validator would reject.
func ParseEnvelope(v any) (Envelope, error) {
	if v == nil {
		return Envelope{}, errors.New("cleanup envelope: missing")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return Envelope{}, err
	}
	var e Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return Envelope{}, fmt.Errorf("cleanup envelope: %w", err)
	}
	if err := e.Validate(); err != nil {
		return Envelope{}, err
	}
	return e, nil
}

// Diagnostic is the optional acquisitionDiagnostic (docs/behavior.md#envelope):
// where a fresh acquisition was when its budget ran out.
type Diagnostic struct {
	Phase     string `json:"phase"` // create|workspace|shell|expiry|sentinel
	ElapsedMs int64  `json:"elapsedMs"`
	BudgetMs  int64  `json:"budgetMs"`
}

// The host's bounds of a diagnostic: elapsed at most a week, a budget of one
// millisecond to one day.
const (
	maxDiagnosticElapsedMs = 7 * 24 * 60 * 60 * 1000
	maxDiagnosticBudgetMs  = 24 * 60 * 60 * 1000
)

// Validate applies the host's rules: a phase of the acquisition (inline
// cleanup is not one) and both durations inside their bounds.
func (d Diagnostic) Validate() error {
	switch d.Phase {
	case "create", "workspace", "shell", "expiry", "sentinel":
	default:
		return fmt.Errorf("cleanup envelope: acquisitionDiagnostic.phase %q is not an acquisition phase", clamp.Echo(d.Phase))
	}
	if d.ElapsedMs < 0 || d.ElapsedMs > maxDiagnosticElapsedMs {
		return fmt.Errorf("cleanup envelope: acquisitionDiagnostic.elapsedMs %d is out of range", d.ElapsedMs)
	}
	if d.BudgetMs < 1 || d.BudgetMs > maxDiagnosticBudgetMs {
		return fmt.Errorf("cleanup envelope: acquisitionDiagnostic.budgetMs %d is out of range", d.BudgetMs)
	}
	return nil
}

// Error is PluginEnvironmentCreationCleanupError: cleanup of an allocation is
// pending and the host must journal Envelope. On the wire it is a -32002
// error whose data is the envelope; Causes stay in the worker (they may hold
// provider text) and are only logged.
type Error struct {
	Message    string
	Envelope   Envelope
	Diagnostic *Diagnostic
	Causes     []error
}

func (e *Error) Error() string   { return e.Message }
func (e *Error) Unwrap() []error { return e.Causes }

// CodeWorkerError is the Paperclip worker error, the JSON-RPC code of a
// thrown error (docs/host.md#error-codes; rpc.CodeWorkerError, named here
// so this package needs no protocol import).
const CodeWorkerError int64 = -32002

// RPCCode is the JSON-RPC code the worker answers with.
func (e *Error) RPCCode() int64 { return CodeWorkerError }

// RPCData is the error.data the host validates and journals, and the one
// place every envelope is checked on its way out: a host that validates
// the record drops all of it when any part is invalid, and with it the
// allocation. So an invalid diagnostic (optional, for operators only) is
// left out and the envelope still goes; an invalid envelope, which no host
// could journal, sends no data at all.
func (e *Error) RPCData() any {
	if e.Envelope.Validate() != nil {
		return nil
	}
	data := map[string]any{"schema": Schema, "cleanup": e.Envelope}
	if e.Diagnostic != nil && e.Diagnostic.Validate() == nil {
		data["acquisitionDiagnostic"] = e.Diagnostic
	}
	return data
}
