package egress

import (
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
)

// CheckEndpoint reads the URL of an endpoint Hangar calls as a client of an identity or OAuth
// provider (an OpenID Connect issuer, an OAuth token endpoint): absolute https (plain http only
// on a loopback host, and only when loopbackHTTP, which only tests' loopback providers set), no
// user info, no fragment, not a cloud metadata server, and not an address the policy refuses.
// The dialer checks again what the name resolves to on every connection.
func (p Policy) CheckEndpoint(raw string, loopbackHTTP bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return nil, errors.New("must be an absolute https URL")
	}
	host := u.Hostname()
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && loopbackHTTP && IsLoopbackHost(host):
	default:
		return nil, errors.New("must be an https URL")
	}
	if u.User != nil || u.Fragment != "" {
		return nil, errors.New("must hold no user info and no fragment")
	}
	if IsMetadataHost(host) {
		return nil, errors.New("names a cloud metadata server")
	}
	if err := p.CheckHost(host, urlPort(u)); err != nil {
		return nil, err
	}
	return u, nil
}

// urlPort is the port a request to u connects to: its own, or its scheme's; 0 when it has
// neither, which no port-limited allow entry admits.
func urlPort(u *url.URL) uint16 {
	if n, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
		return uint16(n)
	}
	return map[string]uint16{"http": 80, "https": 443}[u.Scheme]
}

// EndpointClient is the HTTP client of calls to such endpoints: the guarded dialer, and every
// redirect checked as CheckEndpoint checks a URL.
func (p Policy) EndpointClient(loopbackHTTP bool) *http.Client {
	return p.Client(MaxRedirects, func(u *url.URL) error {
		_, err := p.CheckEndpoint(u.String(), loopbackHTTP)
		return err
	})
}

// IsLoopbackHost reports whether host is "localhost" or a loopback address literal.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
