// Package provider is the Daytona sandbox-provider driver of the worker: it
// serves the Paperclip environment methods (validate, probe, acquire,
// realize, resume, release, destroy, stop, execute, sync, runner ingress,
// interactive setup, templates) on top of the
// daytona client, the exec and sync packages and cleanup's ownership rules,
// one file per host method (validate.go, probe.go, acquire.go, resume.go,
// realize.go, teardown.go, execute.go, filesync.go, ingress.go,
// interactive.go, template.go) around the shared account, sandbox-handle and
// scope state; the terminal channels are package channel's, which it gives
// the leases it served (leases.go) and whose channels it ends on teardown.
// cmd/daytona-worker registers it.
// It never speaks JSON-RPC frames or HTTP itself. Which of its tests cover
// which upstream reference test title is in docs/reference-tests.md.
package provider
