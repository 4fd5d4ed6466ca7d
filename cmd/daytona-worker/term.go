//go:build linux || darwin

package main

import (
	"syscall"
	"unsafe"
)

// isTerminal reports whether fd is a terminal: reading its terminal
// attributes succeeds only on one. (A character-device check would also
// count /dev/null, which is how scripts detach a process's stdin.)
func isTerminal(fd uintptr) bool {
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, ioctlReadTermios, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}
