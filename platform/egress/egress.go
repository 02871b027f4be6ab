// Package egress owns how Hangar reaches the outside: one guarded dialer that every outbound
// client of the server (automation http blocks, model router catalogs, image and plugin pulls)
// dials through, the redirect policy those clients follow, and the words registry errors are
// reported in.
//
// The dialer checks the address a connection is about to reach, after name resolution, in the
// dialer's Control hook: a name that resolves (or re-resolves, as in DNS rebinding) to an address
// that is not global unicast (the IANA special-purpose registries' ranges, special.go: loopback,
// private, link-local, CGNAT, documentation, benchmarking, multicast, reserved...) or to an
// address of this host's own interfaces is refused on the connect that would reach it, whatever
// a check of the URL saw before, and whatever a sandbox's or user's policy says: those only
// narrow what public hosts are reached. An operator opens destinations on purpose with a
// Policy's allow entries (HANGAR_EGRESS_ALLOW, and HANGAR_PRIVATE_REGISTRIES for pulls): host
// names, "*.suffix" patterns or IP addresses, each with an optional port, or CIDR prefixes.
// The sandboxes' egress proxy dials by a Policy of its own (HANGAR_SANDBOX_EGRESS_ALLOW,
// ForSandboxes), which never opens this host's addresses, link-local ones or metadata servers.
//
// The package is Hangar's own rather than a library's (code.dny.dev/ssrf, safeurl) because the
// allow entries are host names as well as prefixes, and a name is only known to the dial
// function, not to the Control hook those libraries hook into.
package egress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Policy is the set of destinations an operator allows beyond the public internet. The zero
// Policy allows public addresses only. No Policy opens an address of this host's own network
// interfaces (other than loopback) unless an entry names that very address.
type Policy struct {
	entries []entry
	host    *hostAddrs // nil: thisHost
	// sandboxes, set by ForSandboxes, names the setting the entries came from, and holds what
	// no entry opens to a sandbox.
	sandboxes string
}

// entry is one allow entry: a name (lower-case, or "*.suffix") or an address prefix (an
// address entry is a single-address prefix), and the one port it opens, 0 for every port.
type entry struct {
	name   string
	prefix netip.Prefix
	port   uint16
}

// hostName is a DNS name (letters, digits, '-', '_' and dots between labels).
var hostName = regexp.MustCompile(`^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$`)

// Parse reads allow entries: host names, "*.suffix" patterns and IP addresses, each with an
// optional ":port" ("[v6]:port" for an IPv6 address) that limits it to that port, and CIDR
// prefixes, which open every port. A name allows every private or loopback address it resolves
// to, but not link-local ones (where cloud metadata servers answer): only a prefix or address
// entry that covers a link-local address opens it. An address of this host's own interfaces
// (loopback aside) opens only to an entry for that single address (an address, or a /32 or
// /128 prefix): never to a name, a wider prefix or the default.
func Parse(entries []string) (Policy, error) {
	var p Policy
	for _, raw := range entries {
		e := strings.ToLower(strings.TrimSpace(raw))
		if e == "" {
			continue
		}
		en, err := parseEntry(e)
		if err != nil {
			return Policy{}, fmt.Errorf("allow entry %q: %w", e, err)
		}
		p.entries = append(p.entries, en)
	}
	return p, nil
}

func parseEntry(e string) (entry, error) {
	if strings.Contains(e, "/") {
		pfx, err := netip.ParsePrefix(e)
		if err != nil {
			return entry{}, err
		}
		return entry{prefix: pfx.Masked()}, nil
	}
	host, port, err := splitHostPort(e)
	if err != nil {
		return entry{}, err
	}
	var en entry
	if port != "" {
		n, _ := strconv.Atoi(port) // splitHostPort checked it is 1-65535
		en.port = uint16(n)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return entry{}, errors.New("has an IPv6 zone, which means nothing outside one machine")
		}
		en.prefix = netip.PrefixFrom(plain(a), plain(a).BitLen())
		return en, nil
	}
	en.name = strings.TrimSuffix(host, ".")
	if !hostName.MatchString(strings.TrimPrefix(en.name, "*.")) {
		return entry{}, errors.New("want a host name, *.suffix or an IP address (each with an optional :port), or a CIDR prefix")
	}
	return en, nil
}

