//go:build !linux && !darwin

package main

// isTerminal is false where the worker is not built for: the terminal notice
// is a courtesy, never needed for serving.
func isTerminal(uintptr) bool { return false }
