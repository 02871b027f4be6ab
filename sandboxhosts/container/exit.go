package container

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// watchExit returns a channel closed when the process pid exits (0: at once). It waits on a
// pidfd through the runtime's poller, so no thread blocks, and it never reaps: the driver's
// kill does, and a wait here would steal its exit. The pidfd is taken right after runc reports
// the pid; init cannot be reaped and its pid reused before then when the driver is the
// subreaper, which the host is.
func watchExit(pid int) (<-chan struct{}, error) {
	done := make(chan struct{})
	if pid == 0 {
		close(done)
		return done, nil
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		close(done)
		return done, nil
	}
	if err != nil {
		return nil, fmt.Errorf("watch init %d: pidfd_open: %w", pid, err)
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("pidfd:%d", pid))
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("watch init %d: %w", pid, err)
	}
	go func() {
		defer close(done)
		defer f.Close()
		// Read waits for readability between calls: a pidfd turns readable when its process exits.
		_ = rc.Read(func(fd uintptr) bool {
			exited, err := pidfdExited(int(fd), 0)
			return exited || err != nil
		})
	}()
	return done, nil
}
