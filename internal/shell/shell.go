// Package shell quotes words for the POSIX shells in a sandbox. It is the
// one quoting rule of the module: the worker's scripts, its sentinel and
// command wrappers and the emulator's own wrappers all quote through it.
package shell

import "strings"

// Quote wraps s in single quotes and writes each ' inside it as '"'"', so
// any byte string reaches the shell as one literal word. The form is the
// TypeScript plugin's, bit for bit: command scripts (and the sentinel
// hashes over them) of leases it created stay identical.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}
