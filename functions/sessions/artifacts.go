package sessions

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/filestream"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// GetArtifact streams a published artifact from the blob store: its metadata, then its bytes.
// It needs no sandbox, so artifacts outlive evictions and hosts.
func (s *Service) GetArtifact(ctx context.Context, req *connect.Request[appv1.GetArtifactRequest], out *connect.ServerStream[appv1.GetArtifactResponse]) error {
	if err := ids.Check("artifact_id", req.Msg.GetArtifactId()); err != nil {
		return err
	}
	rec, err := s.load(ctx, req.Msg.GetSessionId())
	if err != nil {
		return err
	}
	a, err := s.store.Artifact(ctx, rec.ID, req.Msg.GetArtifactId())
	if errors.Is(err, sessiondb.ErrNotFound) {
		return apierr.NotFound("artifact", req.Msg.GetArtifactId())
	}
	if err != nil {
		return err
	}
	r, err := s.d.Bucket.NewReader(ctx, a.BlobKey, nil)
	if err != nil {
		return fmt.Errorf("open artifact %s: %w", a.ID, err)
	}
	defer r.Close()
	if err := out.Send(&appv1.GetArtifactResponse{Msg: &appv1.GetArtifactResponse_Metadata{Metadata: &appv1.ArtifactMetadata{
		MediaType: a.MediaType, SizeBytes: uint64(a.SizeBytes), FileName: a.FileName,
	}}}); err != nil {
		return err
	}
	err = filestream.Send(r, func(p []byte) error {
		return out.Send(&appv1.GetArtifactResponse{Msg: &appv1.GetArtifactResponse_Chunk{Chunk: p}})
	})
	if err != nil {
		return fmt.Errorf("send artifact %s: %w", a.ID, err)
	}
	return nil
}
