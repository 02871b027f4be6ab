package sessions

import (
	"testing"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

// A task's checkout comes after the profile's repos, takes the place of one at its path, and
// sends its own credential.
func TestATaskCheckoutReplacesTheProfileRepoAtItsPath(t *testing.T) {
	t.Parallel()
	got := checkouts([]*appv1.ProfileRepo{
		{Path: "/work/widgets/", RemoteUrl: "https://git.example.com/acme/widgets.git"},
		{Path: "/work/tools", Remote: &appv1.ProfileRepoRemote{Host: "git.example.com", Owner: "acme", Name: "tools"}},
	}, []Checkout{
		{Path: "/work/widgets", URL: "https://git.example.com/acme/widgets.git", Branch: "cache", Commit: "0123abcd", Credential: "ghs_x"},
		{Path: "/work/docs", URL: "https://git.example.com/acme/docs.git"},
	})
	if len(got) != 3 || got[0].GetPath() != "/work/tools" || got[0].GetUrl() != "https://git.example.com/acme/tools.git" {
		t.Fatalf("checkouts %v", got)
	}
	if w := got[1]; w.GetPath() != "/work/widgets" || w.GetRef() != "cache" || w.GetCommit() != "0123abcd" || w.GetSecret() != "credential of the checkout at /work/widgets" {
		t.Fatalf("the task's checkout %v", w)
	}
	if d := got[2]; d.GetSecret() != "" {
		t.Fatalf("a checkout without a credential %v", d)
	}
}
