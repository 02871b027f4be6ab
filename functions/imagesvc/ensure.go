package imagesvc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/auth"
)

// EnsureEnabled enables uri unless it is enabled already, and waits until its job is ready or
// failed: for the operator's own images (`hangar dev`'s dev image), so the first session
// finds it. A job already running is waited for rather than started again.
func (s *Service) EnsureEnabled(ctx context.Context, uri string) error {
	img, err := s.rec.imageByURI(ctx, uri)
	switch {
	case err == nil && img.Usable():
		return nil
	case err != nil && !errors.Is(err, errNoImage):
		return err
	}
	jobID := ""
	if err == nil && img.JobID != "" {
		if j, err := s.rec.job(ctx, img.JobID); err == nil && !j.State.Ended() {
			jobID = j.ID
		}
	}
	if jobID == "" {
		op := auth.WithPrincipal(ctx, auth.Principal{UserID: "hangar", Admin: true})
		resp, err := s.EnableImage(op, connect.NewRequest(&appv1.EnableImageRequest{ImageUri: uri}))
		if err != nil {
			return fmt.Errorf("enable %s: %w", uri, err)
		}
		jobID = resp.Msg.GetJob().GetId()
	}
	for {
		j, err := s.rec.job(ctx, jobID)
		if err != nil {
			return err
		}
		switch j.State {
		case Ready:
			return nil
		case Failed, Superseded:
			return fmt.Errorf("enable %s: job %s %s: %s", uri, j.ID, j.State, j.Error)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
