// Package rpc is the worker's side of the Paperclip plugin protocol, JSON-RPC
// 2.0 over newline-delimited JSON on stdio, built on
// github.com/sourcegraph/jsonrpc2 and knowing nothing about Daytona:
// cmd/daytona-worker runs [Serve] with a [Registry] that provider fills with
// the environment methods (typed with the wire types in wire.go), and
// provider's execute streams live output with [ExecuteLog]; stream.go says
// why responses are written next to the library rather than through it.
package rpc