// MustParse is Parse for entries fixed in code (tests, `hangar dev`); it panics on a bad entry.
func MustParse(entries ...string) Policy {
	p, err := Parse(entries)
	if err != nil {
		panic(err)
	}
	return p
}

// Union allows what either policy allows. It judges this host's addresses as p does, and is
// for sandboxes when either is.
func (p Policy) Union(q Policy) Policy {
	host := p.host
	if host == nil {
		host = q.host
	}
	return Policy{entries: append(append([]entry(nil), p.entries...), q.entries...), host: host, sandboxes: cmp.Or(p.sandboxes, q.sandboxes)}
}

// ForSandboxes is p as the dialer of sandboxes' connections (the host's egress proxy) applies
// it, its entries read from the operator's setting (named in refusals). A sandbox is untrusted,
// so some destinations stay closed to it whatever the entries say: an address of this host's
// own interfaces (even one an entry names), a link-local address and a cloud metadata server
// (by name or address), and the unspecified addresses (0.0.0.0/8, ::), which a connect takes
// for this host. A loopback address opens only to an entry that names its port: a prefix or a
// bare address would open every service this host listens on locally.
func (p Policy) ForSandboxes(setting string) Policy {
	p.sandboxes = setting
	return p
}

// metadataAddrs are the addresses cloud metadata servers answer at outside link-local ones:
// AWS over IPv6, Alibaba Cloud.
var metadataAddrs = map[netip.Addr]bool{awsMetadataV6: true, netip.MustParseAddr("100.100.100.200"): true}

// sandboxNever is why a sandbox may not reach a at all, or "".
func sandboxNever(a netip.Addr) string {
	// An address that carries an IPv4 address reaches it (special.go).
	if b := a.As16(); a.Is6() && (nat64.Contains(a) || sixToFour.Contains(a)) {
		in := netip.AddrFrom4([4]byte(b[12:]))
		if sixToFour.Contains(a) {
			in = netip.AddrFrom4([4]byte(b[2:6]))
		}
		if reason := sandboxNever(in); reason != "" {
			return "an address carrying " + in.String() + ", " + reason
		}
	}
	switch {
	case isLinkLocal(a):
		return "a link-local address, where cloud metadata servers answer"
	case metadataAddrs[a]:
		return "a cloud metadata server's address"
	case a.IsUnspecified() || a.Is4() && a.As4()[0] == 0:
		return `a "this network" address, which a connection takes for this host`
	}
	return ""
}

// Lists reports whether an entry names host (the name or literal asked for) or its address a:
// the destination is one the operator opened, not merely a public one.
func (p Policy) Lists(host string, a netip.AddrPort) bool {
	a = netip.AddrPortFrom(plain(a.Addr()), a.Port())
	return p.allowsName(host, a.Port()) || p.allowsAddr(a, false)
}

// Empty reports whether the policy allows public addresses only.
func (p Policy) Empty() bool { return len(p.entries) == 0 }

func (e entry) admits(port uint16) bool { return e.port == 0 || e.port == port }

// allowsName reports whether host, on port, matches a name entry.
func (p Policy) allowsName(host string, port uint16) bool {
	return p.allowsNamePorted(host, port, false)
}

// allowsNamePorted is allowsName; with ported, only an entry that names the port counts.
func (p Policy) allowsNamePorted(host string, port uint16, ported bool) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, e := range p.entries {
		if e.name == "" || !e.admits(port) || ported && e.port == 0 {
			continue
		}
		if suffix, ok := strings.CutPrefix(e.name, "*."); ok && strings.HasSuffix(host, "."+suffix) || e.name == host {
			return true
		}
	}
	return false
}

