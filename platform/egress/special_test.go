package egress_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/platform/egress"
)

// TestSecuritySpecialPurposeRangesAreRefusedToTheirBoundaries walks every row of the IANA
// special-purpose registries the dialer encodes: the first and last address of each range is
// refused with the range's RFC named, and the addresses just outside are judged by their
// neighbours (public ones pass).
func TestSecuritySpecialPurposeRangesAreRefusedToTheirBoundaries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr   string
		reason string // "" when the address is global unicast
	}{
		{"0.0.0.0", "RFC 791"}, {"0.255.255.255", "RFC 791"}, {"1.0.0.0", ""},
		{"9.255.255.255", ""}, {"10.0.0.0", "RFC 1918"}, {"10.255.255.255", "RFC 1918"}, {"11.0.0.0", ""},
		{"100.63.255.255", ""}, {"100.64.0.0", "RFC 6598"}, {"100.127.255.255", "RFC 6598"}, {"100.128.0.0", ""},
		{"126.255.255.255", ""}, {"127.0.0.0", "RFC 1122"}, {"127.255.255.255", "RFC 1122"}, {"128.0.0.0", ""},
		{"169.253.255.255", ""}, {"169.254.0.0", "RFC 3927"}, {"169.254.255.255", "RFC 3927"}, {"169.255.0.0", ""},
		{"172.15.255.255", ""}, {"172.16.0.0", "RFC 1918"}, {"172.31.255.255", "RFC 1918"}, {"172.32.0.0", ""},
		{"191.255.255.255", ""}, {"192.0.0.0", "RFC 7335"}, {"192.0.0.7", "RFC 7335"}, {"192.0.0.8", "RFC 7600"},
		{"192.0.0.9", "RFC 7723"}, {"192.0.0.10", "RFC 8155"}, {"192.0.0.11", "RFC 6890"},
		{"192.0.0.170", "RFC 8880"}, {"192.0.0.171", "RFC 8880"}, {"192.0.0.255", "RFC 6890"}, {"192.0.1.0", ""},
		{"192.0.2.0", "TEST-NET-1, RFC 5737"}, {"192.0.2.2", "TEST-NET-1, RFC 5737"}, {"192.0.2.255", "RFC 5737"}, {"192.0.3.0", ""},
		{"192.88.98.255", ""}, {"192.88.99.0", "RFC 7526"}, {"192.88.99.255", "RFC 7526"}, {"192.88.100.0", ""},
		{"192.167.255.255", ""}, {"192.168.0.0", "RFC 1918"}, {"192.168.255.255", "RFC 1918"}, {"192.169.0.0", ""},
		{"198.17.255.255", ""}, {"198.18.0.0", "benchmarking address (RFC 2544)"}, {"198.19.255.255", "RFC 2544"}, {"198.20.0.0", ""},
		{"198.51.99.255", ""}, {"198.51.100.0", "TEST-NET-2, RFC 5737"}, {"198.51.100.255", "RFC 5737"}, {"198.51.101.0", ""},
		{"203.0.112.255", ""}, {"203.0.113.0", "TEST-NET-3, RFC 5737"}, {"203.0.113.255", "RFC 5737"}, {"203.0.114.0", ""},
		{"223.255.255.255", ""}, {"224.0.0.0", "RFC 5771"}, {"239.255.255.255", "RFC 5771"},
		{"240.0.0.0", "RFC 1112"}, {"255.255.255.254", "RFC 1112"}, {"255.255.255.255", "RFC 919"},

		{"::", "unspecified address (RFC 4291)"}, {"::1", "loopback address (RFC 4291)"}, {"::2", "IPv4-compatible"},
		{"::ffff:ffff", "IPv4-compatible"}, {"::1:0:0", "outside IPv6 global unicast"},
		{"::ffff:127.0.0.1", "RFC 1122"}, {"::ffff:192.0.2.2", "RFC 5737"}, {"::ffff:8.8.8.8", ""},
		{"64:ff9b::808:808", ""}, {"64:ff9b::c000:202", "RFC 5737"}, {"64:ff9b::7f00:1", "RFC 1122"},
		{"64:ff9b:1::", "RFC 8215"}, {"64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "RFC 8215"},
		{"100::", "RFC 6666"}, {"100::ffff:ffff:ffff:ffff", "RFC 6666"}, {"100:0:0:1::", "RFC 9780"},
		{"1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "outside IPv6 global unicast"}, {"2000::", ""},
		{"2001::", "Teredo"}, {"2001:0:ffff:ffff:ffff:ffff:ffff:ffff", "Teredo"},
		{"2001:1::1", "RFC 7723"}, {"2001:1::2", "RFC 8155"}, {"2001:1::3", "RFC 9665"}, {"2001:1::4", "RFC 2928"},
		{"2001:2::", "RFC 5180"}, {"2001:2:0:ffff:ffff:ffff:ffff:ffff", "RFC 5180"}, {"2001:2:1::", "RFC 2928"},
		{"2001:3::", ""}, {"2001:3:ffff:ffff:ffff:ffff:ffff:ffff", ""}, {"2001:4:112::", ""}, {"2001:4:113::", "RFC 2928"},
		{"2001:10::", "RFC 4843"}, {"2001:1f:ffff:ffff:ffff:ffff:ffff:ffff", "RFC 4843"}, {"2001:20::", ""},
		{"2001:2f:ffff:ffff:ffff:ffff:ffff:ffff", ""}, {"2001:30::", ""}, {"2001:3f:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"2001:40::", "RFC 2928"}, {"2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", "RFC 2928"}, {"2001:200::", ""},
		{"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", ""}, {"2001:db8::", "RFC 3849"}, {"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "RFC 3849"}, {"2001:db9::", ""},
		{"2002:808:808::1", ""}, {"2002:c000:202::1", "RFC 5737"}, {"2002:a00:1::1", "RFC 1918"},
		{"2606:4700:4700::1111", ""}, {"3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"3fff::", "RFC 9637"}, {"3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", "RFC 9637"}, {"3fff:1000::", ""},
		{"4000::", "outside IPv6 global unicast"}, {"5f00::", "RFC 9602"}, {"5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "RFC 9602"},
		{"fc00::", "RFC 4193"}, {"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "RFC 4193"}, {"fd00:ec2::254", "RFC 4193"},
		{"fe80::", "RFC 4291"}, {"febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "link-local"},
		{"fec0::", "RFC 3879"}, {"ff00::", "multicast address (RFC 4291)"}, {"ff02::1", "multicast"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			reason, special := egress.Special(netip.MustParseAddr(tc.addr))
			if special != (tc.reason != "") || !strings.Contains(reason, tc.reason) {
				t.Fatalf("Special(%s) = %q, %v; want %q", tc.addr, reason, special, tc.reason)
			}
			err := egress.Policy{}.CheckAddr("example.com", netip.AddrPortFrom(netip.MustParseAddr(tc.addr), 443))
			if (err != nil) != special {
				t.Fatalf("CheckAddr(%s) = %v; want refused=%v", tc.addr, err, special)
			}
		})
	}
}

// TestSecurityRefusalsNameTheAddressAndWhy: a refusal says which address and which range, in
// the words an audit event and an automation step show.
func TestSecurityRefusalsNameTheAddressAndWhy(t *testing.T) {
	t.Parallel()
	err := egress.Policy{}.CheckAddr("bench.example", netip.MustParseAddrPort("198.18.0.1:443"))
	want := "bench.example (198.18.0.1) is a benchmarking address (RFC 2544), which Hangar does not connect to unless an operator allows it"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}
