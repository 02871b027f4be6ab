// Command sysprobe makes one raw syscall and prints "ok" or the errno's name, for tests that
// check what a sandbox's seccomp filter and capabilities allow:
//
//	sysprobe <number> [args...]
package main

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

func main() {
	var nums [7]uintptr
	for i, a := range os.Args[1:] {
		n, err := strconv.ParseUint(a, 0, 64)
		if err != nil || i >= len(nums) {
			fmt.Fprintln(os.Stderr, "usage: sysprobe <number> [up to 6 args]")
			os.Exit(2)
		}
		nums[i] = uintptr(n)
	}
	_, _, errno := unix.Syscall6(nums[0], nums[1], nums[2], nums[3], nums[4], nums[5], nums[6])
	if errno != 0 {
		fmt.Println(unix.ErrnoName(errno))
		return
	}
	fmt.Println("ok")
}
