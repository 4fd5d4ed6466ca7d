package sync

import "syscall"

// ctime is a file's status-change time in nanoseconds.
func ctime(st *syscall.Stat_t) int64 { return st.Ctim.Nano() }
