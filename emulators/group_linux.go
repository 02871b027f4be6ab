package emulators

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// GroupAlive reports whether any process of group pgid still runs. Zombies do not count:
// gcloud exits before its Java child, orphans are reparented to PID 1, and a PID 1 that does
// not reap (a container without an init) would otherwise keep the group "alive" forever.
func GroupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return true
	}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // exited while we looked
		}
		// "pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 4 || string(f[0]) == "Z" {
			continue
		}
		if pg, err := strconv.Atoi(string(f[2])); err == nil && pg == pgid {
			return true
		}
	}
	return false
}
