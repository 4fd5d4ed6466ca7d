// Package daytona is a typed client for the Daytona API (release v0.190.0):
// the REST control plane (sandboxes), the in-sandbox toolbox API (process,
// sessions, files, PTY) and its WebSocket streams.
//
// The official Daytona Go SDK cannot be downloaded from the module proxy, so
// this package speaks the HTTP/WebSocket API directly, from
// docs/daytona.md and the Daytona OpenAPI documents (checked through
// testdata/openapi-facts.txt, see generate.go). Its surface is shaped so that swapping in the SDK
// later touches only this package: callers see concrete request/response
// types, typed errors and streams, never raw HTTP.
//
// The shape follows google/go-github: one [Client] built by [NewClient] with
// validating options, services as fields ([Client.Sandboxes],
// [Client.Toolbox], [Client.Files], [Client.PTY]) sharing one service struct,
// and methods of the form (ctx, ...) (T, *Response, error).
//
//	c, err := daytona.NewClient(daytona.WithAPIKey(key))
//	sb, _, err := c.Sandboxes.Create(ctx, &daytona.CreateSandboxRequest{Snapshot: "base"})
//	sb, err = c.Sandboxes.WaitUntilStarted(ctx, sb.ID)
//	res, _, err := c.Toolbox.Execute(ctx, sb.Ref(), &daytona.ExecuteRequest{Command: "uname -a"})
//
// Time limits: no call carries a hidden timeout (the official SDK cuts every
// call at 60 s, which breaks long transfers and commands). The caller's
// context is the only deadline.
//
// Errors: non-2xx answers become [*ErrorResponse] (or [*RateLimitError] for
// 429), which match the sentinels [ErrNotFound], [ErrConflict],
// [ErrRateLimited], [ErrBadRequest], [ErrQuota], [ErrUnauthorized],
// [ErrForbidden], [ErrGone], [ErrContainerMissing], [ErrTimeout] and
// [ErrServer] with errors.Is. Error bodies are read through a 1 MiB limit.
// The API key, preview tokens and signed URLs are redacted from every error
// string; the package itself never logs.
//
// Retries: only idempotent reads (on network errors, 502/503/504 and 429) and
// lifecycle calls rejected with 429 plus a Retry-After header are retried,
// with github.com/cenkalti/backoff/v4 under the caller's context. Create,
// exec and upload are never retried.
//
// Toolbox calls are addressed with a [SandboxRef] (sandbox ID plus the
// sandbox's toolboxProxyUrl, see docs/daytona.md#toolbox-address); [Sandbox.Ref] builds
// one from a sandbox DTO.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/
package daytona
