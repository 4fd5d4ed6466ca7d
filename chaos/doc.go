// Package chaos holds the randomized fault schedules of the worker: each
// schedule, drawn from a seed, drives an in-process worker the way the
// Paperclip host does (acquire, realize, execute, sync, resume, release,
// stop, destroy, cancelled work, concurrent calls, a worker killed and
// restarted mid-call) while the Daytona emulator injects several faults at
// once, then checks the invariants against the emulator's own records. It
// has no code outside its tests; docs/chaos.md describes the runner, its
// flags and how to replay a failing seed.
package chaos
