package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// maxHostnameLen is DNS's limit on a name in its text form.
const maxHostnameLen = 253

// NormalizeHost checks an allow_hosts entry of a sandbox network policy (a profile's network, an
// image's warm network), a DNS hostname or an IP literal with an optional :port, and returns it
// in canonical form (lowercase; IPs as netip prints them; an IPv6 address in brackets when a
// port follows) so that equal hosts compare equal, for duplicates and for the egress proxy's
// matching later.
func NormalizeHost(s string) (string, error) {
	host, port, err := splitHostPort(s)
	if err != nil {
		return "", err
	}
	if strings.Contains(host, "*") {
		return "", errors.New("has a wildcard: patterns such as *.example.com go in allow_host_patterns")
	}
	host, err = CanonicalHost(host)
	if err != nil {
		return "", err
	}
	return joinHostPort(host, port), nil
}

// NormalizeHostPattern checks an allow_host_patterns entry: a hostname whose leftmost labels may
// each be "*", with an optional :port, returned lowercased.
func NormalizeHostPattern(s string) (string, error) {
	host, port, err := splitHostPort(s)
	if err != nil {
		return "", err
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return "", errors.New("is an IP address: patterns match hostnames; put addresses in allow_hosts")
	}
	host = lowerASCII(host)
	if err := checkHostname(host, true); err != nil {
		return "", err
	}
	return joinHostPort(host, port), nil
}

// CanonicalHost returns an IP literal in netip's form or a valid hostname lowercased.
func CanonicalHost(host string) (string, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return "", errors.New("has an IPv6 zone, which means nothing outside one machine")
		}
		return ip.String(), nil
	}
	host = lowerASCII(host)
	return host, checkHostname(host, false)
}

// lowerASCII lowers A-Z only: strings.ToLower would make a name of the Kelvin sign (U+212A)
// one of "k", a name nobody wrote and no resolver would have been asked for.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// DestinationHost is the host a connection or request names (a CONNECT's target, a URL's or
// Host header's host, a TLS server name) in its one normal form: lower case, no trailing dot,
// an IP literal as netip prints it and without brackets; or why it is neither a host name nor
// an IP literal. A name is labels of letters, digits, '-' and '_' (not at a
// label's ends for '-'), at most 63 characters each and 253 in all; one whose last label is all
// digits reads as an IP address in a form other than netip's (0x7f.1, 2130706433, 01.2.3.4),
// which resolvers disagree on, and is refused. Brackets hold an IPv6 literal only.
func DestinationHost(host string) (string, error) {
	h := host
	bracketed := strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") && len(h) >= 2
	if bracketed {
		h = h[1 : len(h)-1]
	}
	if a, err := netip.ParseAddr(h); err == nil {
		switch {
		case a.Zone() != "":
			return "", errors.New("an IPv6 zone means nothing outside one machine")
		case bracketed && !a.Is6():
			return "", errors.New("brackets hold an IPv6 literal only")
		}
		return a.String(), nil
	}
	if bracketed {
		return "", errors.New("brackets hold an IPv6 literal only")
	}
	h = lowerASCII(strings.TrimSuffix(h, "."))
	if h == "" || len(h) > maxHostnameLen {
		return "", fmt.Errorf("a host name has 1 to %d characters", maxHostnameLen)
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", errors.New("a host name's labels have 1 to 63 characters")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", errors.New("a host name's label neither starts nor ends with '-'")
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", errors.New("a host name has letters, digits, '-' and '_' only")
			}
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", errors.New("its last label is all digits: an IP address in a form other than a literal's")
	}
	return h, nil
}

// splitHostPort separates an optional :port. A bare IPv6 literal has colons of its own, so it
// takes a port only in brackets, as in URLs.
func splitHostPort(s string) (host, port string, err error) {
	if rest, ok := strings.CutPrefix(s, "["); ok {
		host, after, found := strings.Cut(rest, "]")
		if !found {
			return "", "", errors.New(`has "[" without "]"`)
		}
		if ip, err := netip.ParseAddr(host); err != nil || !ip.Is6() {
			return "", "", errors.New("has brackets around something other than an IPv6 address")
		}
		if after == "" {
			return host, "", nil
		}
		p, ok := strings.CutPrefix(after, ":")
		if !ok {
			return "", "", errors.New(`has text after "]" that is not a :port`)
		}
		port, err = checkPort(p)
		return host, port, err
	}
	if strings.Count(s, ":") != 1 {
		return s, "", nil
	}
	host, p, _ := strings.Cut(s, ":")
	port, err = checkPort(p)
	return host, port, err
}

// checkPort returns p without leading zeros when it is a port number.
func checkPort(p string) (string, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || strings.TrimLeft(p, "0123456789") != "" {
		return "", fmt.Errorf("has port %q: a port is a number from 1 to 65535", p)
	}
	return strconv.Itoa(n), nil
}

func joinHostPort(host, port string) string {
	if port == "" {
		return host
	}
	return net.JoinHostPort(host, port)
}

// checkHostname checks a lowercased DNS hostname; with wildcards, its leftmost labels may be "*".
func checkHostname(name string, wildcards bool) error {
	if name == "" {
		return errors.New("is empty")
	}
	if len(name) > maxHostnameLen {
		return fmt.Errorf("is longer than %d characters", maxHostnameLen)
	}
	fixed := strings.Split(name, ".")
	for wildcards && len(fixed) > 0 && fixed[0] == "*" {
		fixed = fixed[1:]
	}
	if len(fixed) == 0 {
		return errors.New(`must name a domain after its "*" labels: wildcards alone would match every host`)
	}
	for _, label := range fixed {
		if err := checkLabel(label); err != nil {
			return err
		}
	}
	// Why: a name like 10.0.0.300 is no valid IP, and reading it as a hostname would hide the typo.
	if strings.Trim(fixed[len(fixed)-1], "0123456789") == "" {
		return errors.New("ends in an all-numeric label, which reads as a mistyped IP address")
	}
	return nil
}

func checkLabel(label string) error {
	switch {
	case label == "":
		return errors.New("has an empty label (two dots in a row, or a dot at an end)")
	case len(label) > 63:
		return fmt.Errorf("has label %q longer than 63 characters", label)
	case strings.Contains(label, "*"):
		return errors.New(`has "*" where only a whole leftmost label of a pattern may be one`)
	case strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-") != "":
		return fmt.Errorf("has label %q with characters other than a-z, 0-9 and '-'", label)
	case label[0] == '-' || label[len(label)-1] == '-':
		return fmt.Errorf("has label %q starting or ending with '-'", label)
	}
	return nil
}
