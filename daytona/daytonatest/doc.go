// Package daytonatest is an emulator of the Daytona API (release v0.190.0)
// for tests and cmd/daytona-sim: a control plane with Daytona's lifecycle
// state machine and a toolbox that runs commands for real on the host,
// independent of package daytona so the two agree through the wire format
// only, with fault injection and condition-based waits; the worker binary
// must never link it, and docs/emulator.md describes its behaviour and
// controls.
package daytonatest
