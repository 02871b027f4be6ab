package snapshots

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Prechunk is a snapshot cut while its tree is being written, for a tree that is written once
// from a stream (an image layer as it unpacks): each file's bytes go through File as they are
// written, and are chunked, hashed and uploaded on another goroutine while the writer goes on,
// so the tree's files are never read back. Finish then scans the finished tree for everything
// but the file contents, exactly as Snapshot does.
//
// Its chunks are not kept in the host's chunk cache: the tree itself stays on the host.
type Prechunk struct {
	run *snapshotRun

	mu    sync.Mutex
	files map[inode]knownFile
}

// inode names a file of the tree. Prechunked files are known by inode, not by path: the
// writer of a tar stream may replace a path, or link it to another file, after writing it, but
// a regular file's inode keeps the content written through File (it is created, written once
// and never opened for writing again), whatever paths name it at the end.
type inode struct{ dev, ino uint64 }

// knownFile is a file's chunk list, valid for a file of that size.
type knownFile struct {
	size   int64
	chunks []ChunkRef
}

// Prechunk starts a snapshot to be fed with File and ended with Finish or Abort. It holds the
// snapshot lease from now on, so no GC deletes the chunks it counts on.
func (s *Store) Prechunk(ctx context.Context) (*Prechunk, error) {
	run, err := s.begin(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("prechunk: %w", err)
	}
	return &Prechunk{run: run, files: make(map[inode]knownFile)}, nil
}

// pipeDepth is how many writes a file's chunker may lag behind the writer (each as large as
// the writer's buffer, 128 KiB for the image unpacker).
const pipeDepth = 32

// File returns a writer of the content of the new regular file dev/ino of the tree, size bytes
// long, written once from its start. Close waits until its chunks are cut and reports what
// went wrong; Finish takes the chunks for the file it finds with that inode only when it has
// that size. Many files may be written at once.
func (p *Prechunk) File(dev, ino uint64, size int64) io.WriteCloser {
	fw := &fileWriter{p: p, file: inode{dev, ino}, size: size}
	if size < int64(p.run.store.opts.MinChunkSize) {
		return fw // one chunk at most: gathered in memory and cut on Close
	}
	fw.blocks = make(chan []byte, pipeDepth)
	fw.stop = make(chan struct{})
	fw.done = make(chan struct{})
	go func() {
		defer close(fw.done)
		fw.chunks, fw.total, fw.err = p.run.chunkReader(p.run.uctx, &blockReader{blocks: fw.blocks}, size)
		if fw.err != nil {
			close(fw.stop)
			// Drain, so that a writer already past its check does not block forever.
			for range fw.blocks {
			}
		}
	}()
	return fw
}

// Finish scans dir, the finished tree, and writes its manifest as Snapshot does; files written
// through File are not read again.
func (p *Prechunk) Finish(ctx context.Context, dir string, meta Meta) (*Manifest, Stats, error) {
	defer p.run.end()
	p.mu.Lock()
	known := p.files
	p.mu.Unlock()
	m, st, err := p.run.snapshot(ctx, dir, nil, meta, known)
	st.FilesChunkedAhead = int(p.run.filesChunkedAhead.Load())
	return m, st, err
}

// Abort ends a Prechunk that will not be finished: it waits for its uploads and releases its
// lease. The chunks already uploaded stay until a GC finds them unreferenced.
func (p *Prechunk) Abort() { p.run.end() }

// fileWriter feeds one file to its chunker: a big file through blocks to its own goroutine, a
// small one into small.
type fileWriter struct {
	p    *Prechunk
	file inode
	size int64

	small []byte

	blocks chan []byte
	stop   chan struct{} // closed when the chunker failed
	done   chan struct{}
	closed bool

	chunks []ChunkRef
	total  int64
	err    error
}

func (w *fileWriter) Write(b []byte) (int, error) {
	if w.blocks == nil {
		if int64(len(w.small)+len(b)) > w.size {
			return 0, fmt.Errorf("prechunk inode %d: more than its %d bytes written", w.file.ino, w.size)
		}
		w.small = append(w.small, b...)
		return len(b), nil
	}
	own := append([]byte(nil), b...)
	select {
	case w.blocks <- own:
		return len(b), nil
	case <-w.stop: // Close says why
		return 0, errChunkerFailed
	}
}

func (w *fileWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if w.blocks == nil {
		w.chunks, w.total, w.err = w.p.run.chunkReader(w.p.run.uctx, bytes.NewReader(w.small), w.size)
	} else {
		close(w.blocks)
		<-w.done
	}
	if w.err == nil && w.total != w.size {
		w.err = fmt.Errorf("%d bytes written, %d announced", w.total, w.size)
	}
	if w.err != nil {
		if cause := context.Cause(w.p.run.uctx); cause != nil && errors.Is(w.err, context.Canceled) {
			w.err = cause // an upload failed: that is why
		}
		return fmt.Errorf("prechunk inode %d: %w", w.file.ino, w.err)
	}
	w.p.mu.Lock()
	w.p.files[w.file] = knownFile{size: w.size, chunks: w.chunks}
	w.p.mu.Unlock()
	return nil
}

var errChunkerFailed = errors.New("the file's chunker failed")

// blockReader reads the blocks a fileWriter sends, in order, until the channel is closed.
type blockReader struct {
	blocks <-chan []byte
	cur    []byte
}

func (r *blockReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		b, ok := <-r.blocks
		if !ok {
			return 0, io.EOF
		}
		r.cur = b
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}
