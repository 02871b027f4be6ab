package egressproxy

import (
	"net"
	"strconv"
	"strings"
)

// Rules are the destinations one session may reach: the union of its profile's network section,
// its harness's egress, its model router's egress_hosts and its repos' hosts. Entries are host
// names or IP literals with an optional ":port" (AllowHosts) and names whose leftmost labels
// may each be "*", matching one label each (AllowHostPatterns). Whatever they say, the proxy's
// dialer never reaches an address that is not global unicast (loopback, private, link-local,
// documentation, benchmarking...) nor one of the host's own addresses: Rules narrow which public
// destinations are reached, and never open one of those.
type Rules struct {
	// DefaultAllow lets every public destination through that no entry names.
	DefaultAllow      bool
	AllowHosts        []string
	AllowHostPatterns []string
}

// Union is what either r or o allows.
func (r Rules) Union(o Rules) Rules {
	return Rules{
		DefaultAllow:      r.DefaultAllow || o.DefaultAllow,
		AllowHosts:        append(append([]string(nil), r.AllowHosts...), o.AllowHosts...),
		AllowHostPatterns: append(append([]string(nil), r.AllowHostPatterns...), o.AllowHostPatterns...),
	}
}

// decide says whether host:port is allowed and by which rule, in words an audit event and a
// refusal show.
func (r Rules) decide(host string, port int) (bool, string) {
	if e, ok := matchHost(host, port, r.AllowHosts, r.AllowHostPatterns); ok {
		return true, e
	}
	if r.DefaultAllow {
		return true, "default allow"
	}
	return false, "default deny: " + host + " is in no allow_hosts or allow_host_patterns entry"
}

// matchHost returns the first entry of hosts or patterns that names host:port.
func matchHost(host string, port int, hosts, patterns []string) (string, bool) {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	for _, e := range hosts {
		if h, ok := entryPort(e, port); ok && h == host {
			return "allow_hosts " + e, true
		}
	}
	for _, e := range patterns {
		if h, ok := entryPort(e, port); ok && patternMatches(h, host) {
			return "allow_host_patterns " + e, true
		}
	}
	return "", false
}

// entryPort splits an entry's optional port and reports whether it admits port.
func entryPort(entry string, port int) (string, bool) {
	entry = strings.ToLower(strings.TrimSpace(entry))
	h, p, err := net.SplitHostPort(entry)
	if err != nil {
		return strings.Trim(entry, "[]"), true
	}
	n, err := strconv.Atoi(p)
	return h, err == nil && n == port
}

// patternMatches reports whether host matches a pattern whose leftmost labels may be "*".
func patternMatches(pattern, host string) bool {
	pl, hl := strings.Split(pattern, "."), strings.Split(host, ".")
	if len(pl) != len(hl) {
		return false
	}
	for i := range pl {
		if pl[i] != "*" && pl[i] != hl[i] {
			return false
		}
	}
	return true
}
