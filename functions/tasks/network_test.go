package tasks

import (
	"slices"
	"testing"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

// A session may reach its profile's network section, its repos' hosts and its checkouts' hosts.
func TestASessionReachesItsReposAndCheckoutsHosts(t *testing.T) {
	t.Parallel()
	got := networkOf(&appv1.ProfileNetwork{AllowHosts: []string{"api.example.com"}},
		[]*appv1.ProfileRepo{{RemoteUrl: "git@Git.Example.com:acme/tools.git"}},
		[]Checkout{{URL: "https://GitHub.example/acme/widgets.git"}, {URL: "not a url at all"}})
	if want := []string{"api.example.com", "git.example.com", "github.example"}; !slices.Equal(got.AllowHosts, want) || got.DefaultAllow {
		t.Fatalf("network %+v, want hosts %v", got, want)
	}
}