// allowsAddr reports whether a prefix or address entry covers a on port; with single, only an
// entry for exactly that address counts.
func (p Policy) allowsAddr(a netip.AddrPort, single bool) bool {
	return p.allowsAddrPorted(a, single, false)
}

// allowsAddrPorted is allowsAddr; with ported, only an entry that names the port counts.
func (p Policy) allowsAddrPorted(a netip.AddrPort, single, ported bool) bool {
	for _, e := range p.entries {
		if e.name == "" && e.prefix.Contains(a.Addr()) && e.admits(a.Port()) && (!single || e.prefix.IsSingleIP()) && (!ported || e.port != 0) {
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
	// Setting is the operator's setting a sandbox's destination would have to be listed in
	// (ForSandboxes); Never says no entry of it opens the destination.
	Setting string
	Never   bool
}

func (e *RefusedError) Error() string {
	dest := e.Host
	if e.Addr.IsValid() && e.Addr.String() != e.Host {
		dest = fmt.Sprintf("%s (%s)", e.Host, e.Addr)
	}
	switch {
	case e.Setting == "":
		return fmt.Sprintf("%s is %s, which Hangar does not connect to unless an operator allows it", dest, e.Reason)
	case e.Never:
		return fmt.Sprintf("%s is %s, which no sandbox reaches, whatever %s lists", dest, e.Reason, e.Setting)
	}
	return fmt.Sprintf("%s is %s, which a sandbox reaches only when the operator lists it in %s", dest, e.Reason, e.Setting)
}

// refused is the error of a destination p refuses; never says no entry could open it.
func (p Policy) refused(host string, a netip.Addr, reason string, never bool) error {
	return &RefusedError{Host: host, Addr: a, Reason: reason, Setting: p.sandboxes, Never: never && p.sandboxes != ""}
}

func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// CheckAddr decides a connection to host (the name or literal asked for) at a. An address of
// this host's own interfaces is refused first, whatever range it is in, unless an entry names
// that single address; then a special address (Special) is refused unless an entry opens it.
func (p Policy) CheckAddr(host string, a netip.AddrPort) error {
	a = netip.AddrPortFrom(plain(a.Addr()), a.Port())
	hosts := p.host
	if hosts == nil {
		hosts = thisHost
	}
	own, err := hosts.has(a.Addr())
	switch {
	case err != nil:
		return p.refused(host, a.Addr(), "not checkable against this host's own addresses, which cannot be read", false)
	case own && p.allowsAddr(a, true) && p.sandboxes == "":
		return nil
	case own:
		return p.refused(host, a.Addr(), "an address of this host's own network interfaces", true)
	}
	if p.sandboxes != "" {
		if reason := sandboxNever(a.Addr()); reason != "" {
			return p.refused(host, a.Addr(), reason, true)
		}
		if a.Addr().IsLoopback() {
			if p.allowsAddrPorted(a, false, true) || p.allowsNamePorted(host, a.Port(), true) {
				return nil
			}
			return p.refused(host, a.Addr(), "a loopback address (RFC 1122), opened only by an entry with its port", false)
		}
	}
	if p.allowsAddr(a, false) {
		return nil
	}
	reason, special := Special(a.Addr())
	if !special {
		return nil
	}
	if p.allowsName(host, a.Port()) && !isLinkLocal(a.Addr()) {
		return nil
	}
	return p.refused(host, a.Addr(), reason, false)
}

// CheckHost refuses, before any lookup, the names of cloud metadata servers and IP literals that
// CheckAddr would refuse, for a connection to port.
func (p Policy) CheckHost(host string, port uint16) error {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		return p.CheckAddr(host, netip.AddrPortFrom(a, port))
	}
	if metadataNames[host] && (p.sandboxes != "" || !p.allowsName(host, port)) {
		return p.refused(host, netip.Addr{}, "a cloud metadata server", true)
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
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("dial %s: port %q is not a number", addr, portStr)
	}
	if err := p.CheckHost(host, uint16(port)); err != nil {
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
			return p.CheckAddr(host, ap)
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
