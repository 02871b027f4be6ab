// Package filestream holds what the APIs that stream files share — SessionService's
// ReadFile, WriteFile and GetArtifact, and the sandbox hosts' own ReadFile and WriteFile: the
// metadata frame that must open an upload, and the chunking of a download.
package filestream

import (
	"errors"
	"io"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
)

// ChunkSize is how many bytes a download frame carries: large enough that framing costs
// nothing, small enough that a stream stays responsive.
const ChunkSize = 512 << 10

// Metadata reads an upload's first frame, which must be the file's metadata.
func Metadata(in *connect.ClientStream[appv1.WriteFileRequest]) (*appv1.WriteFileMetadata, error) {
	if !in.Receive() {
		if err := in.Err(); err != nil {
			return nil, err
		}
	} else if meta := in.Msg().GetMetadata(); meta != nil {
		return meta, nil
	}
	return nil, apierr.InvalidArgument("metadata", "the first frame must be the file's metadata")
}

// Send reads r to its end and sends it in ChunkSize pieces.
func Send(r io.Reader, send func([]byte) error) error {
	buf := make([]byte, ChunkSize)
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if serr := send(buf[:n]); serr != nil {
				return serr
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
