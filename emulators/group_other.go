//go:build !linux

package emulators

import (
	"errors"
	"syscall"
)

// GroupAlive reports whether any process of group pgid still exists (zombies included).
func GroupAlive(pgid int) bool {
	return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}
