package host

import "testing"

func TestAResumeBootsTheImageByTheDigestItsSessionRanOn(t *testing.T) {
	const d = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	const other = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	for _, tc := range []struct {
		name, uri, digest, want string
	}{
		{"a tag is pinned to the digest", "reg.example:5000/team/app:latest", d, "reg.example:5000/team/app@" + d},
		{"a reference without a tag is pinned", "reg.example/team/app", d, "reg.example/team/app@" + d},
		{"an enabled image's reference by digest stays", "reg.example/team/app@" + d, other, "reg.example/team/app@" + d},
		{"no digest yet leaves the reference", "reg.example/team/app:v1", "", "reg.example/team/app:v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pinnedRef(tc.uri, tc.digest); got != tc.want {
				t.Fatalf("pinnedRef(%q, %q) = %q, want %q", tc.uri, tc.digest, got, tc.want)
			}
		})
	}
}
