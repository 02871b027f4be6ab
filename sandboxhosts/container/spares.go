package container

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
)

// Spare disks. Making a sandbox's disk (mkfs.ext4 of a sparse image, about 15 ms on an idle
// machine and 50 ms on a loaded one) was the largest step of a cold boot after runc itself. With
// DriverOptions.SpareDisks the driver makes a few disks ahead, in the background and at the
// lowest CPU priority, and MountDisk takes one instead of making its own.
//
// A spare shares nothing between sandboxes: it is made fresh by mkfs in StateDir/spare-disks
// (0700, which no sandbox mounts or sees), is never mounted before it is handed out, and is
// handed out once — taking it renames it into the sandbox's Dir, where it is deleted with the
// sandbox like any other disk. What one sandbox wrote can therefore never be read, or planted,
// in another's disk; a spare is exactly the disk MountDisk would have made at that moment.

// spareSizes is how many disk sizes spares are kept for: the most recently asked for.
const spareSizes = 2

// spares keeps up to keep made-ahead disk images of each recently asked size.
type spares struct {
	dir  string
	keep int
	// mkdisk makes a disk image of size bytes at img.
	mkdisk func(img string, size int64) error

	mu     sync.Mutex
	ready  map[int64][]string
	sizes  []int64 // most recently asked last
	making map[int64]bool
	closed bool
	seq    int
	wg     sync.WaitGroup
}

// newSpares clears dir of what an earlier process left (a half-made image among them) and
// returns spares made there; keep 0 makes none.
func newSpares(dir string, keep int, mkdisk func(string, int64) error) (*spares, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("spare disks: %w", err)
	}
	if keep > 0 {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("spare disks: %w", err)
		}
	}
	return &spares{dir: dir, keep: keep, mkdisk: mkdisk, ready: map[int64][]string{}, making: map[int64]bool{}}, nil
}

// take moves a spare disk of size bytes to img and reports whether there was one. Either way
// size becomes the most recently asked, and spares of it are made up to keep in the background.
func (s *spares) take(size int64, img string) bool {
	s.mu.Lock()
	if s.keep <= 0 || s.closed {
		s.mu.Unlock()
		return false
	}
	var spare string
	if list := s.ready[size]; len(list) > 0 {
		spare, s.ready[size] = list[len(list)-1], list[:len(list)-1]
	}
	s.asked(size)
	s.mu.Unlock()
	if spare == "" {
		return false
	}
	err := os.Rename(spare, img)
	if err == nil {
		return true
	}
	_ = os.Remove(spare)
	if errors.Is(err, syscall.EXDEV) {
		// The sandboxes' dirs are on another file system than StateDir: a spare cannot be moved
		// there, so making them is only work.
		s.mu.Lock()
		s.keep = 0
		s.mu.Unlock()
	}
	return false
}

// asked marks size as the most recently asked, forgets the spares of a size pushed out, and
// starts making spares of size; s.mu is held.
func (s *spares) asked(size int64) {
	s.sizes = append(slices.DeleteFunc(s.sizes, func(n int64) bool { return n == size }), size)
	if len(s.sizes) > spareSizes {
		old := s.sizes[0]
		s.sizes = s.sizes[1:]
		for _, p := range s.ready[old] {
			_ = os.Remove(p)
		}
		delete(s.ready, old)
	}
	if s.making[size] {
		return
	}
	s.making[size] = true
	s.wg.Go(func() { s.fill(size) })
}

// fill makes spares of size until there are keep of them. A failure ends the round: the next
// sandbox makes its own disk, as without spares, and asks again.
func (s *spares) fill(size int64) {
	defer func() {
		s.mu.Lock()
		delete(s.making, size)
		s.mu.Unlock()
	}()
	for {
		s.mu.Lock()
		if s.closed || len(s.ready[size]) >= s.keep || !slices.Contains(s.sizes, size) {
			s.mu.Unlock()
			return
		}
		s.seq++
		img := filepath.Join(s.dir, fmt.Sprintf("%d-%d.img", size, s.seq))
		s.mu.Unlock()
		if err := s.mkdisk(img, size); err != nil {
			return
		}
		s.mu.Lock()
		if s.closed || !slices.Contains(s.sizes, size) {
			_ = os.Remove(img)
		} else {
			s.ready[size] = append(s.ready[size], img)
		}
		s.mu.Unlock()
	}
}

// close stops making spares, waits for the one being made and deletes them all.
func (s *spares) close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("spare disks: %w", err)
	}
	return nil
}
