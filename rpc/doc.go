// Package rpc is the worker's side of the Paperclip plugin protocol, JSON-RPC
// 2.0 over newline-delimited JSON on stdio, built on
// github.com/sourcegraph/jsonrpc2 and knowing nothing about Daytona:
// cmd/daytona-worker runs [Serve] with a [Registry] that provider fills with
// the environment methods (typed with the wire types in wire.go), and
// provider's execute streams live output through [LiveLog] (batched
// [ExecuteLog] notifications). The wire types are all here: wire.go, the
// channels' (channels.go), the sync-out error diagnostic (syncerror.go);
// idle.go answers the host's idle-sleep requests. stream.go says why
// responses are written next to the library rather than through it.
package rpc
