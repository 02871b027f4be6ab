package main

import "golang.org/x/sys/unix"

// int80 makes a syscall through the 32-bit (ia32) entry, int 0x80, which a 64-bit process can
// reach too: a seccomp filter sees it under the i386 architecture, with i386's numbers.
func int80(nr, a1, a2, a3 uintptr) uintptr

// ia32Syscall makes the ia32 syscall nr and returns its errno (0 for success): the kernel
// answers -errno in the low 32 bits.
func ia32Syscall(nr, a1, a2, a3 uintptr) unix.Errno {
	if r := int32(int80(nr, a1, a2, a3)); r < 0 && r > -4096 {
		return unix.Errno(-r)
	}
	return 0
}
