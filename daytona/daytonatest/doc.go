// Package daytonatest is an in-process emulator of the Daytona API for tests.
package daytonatest
