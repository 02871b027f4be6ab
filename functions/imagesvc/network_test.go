package imagesvc

import (
	"slices"
	"strings"
	"testing"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
)

// TestAWarmNetworkIsCheckedAndNormalizedAsAProfilesIs: the warm command's network has a
// profile network's shape; bad entries are invalid_argument naming the field, good ones are kept
// in the canonical form the egress proxy matches, and the host gets nothing out without one.
func TestAWarmNetworkIsCheckedAndNormalizedAsAProfilesIs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        *appv1.ProfileNetwork
		wantField string // "" for valid
		wantHosts []string
	}{
		{"no policy", nil, "", nil},
		{"hosts are lowercased and ports canonical", &appv1.ProfileNetwork{AllowHosts: []string{"Deps.Example.com:0443", "10.0.0.1"}}, "", []string{"deps.example.com:443", "10.0.0.1"}},
		{"an unknown default", &appv1.ProfileNetwork{Default: "sometimes"}, "config.warm.network.default", nil},
		{"a wildcard in allow_hosts", &appv1.ProfileNetwork{AllowHosts: []string{"*.example.com"}}, "config.warm.network.allow_hosts[0]", nil},
		{"an address in allow_host_patterns", &appv1.ProfileNetwork{AllowHostPatterns: []string{"10.0.0.1"}}, "config.warm.network.allow_host_patterns[0]", nil},
		{"too many entries", &appv1.ProfileNetwork{AllowHosts: slices.Repeat([]string{"a.example.com"}, maxNetworkEntries+1)}, "config.warm.network.allow_hosts", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v apierr.Violations
			checkNetwork(tc.in, &v)
			err := v.Err()
			if tc.wantField != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantField) {
					t.Fatalf("got %v, want a violation of %s", err, tc.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n := warmNetwork(tc.in)
			if tc.in == nil {
				if n != nil {
					t.Fatalf("no policy became %v", n)
				}
				return
			}
			if n.GetDefaultAllow() || !slices.Equal(n.GetAllowHosts(), tc.wantHosts) {
				t.Fatalf("host network %v, want deny with %v", n, tc.wantHosts)
			}
		})
	}
}
