// Package rpc is the worker's side of the Paperclip plugin protocol: JSON-RPC
// 2.0 over newline-delimited JSON on stdio, built on
// github.com/sourcegraph/jsonrpc2.
//
// It is layered like the Go team's jsonrpc2 stack:
//
//   - framing ([newStream]): one JSON object per line, CRLF accepted, blank
//     lines ignored, frames up to [DefaultMaxFrame] bytes. A malformed line is
//     answered with a -32700 parse error (id null) and reading goes on; an
//     over-limit line is discarded while it streams in, never buffered whole.
//     Request ids are echoed verbatim with their JSON type, whatever the
//     library underneath supports. Every frame is written with one
//     mutex-guarded Write, and nothing else writes to the output.
//   - dispatch ([Server]): every request runs in its own tracked goroutine
//     under its own context; panics become -32002 errors; unknown methods
//     -32601. The [Registry] is the single source of the supportedMethods list
//     that initialize returns.
//   - worker→host traffic ([Notify], [Call], [ExecuteLog]): notifications and
//     requests made while serving a host request echo that request's
//     paperclipInvocationId automatically, and stop doing so once it answered.
//
// rpc knows nothing about Daytona; provider registers the environment methods.
package rpc
