package egress

import (
	"strings"
	"testing"
)

// TestHostEntriesAreCanonicalisedOrRefusedWithTheReason: a host (or, in allow_host_patterns, a
// pattern) is stored in one canonical form, or refused with an error that says what is wrong.
func TestHostEntriesAreCanonicalisedOrRefusedWithTheReason(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want, wantErr string
		pattern                 bool
	}{
		{"hostname lowercased", "API.GitHub.com", "api.github.com", "", false},
		{"single-label hostname", "localhost", "localhost", "", false},
		{"hostname with port", "proxy.golang.org:443", "proxy.golang.org:443", "", false},
		{"port loses leading zeros", "example.com:0443", "example.com:443", "", false},
		{"IPv4", "10.0.0.1", "10.0.0.1", "", false},
		{"IPv4 with port", "10.0.0.1:8080", "10.0.0.1:8080", "", false},
		{"IPv6 compressed and lowercased", "2001:DB8:0:0::1", "2001:db8::1", "", false},
		{"IPv6 in brackets without port", "[::1]", "::1", "", false},
		{"IPv6 with port", "[2001:db8::1]:443", "[2001:db8::1]:443", "", false},
		{"longest label and name", strings.Repeat("a", 63) + "." + strings.Repeat("b.", 93) + "com", strings.Repeat("a", 63) + "." + strings.Repeat("b.", 93) + "com", "", false},
		{"one wildcard label", "*.GitHub.com", "*.github.com", "", true},
		{"several wildcard labels", "*.*.example.org", "*.*.example.org", "", true},
		{"pattern with port", "*.example.com:8443", "*.example.com:8443", "", true},
		{"pattern without wildcard", "github.com", "github.com", "", true},
		{"empty", "", "", "is empty", false},
		{"wildcard in a host", "*.github.com", "", "allow_host_patterns", false},
		{"label starting with dash", "-bad.example.com", "", "starting or ending with '-'", false},
		{"label ending with dash", "bad-.example.com", "", "starting or ending with '-'", false},
		{"empty label", "a..example.com", "", "empty label", false},
		{"trailing dot", "example.com.", "", "empty label", false},
		{"underscore", "under_score.example.com", "", "other than a-z", false},
		{"space", "exa mple.com", "", "other than a-z", false},
		{"non-ASCII", "bücher.example", "", "other than a-z", false},
		{"Kelvin sign is not a k", "\u212Aexample.com", "", "other than a-z", false},
		{"label too long", strings.Repeat("a", 64) + ".com", "", "longer than 63", false},
		{"name too long", strings.Repeat("a.", 126) + "com", "", "longer than 253", false},
		{"port zero", "example.com:0", "", "port", false},
		{"port too big", "example.com:65536", "", "port", false},
		{"port not a number", "example.com:http", "", "port", false},
		{"port with sign", "example.com:+80", "", "port", false},
		{"empty port", "example.com:", "", "port", false},
		{"mistyped IPv4", "10.0.0.300", "", "all-numeric", false},
		{"IPv4 in brackets", "[10.0.0.1]:80", "", "brackets", false},
		{"unclosed bracket", "[::1", "", `"]"`, false},
		{"text after bracket", "[::1]x", "", `after "]"`, false},
		{"IPv6 zone", "fe80::1%eth0", "", "zone", false},
		{"lone wildcard", "*", "", "match every host", true},
		{"wildcards only", "*.*", "", "match every host", true},
		{"wildcard then nothing", "*.", "", "empty label", true},
		{"wildcard in the middle", "api.*.example.com", "", "leftmost", true},
		{"partial wildcard label", "api*.example.com", "", "leftmost", true},
		{"double star label", "**.example.com", "", "leftmost", true},
		{"IP as pattern", "10.0.0.1", "", "IP address", true},
		{"pattern with bad port", "*.example.com:0", "", "port", true},
		{"wildcard over numbers", "*.10.0.0.1", "", "all-numeric", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			normalize := NormalizeHost
			if tc.pattern {
				normalize = NormalizeHostPattern
			}
			got, err := normalize(tc.in)
			switch {
			case tc.wantErr == "" && (err != nil || got != tc.want):
				t.Fatalf("normalize(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("normalize(%q) = %q, want an error", tc.in, got)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("normalize(%q) error %q, want it to mention %q", tc.in, err, tc.wantErr)
			}
		})
	}
}
