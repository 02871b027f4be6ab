// Package egress owns how Hangar reaches the outside: one guarded dialer that every outbound
// client of the server (automation http blocks, model router catalogs, image and plugin pulls)
// dials through, the redirect policy those clients follow, and the words registry errors are
// reported in.
//
// The dialer checks the address a connection is about to reach, after name resolution, in the
// dialer's Control hook: a name that resolves (or re-resolves, as in DNS rebinding) to a
// loopback, private, link-local, CGNAT, multicast or otherwise special address is refused on the
// connect that would reach it, whatever a check of the URL saw before. An operator opens
// destinations on purpose with a Policy's allow entries (HANGAR_EGRESS_ALLOW, and
// HANGAR_PRIVATE_REGISTRIES for pulls): host names, "*.suffix" patterns, IP addresses or CIDR
// prefixes.
//
// The package is Hangar's own rather than a library's (code.dny.dev/ssrf, safeurl) because the
// allow entries are host names as well as prefixes, and a name is only known to the dial
// function, not to the Control hook those libraries hook into.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// Policy is the set of destinations an operator allows beyond the public internet. The zero
// Policy allows public addresses only.
type Policy struct {
	hosts    []string // lower-case names and "*.suffix" patterns
	prefixes []netip.Prefix
}

// hostName is a DNS name (letters, digits, '-', '_' and dots between labels).
var hostName = regexp.MustCompile(`^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$`)

// Parse reads allow entries: host names, "*.suffix" patterns, IP addresses and CIDR prefixes.
// A name allows every private address it resolves to, but not link-local ones (where cloud
// metadata servers answer): only a prefix or address entry that covers a link-local address
// opens it.
func Parse(entries []string) (Policy, error) {
	var p Policy
	for _, e := range entries {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "":
		case strings.Contains(e, "/"):
			pfx, err := netip.ParsePrefix(e)
			if err != nil {
				return Policy{}, fmt.Errorf("allow entry %q: %w", e, err)
			}
			p.prefixes = append(p.prefixes, pfx.Masked())
		default:
			if a, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
				p.prefixes = append(p.prefixes, netip.PrefixFrom(plain(a), plain(a).BitLen()))
				continue
			}
			name := strings.TrimSuffix(e, ".")
			if !hostName.MatchString(strings.TrimPrefix(name, "*.")) {
				return Policy{}, fmt.Errorf("allow entry %q: want a host name, *.suffix, an IP address or a CIDR prefix", e)
			}
			p.hosts = append(p.hosts, name)
		}
	}
	return p, nil
}

// MustParse is Parse for entries fixed in code (tests, `hangar dev`); it panics on a bad entry.
func MustParse(entries ...string) Policy {
	p, err := Parse(entries)
	if err != nil {
		panic(err)
	}
	return p
}

// Union allows what either policy allows.
func (p Policy) Union(q Policy) Policy {
	return Policy{
		hosts:    append(append([]string(nil), p.hosts...), q.hosts...),
		prefixes: append(append([]netip.Prefix(nil), p.prefixes...), q.prefixes...),
	}
}

// Empty reports whether the policy allows public addresses only.
func (p Policy) Empty() bool { return len(p.hosts) == 0 && len(p.prefixes) == 0 }

// allowsName reports whether host matches a name entry.
func (p Policy) allowsName(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, h := range p.hosts {
		if suffix, ok := strings.CutPrefix(h, "*."); ok && strings.HasSuffix(host, "."+suffix) || h == host {
			return true
		}
	}
	return false
}

