// Package provider is the Daytona sandbox-provider driver of the worker: it
// serves the Paperclip environment methods (validate, probe, acquire,
// realize, resume, release, destroy, stop) on top of the daytona client, the
// exec and sync packages and cleanup's ownership envelopes. It never speaks
// JSON-RPC frames or HTTP itself.
//
// The configuration layer lives in config.go, labels.go and canonical.go:
//
//   - ParseConfig reads an environment config leniently, with the JavaScript
//     coercions of the TypeScript plugin (plugin-behavior.md §2.1); Validate
//     and ValidateConfig produce the reference error messages in the
//     reference order (§2.2); Normalize produces normalizedConfig. Config
//     never prints its API key (fmt, slog, encoding/json all redact it).
//   - RuntimeCreateSource, ToTimeoutSeconds, ResolveTimeoutMs,
//     EffectiveAutoStopMinutes (the warm-window floor, §13.1) and
//     StaleHandleThreshold (§6.4) are the small runtime rules.
//   - OwnershipLabels, CreationName and VerifyOwnershipLabels are the names
//     and labels that prove a sandbox is ours (§3.2, §3.6).
//   - StableStringify, ShellQuote and AccountFingerprint must be bit-identical
//     with the reference (§2.4, §3.6): sentinel tokens and fingerprints of
//     leases created by the TypeScript plugin are hashes of their output.
//
// Where the seeds define behaviour the published host lacks (§13), the
// package follows the seeds; decisions the specs leave open are documented
// next to the code that makes them.
package provider
