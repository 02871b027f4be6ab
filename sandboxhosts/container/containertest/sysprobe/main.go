// Command sysprobe makes one raw syscall and prints "ok", the errno's name, or "killed" when
// seccomp killed the thread that made it, for tests that check what a sandbox's seccomp filter
// and capabilities allow:
//
//	sysprobe <number> [args...]
//	sysprobe ia32 <number> [up to 3 args]   (amd64: through int 0x80, with i386's numbers)
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// killedAfter is how long the syscall may take before its thread counts as killed: seccomp's
// "kill thread" ends only the calling thread, and the program's other threads go on.
const killedAfter = 2 * time.Second

func main() {
	args, ia32 := os.Args[1:], len(os.Args) > 1 && os.Args[1] == "ia32"
	if ia32 {
		args = args[1:]
	}
	var nums [7]uintptr
	for i, a := range args {
		n, err := strconv.ParseUint(a, 0, 64)
		if err != nil || i >= len(nums) {
			fmt.Fprintln(os.Stderr, "usage: sysprobe [ia32] <number> [up to 6 args]")
			os.Exit(2)
		}
		nums[i] = uintptr(n)
	}
	answer := make(chan unix.Errno, 1)
	go func() {
		// The thread is never given back: it may be the one seccomp kills.
		runtime.LockOSThread()
		if ia32 {
			answer <- ia32Syscall(nums[0], nums[1], nums[2], nums[3])
			return
		}
		_, _, errno := unix.Syscall6(nums[0], nums[1], nums[2], nums[3], nums[4], nums[5], nums[6])
		answer <- errno
	}()
	select {
	case errno := <-answer:
		if errno != 0 {
			fmt.Println(unix.ErrnoName(errno))
			return
		}
		fmt.Println("ok")
	case <-time.After(killedAfter):
		fmt.Println("killed")
	}
}
