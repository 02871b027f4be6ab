package snapshots

import (
	"fmt"
	"os"
)

// CowState is how far an upper dir has moved from a manifest, measured from metadata alone.
type CowState struct {
	Files int   // regular files in the upper dir now
	Bytes int64 // their total size
	// DirtyFiles are regular files that are new or whose size, mtime, inode or ctime changed;
	// the next snapshot reads exactly these.
	DirtyFiles int
	DirtyBytes int64
	// DirtyChunks estimates the chunks the next snapshot will cut from the dirty files: one for
	// a file under the minimum chunk size, else its size over the average chunk size. The true
	// count needs the content, which CowState does not read.
	DirtyChunks int
	// Deleted counts entries of the base that are gone from the upper dir.
	Deleted int
	// BaseChunks is the number of distinct chunks of the base, BaseChunksCached how many of
	// them this host's cache holds (what a restore here would not download).
	BaseChunks       int
	BaseChunksCached int
}

// CowState compares upperDir with base (nil: everything is dirty) by stat only, without reading
// any file content.
func (s *Store) CowState(upperDir string, base *Manifest) (CowState, error) {
	entries, _, err := scan(upperDir, false)
	if err != nil {
		return CowState{}, fmt.Errorf("cow state of %s: %w", upperDir, err)
	}
	prev := baseFiles(base)
	var cs CowState
	now := make(map[RawString]struct{}, len(entries))
	for i := range entries {
		e := &entries[i]
		now[e.Path] = struct{}{}
		if e.Type != TypeFile {
			continue
		}
		cs.Files++
		cs.Bytes += e.Size
		if !unchanged(prev[e.Path], e) {
			cs.DirtyFiles++
			cs.DirtyBytes += e.Size
			cs.DirtyChunks += s.estimateChunks(e.Size)
		}
	}
	if base == nil {
		return cs, nil
	}
	chunks := make(map[string]struct{})
	for _, e := range base.Entries {
		if _, ok := now[e.Path]; !ok {
			cs.Deleted++
		}
		for _, c := range e.Chunks {
			chunks[c.SHA256] = struct{}{}
		}
	}
	cs.BaseChunks = len(chunks)
	for sum := range chunks {
		if _, err := os.Stat(s.cachePath(sum)); err == nil {
			cs.BaseChunksCached++
		}
	}
	return cs, nil
}

// estimateChunks is how many chunks a file of size bytes is likely cut into.
func (s *Store) estimateChunks(size int64) int {
	if size < int64(s.opts.MinChunkSize) {
		return 1
	}
	return int((size + int64(s.opts.AvgChunkSize) - 1) / int64(s.opts.AvgChunkSize))
}
