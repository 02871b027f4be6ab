package host

import (
	"context"
	"strings"

	"connectrpc.com/connect"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
)

// FindRepos pulls an image into this host's cache and reports the git repositories inside it.
func (h *Host) FindRepos(ctx context.Context, req *connect.Request[hostv1.FindReposRequest]) (*connect.Response[hostv1.FindReposResponse], error) {
	ref := strings.TrimSpace(req.Msg.GetImageUri())
	if ref == "" {
		return nil, apierr.InvalidArgument("image_uri", "is required")
	}
	img, err := h.images.Pull(ctx, ref)
	if err != nil {
		return nil, apierr.InvalidArgument("image_uri", "cannot pull "+ref+": "+err.Error())
	}
	repos, err := images.FindRepos(img)
	if err != nil {
		return nil, err
	}
	out := &hostv1.FindReposResponse{}
	for _, r := range repos {
		repo := &hostv1.Repo{Path: r.Path}
		for _, rm := range r.Remotes {
			repo.Remotes = append(repo.Remotes, &hostv1.Remote{Name: rm.Name, Url: rm.URL})
		}
		out.Repos = append(out.Repos, repo)
	}
	return connect.NewResponse(out), nil
}
