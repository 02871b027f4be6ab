// Package bucket opens the blob store that holds snapshot chunks, manifests and artifacts: a
// gocloud.dev bucket named by URL — gs://name in production, file:///dir locally, mem:// in
// tests — so the same code runs against each.
package bucket

import (
	"context"
	"errors"
	"fmt"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// for hangar dev
	_ "gocloud.dev/blob/gcsblob"  // gs:// in production
	_ "gocloud.dev/blob/memblob"  // mem:// for tests
)

// Open opens the bucket at url.
func Open(ctx context.Context, url string) (*blob.Bucket, error) {
	if url == "" {
		return nil, errors.New("no blob store configured: set HANGAR_BLOB_URL (gs://bucket or file:///dir)")
	}
	b, err := blob.OpenBucket(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("open blob store %s: %w", url, err)
	}
	return b, nil
}
