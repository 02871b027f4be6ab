package egress

import "net/netip"

// WithHostAddrs is p judging addrs as this host's own interface addresses, in place of the
// machine's: tests stand a loopback alias in for a host address they must never dial.
func WithHostAddrs(p Policy, addrs ...netip.Addr) Policy {
	p.host = &hostAddrs{read: func() ([]netip.Addr, error) { return addrs, nil }, maxAge: hostAddrsMaxAge}
	return p
}
