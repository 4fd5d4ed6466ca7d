// Package exec runs the worker's commands in a Daytona sandbox, one-shot or
// in the lease's persistent session, with live output that is never lost,
// duplicated or re-run and a result whose exit code was really observed. The
// provider uses it (imported as cmdexec) for environmentExecute and for the
// post-upload command of a file sync. How the two paths, timeouts,
// cancellation and the output cap work, and which tests check each reference
// behaviour: docs/exec.md.
package exec
