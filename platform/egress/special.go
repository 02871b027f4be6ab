package egress

import "net/netip"

// specialRange is a row of the IANA IPv4 or IPv6 Special-Purpose Address Registry (or of the
// address-space registries around them): an address in prefix is refused with reason, whose
// words name the kind and the RFC that sets it aside, unless global says the range is globally
// reachable unicast carved out of a larger refused range.
type specialRange struct {
	prefix netip.Prefix
	reason string
	global bool
}

func refuse(prefix, reason string) specialRange {
	return specialRange{prefix: netip.MustParsePrefix(prefix), reason: reason}
}

func reachable(prefix, reason string) specialRange {
	return specialRange{prefix: netip.MustParsePrefix(prefix), reason: reason, global: true}
}

// specialRanges is every range the registries mark "Globally Reachable: False" (or N/A), and
// what else is not global unicast: multicast, and all of IPv6 outside 2000::/3. The longest
// matching prefix decides, so a globally reachable carve-out (global) wins over the range it
// sits in. Deliberately stricter than the registries: all of 192.0.0.0/24 (its PCP and TURN
// anycast /32s, which the registry calls reachable, are answered by the nearest such server,
// usually on the local network; their IPv6 twins 2001:1::1-3 likewise) and all of the
// deprecated 192.88.99.0/24.
var specialRanges = []specialRange{
	// IPv4 Special-Purpose Address Registry (RFC 6890).
	refuse("0.0.0.0/8", `a "this network" address (RFC 791)`),
	refuse("10.0.0.0/8", "a private address (RFC 1918)"),
	refuse("100.64.0.0/10", "a carrier-grade NAT address (RFC 6598)"),
	refuse("127.0.0.0/8", "a loopback address (RFC 1122)"),
	refuse("169.254.0.0/16", "a link-local address (RFC 3927), where cloud metadata servers answer"),
	refuse("172.16.0.0/12", "a private address (RFC 1918)"),
	refuse("192.0.0.0/24", "an IETF protocol assignment address (RFC 6890)"),
	refuse("192.0.0.0/29", "an IPv4 service continuity address (RFC 7335)"),
	refuse("192.0.0.8/32", "the IPv4 dummy address (RFC 7600)"),
	refuse("192.0.0.9/32", "the Port Control Protocol anycast address (RFC 7723)"),
	refuse("192.0.0.10/32", "the TURN anycast address (RFC 8155)"),
	refuse("192.0.0.170/31", "a NAT64/DNS64 discovery address (RFC 8880)"),
	refuse("192.0.2.0/24", "a documentation address (TEST-NET-1, RFC 5737)"),
	refuse("192.88.99.0/24", "a deprecated 6to4 relay anycast address (RFC 7526)"),
	refuse("192.168.0.0/16", "a private address (RFC 1918)"),
	refuse("198.18.0.0/15", "a benchmarking address (RFC 2544)"),
	refuse("198.51.100.0/24", "a documentation address (TEST-NET-2, RFC 5737)"),
	refuse("203.0.113.0/24", "a documentation address (TEST-NET-3, RFC 5737)"),
	refuse("224.0.0.0/4", "a multicast address (RFC 5771)"),
	refuse("240.0.0.0/4", "a reserved address (RFC 1112)"),
	refuse("255.255.255.255/32", "the limited broadcast address (RFC 919)"),

	// IPv6: everything outside global unicast (the IPv6 Address Space registry, RFC 4291), then
	// the IPv6 Special-Purpose Address Registry (RFC 6890) inside it and around it.
	refuse("::/0", "outside IPv6 global unicast space 2000::/3 (RFC 4291)"),
	reachable("2000::/3", "IPv6 global unicast (RFC 4291)"),
	refuse("::/128", "the unspecified address (RFC 4291)"),
	refuse("::1/128", "a loopback address (RFC 4291)"),
	refuse("::/96", "a deprecated IPv4-compatible address (RFC 4291)"),
	refuse("64:ff9b:1::/48", "a local-use IPv4/IPv6 translation address (RFC 8215)"),
	refuse("100::/64", "a discard-only address (RFC 6666)"),
	refuse("100:0:0:1::/64", "a dummy IPv6 address (RFC 9780)"),
	refuse("2001::/23", "an IETF protocol assignment address (RFC 2928)"),
	refuse("2001::/32", "a Teredo address (RFC 4380)"),
	refuse("2001:1::1/128", "the Port Control Protocol anycast address (RFC 7723)"),
	refuse("2001:1::2/128", "the TURN anycast address (RFC 8155)"),
	refuse("2001:1::3/128", "the DNS-SD service registration anycast address (RFC 9665)"),
	refuse("2001:2::/48", "a benchmarking address (RFC 5180)"),
	reachable("2001:3::/32", "AMT (RFC 7450)"),
	reachable("2001:4:112::/48", "AS112-v6 (RFC 7535)"),
	refuse("2001:10::/28", "a deprecated ORCHID address (RFC 4843)"),
	reachable("2001:20::/28", "ORCHIDv2 (RFC 7343)"),
	reachable("2001:30::/28", "drone remote ID entity tags (RFC 9374)"),
	refuse("2001:db8::/32", "a documentation address (RFC 3849)"),
	refuse("3fff::/20", "a documentation address (RFC 9637)"),
	refuse("5f00::/16", "a segment routing SID (RFC 9602)"),
	refuse("fc00::/7", "a private (unique local) address (RFC 4193)"),
	refuse("fe80::/10", "a link-local address (RFC 4291), where cloud metadata servers answer"),
	refuse("fec0::/10", "a deprecated site-local address (RFC 3879)"),
	refuse("ff00::/8", "a multicast address (RFC 4291)"),
}

// Addresses that carry an IPv4 address and are judged by it: IPv4-mapped addresses are unmapped
// by plain before any lookup; NAT64's well-known prefix (64:ff9b::/96, RFC 6052, globally
// reachable) and 6to4 (2002::/16, RFC 3056) reach whatever the IPv4 address inside is.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Special reports whether a is an address no outbound request of Hangar reaches by default
// because it is not global unicast, and why, in words naming the kind and its RFC (say,
// "a benchmarking address (RFC 2544)"). It does not know this host's own interface addresses;
// Policy.CheckAddr refuses those too.
func Special(a netip.Addr) (string, bool) {
	a = plain(a)
	if !a.IsValid() {
		return "not an IP address", true
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return Special(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(a):
		return Special(netip.AddrFrom4([4]byte(b[2:6])))
	}
	var best *specialRange
	for i, r := range specialRanges {
		if r.prefix.Contains(a) && (best == nil || r.prefix.Bits() > best.prefix.Bits()) {
			best = &specialRanges[i]
		}
	}
	if best == nil || best.global {
		return "", false
	}
	return best.reason, true
}
