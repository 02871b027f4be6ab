package imagestest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hangar-dev/hangar/platform/egress"
)

// Pull is one registry client under test: an image pull or a plugin fetch of ref, allowed to
// reach what registries allows beyond public addresses.
type Pull func(ctx context.Context, ref string, registries egress.Policy) error

// ReplayPullAttacks replays the attacks a pull reference made possible: making a host or a
// function fetch from loopback (or a private address) as a port scanner, reading an internal
// server's answer back through the error, and following a redirect into the inside. Every
// registry here is on loopback, which only an operator's entry opens.
func ReplayPullAttacks(t *testing.T, pull Pull) {
	var inside atomic.Int32
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside.Add(1)
		http.Error(w, HostileBody, http.StatusOK)
	}))
	t.Cleanup(internal.Close)
	for _, tc := range []struct {
		name string
		// host is how the reference names the registry: "127.0.0.1" or "localhost".
		host, repo, redirectTo string
		allow                  egress.Policy
		refused                bool // the error matches egress.ErrRefused and no request arrived
		says                   string
	}{
		{name: "a loopback registry no operator lists", host: "127.0.0.1", repo: "any/image", refused: true, says: "loopback"},
		{name: "a name that resolves to loopback", host: "localhost", repo: "any/image", refused: true, says: "loopback"},
		{name: "an internal server's error body", host: "127.0.0.1", repo: "body/x", allow: Allow, says: "403"},
		{name: "an internal server's error messages", host: "127.0.0.1", repo: "diagnostics/x", allow: Allow, says: "MANIFEST_UNKNOWN"},
		{name: "a redirect to the metadata server", host: "127.0.0.1", repo: "redirect/x", allow: Allow,
			redirectTo: "http://169.254.169.254/latest/meta-data/"},
		{name: "a redirect to a loopback host the operator did not list", host: "localhost", repo: "redirect/x", allow: egress.MustParse("localhost"),
			redirectTo: internal.URL + "/v2/"},
		{name: "a redirect to a metadata name", host: "127.0.0.1", repo: "redirect/x", allow: Allow,
			redirectTo: "http://metadata.google.internal/computeMetadata/v1/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			reg := Registry(t, Hostile(tc.redirectTo, &hits))
			_, port, _ := strings.Cut(reg, ":")
			insideBefore := inside.Load()
			err := pull(t.Context(), tc.host+":"+port+"/"+tc.repo+":latest", tc.allow)
			if err == nil {
				t.Fatal("the pull succeeded")
			}
			t.Log(err)
			if strings.Contains(err.Error(), HostileBody) {
				t.Fatalf("the error repeats what the server sent: %v", err)
			}
			if tc.says != "" && !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %q does not say %q", err, tc.says)
			}
			if tc.refused {
				if !errors.Is(err, egress.ErrRefused) {
					t.Fatalf("error %v, want a refused destination", err)
				}
				if n := hits.Load(); n != 0 {
					t.Fatalf("%d requests reached the registry", n)
				}
			}
			if inside.Load() != insideBefore {
				t.Fatal("a redirect reached the internal server")
			}
		})
	}
}