func (p Policy) allowsAddr(a netip.Addr) bool {
	for _, pfx := range p.prefixes {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// ErrRefused is what every refused destination matches with errors.Is.
var ErrRefused = errors.New("refused by the egress policy")

// RefusedError says which destination was refused and why; it never carries anything the
// destination sent.
type RefusedError struct {
	Host   string     // the name or literal asked for
	Addr   netip.Addr // the address it resolved to; invalid when the name alone was refused
	Reason string     // e.g. "a private address"
}

func (e *RefusedError) Error() string {
	dest := e.Host
	if e.Addr.IsValid() && e.Addr.String() != e.Host {
		dest = fmt.Sprintf("%s (%s)", e.Host, e.Addr)
	}
	return fmt.Sprintf("%s is %s, which Hangar does not connect to unless an operator allows it", dest, e.Reason)
}

func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// CheckAddr decides a connection to host (the name or literal asked for) at address a.
func (p Policy) CheckAddr(host string, a netip.Addr) error {
	a = plain(a)
	if p.allowsAddr(a) {
		return nil
	}
	reason, special := Special(a)
	if !special {
		return nil
	}
	if p.allowsName(host) && !isLinkLocal(a) {
		return nil
	}
	return &RefusedError{Host: host, Addr: a, Reason: reason}
}

// CheckHost refuses, before any lookup, the names of cloud metadata servers and IP literals that
// CheckAddr would refuse.
func (p Policy) CheckHost(host string) error {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		return p.CheckAddr(host, a)
	}
	if metadataNames[host] && !p.allowsName(host) {
		return &RefusedError{Host: host, Reason: "a cloud metadata server"}
	}
	return nil
}

// metadataNames are the names cloud metadata servers answer to.
var metadataNames = map[string]bool{
	"metadata.google.internal": true, "metadata": true, "metadata.goog": true,
	"instance-data": true, "instance-data.ec2.internal": true,
}

// awsMetadataV6 is where AWS's metadata server answers over IPv6.
var awsMetadataV6 = netip.MustParseAddr("fd00:ec2::254")

// IsMetadataHost reports whether host names a cloud metadata server or is a link-local literal:
// configuration that points at one is refused outright, since the server hands out the
// deployment's own credentials.
func IsMetadataHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		a = plain(a)
		return isLinkLocal(a) || a == awsMetadataV6
	}
	return metadataNames[host]
}

// special lists the ranges the dialer refuses, with the words a refusal uses. IPv4-mapped IPv6
// addresses are unmapped before the lookup; NAT64 and 6to4 addresses are judged by the IPv4
// address they carry.
var special = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address (where cloud metadata servers answer)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol assignment address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved or broadcast address"},
	{netip.MustParsePrefix("::/128"), "an unspecified address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible address"},
	{netip.MustParsePrefix("100::/64"), "a discard address"},
	{netip.MustParsePrefix("fc00::/7"), "a private (unique local) address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address (where cloud metadata servers answer)"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

var (
	nat64     = []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48")}
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Special reports whether a is an address no outbound request of Hangar reaches by default, and
// what kind it is.
func Special(a netip.Addr) (string, bool) {
	a = plain(a)
	if !a.IsValid() {
		return "not an IP address", true
	}
	for _, s := range special {
		if s.prefix.Contains(a) {
			return s.reason, true
		}
	}
	b := a.As16()
	for _, p := range nat64 {
		if p.Contains(a) {
			return Special(netip.AddrFrom4([4]byte(b[12:16])))
		}
	}
	if sixToFour.Contains(a) {
		return Special(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return "", false
}

// plain is a without its IPv6 zone (the dialer ignores zones for routing purposes, and prefixes
// never contain a zoned address) and with an IPv4-mapped address as the IPv4 address it is.
func plain(a netip.Addr) netip.Addr { return a.WithZone("").Unmap() }

func isLinkLocal(a netip.Addr) bool {
	return a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast()
}

// DialContext connects to addr ("host:port") unless the policy refuses the host or the address
// it resolves to. The check runs in the dialer's ControlContext, on the very address the socket
// connects to.
func (p Policy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if err := p.CheckHost(host); err != nil {
		return nil, err
	}
	d := net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("dial %s: %w", address, err)
			}
			return p.CheckAddr(host, ap.Addr())
		},
	}
	return d.DialContext(ctx, network, addr)
}

// Transport is an HTTP transport that dials through the policy and never through a proxy from
// the environment (a proxy would make every connection one to the proxy's address).
func (p Policy) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = p.DialContext
	return t
}
