// Package sync is the worker's native file sync between the host and a
// Daytona sandbox: SyncIn and SyncOut apply the host's sync operations
// (file batches, directory archives streamed and verified as they travel,
// post-upload commands, the disk-full terminal fallbacks), confined to the
// lease's remote dir and with bounded memory. The provider uses it, imported
// as filesync; docs/sync.md explains its guarantees, decisions and tests.
package sync
