package sessions

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	"github.com/hangar-dev/hangar/records/fleet"
)

// FindImageRepos has a sandbox host look inside a profile's image (the enabled image, when
// images are enabled here) for git repositories, for ProfileService. An image that cannot be
// pulled is the profile's problem, not the request's.
func (s *Service) FindImageRepos(ctx context.Context, image string) ([]*hostv1.Repo, error) {
	if s.d.Images != nil { // a profile's image_id names an enabled image
		ref, _, _, err := s.d.Images.ResolveImage(ctx, image)
		if err != nil {
			return nil, err
		}
		image = ref
	}
	_, client, err := s.d.Hosts.Pick(ctx)
	if errors.Is(err, fleet.ErrNoHost) {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("no sandbox host is up to look inside the image; retry later"))
	}
	if err != nil {
		return nil, err
	}
	resp, err := client.FindRepos(ctx, connect.NewRequest(&hostv1.FindReposRequest{ImageUri: image}))
	if err != nil {
		return nil, profileImageErr(image, err)
	}
	return resp.Msg.GetRepos(), nil
}
