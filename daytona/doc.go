// Package daytona is the worker's typed client for the Daytona API (release
// v0.190.0): the control plane (sandboxes), the in-sandbox toolbox (one-shot
// execute, sessions, logs, files, PTY) and its WebSocket streams, with typed
// errors, redaction of every secret, no hidden timeouts and retries of
// idempotent calls only; provider, exec, sync and cleanup use it, and
// docs/daytona.md describes its design and the API facts it relies on.
package daytona
