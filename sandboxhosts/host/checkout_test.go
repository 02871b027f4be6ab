package host

import (
	"encoding/base64"
	"net/url"
	"testing"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
)

// A clone's credential is the placeholder of the secret it names, else of the first secret that
// may go to its host; none when no secret may.
func TestACloneSendsThePlaceholderOfItsSecret(t *testing.T) {
	t.Parallel()
	network := &hostv1.SandboxNetwork{Secrets: []*hostv1.ProxySecret{
		{Name: "profile token", Placeholder: "ph-profile", AllowHosts: []string{"git.example.com"}},
		{Name: "review token", Placeholder: "ph-review", AllowHosts: []string{"git.example.com"}},
		{Name: "model key", Placeholder: "ph-model", AllowHosts: []string{"api.example.com"}},
	}}
	u, _ := url.Parse("https://git.example.com/acme/widgets.git")
	other, _ := url.Parse("https://elsewhere.example.com/acme/widgets.git")
	basic := func(p string) string {
		return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+p))
	}
	for _, tc := range []struct {
		name   string
		u      *url.URL
		secret string
		want   string
	}{
		{"the first secret for the host when none is named", u, "", basic("ph-profile")},
		{"the named secret", u, "review token", basic("ph-review")},
		{"none when the named secret may not go to the host", u, "model key", ""},
		{"none when no secret may go to the host", other, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gitCredential(tc.u, tc.secret, network); got != tc.want {
				t.Fatalf("credential %q, want %q", got, tc.want)
			}
		})
	}
}
