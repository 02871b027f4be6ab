//go:build !amd64

package main

import "golang.org/x/sys/unix"

// ia32Syscall exists only on amd64, the one host architecture with a 32-bit entry to probe.
func ia32Syscall(nr, a1, a2, a3 uintptr) unix.Errno { return unix.ENOSYS }
