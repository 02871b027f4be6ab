package snapshots

import (
	"fmt"
	"io"

	chunkers "github.com/PlakarKorp/go-cdc-chunkers"
	_ "github.com/PlakarKorp/go-cdc-chunkers/chunkers/fastcdc" // registers the FastCDC chunkers
)

// chunkAlgorithm is the go-cdc-chunkers name of the chunker files are cut with: FastCDC as its
// paper has it, with cut masks derived from the average size (the "fastcdc" name keeps masks
// fixed for 8 KiB chunks, whatever the sizes asked for). Its gear table is read-only and shared,
// so chunkers run concurrently with no lock. Manifests name chunks by hash, so a snapshot cut
// with another chunker (fastcdc-go, before) restores the same; its chunks only dedupe less with
// the ones cut after.
const chunkAlgorithm = "fastcdc-v1.0.0"

// cut cuts what rd holds (size bytes, as far as the caller knows; at least o.MinChunkSize) into
// content-defined chunks of o's sizes and hands each to emit, which must not keep the slice.
func cut(rd io.Reader, size int64, o Options, emit func([]byte) error) error {
	// The chunker needs MaxChunkSize of buffer; twice that saves compacting it on most chunks,
	// and a file smaller than that needs no more than its size.
	buf := make([]byte, max(o.MaxChunkSize, int(min(int64(2*o.MaxChunkSize), size+1))))
	ch, err := chunkers.NewChunkerBuffer(chunkAlgorithm, rd, &chunkers.ChunkerOpts{
		MinSize: o.MinChunkSize, NormalSize: o.AvgChunkSize, MaxSize: o.MaxChunkSize,
	}, buf)
	if err != nil {
		return fmt.Errorf("chunk: %w", err)
	}
	for {
		c, err := ch.Next()
		if err != nil && err != io.EOF {
			return fmt.Errorf("read: %w", err)
		}
		if len(c) > 0 {
			if err := emit(c); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}
