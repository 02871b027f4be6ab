package egressproxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// Where a request or connection goes, and whether it may.

// Allows reports whether the secret may go to host:port.
func (s Secret) Allows(host string, port int) bool {
	_, ok := matchHost(host, port, s.AllowHosts, s.AllowHostPatterns)
	return ok
}

// target is where the requests of an HTTP connection go when the connection itself says
// (captured, CONNECTed, intercepted); nil for an explicit proxy connection, whose requests name
// their own.
type target struct {
	host   string
	port   int
	scheme string
	mode   string
}

// requestTarget is the scheme, host and port an explicit proxy request names. An absolute
// https:// URL (what busybox wget sends) is fetched over TLS by the proxy itself.
func requestTarget(r *http.Request) (*target, error) {
	hostport, scheme := r.Host, "https"
	if r.Method != http.MethodConnect {
		if !r.URL.IsAbs() || (r.URL.Scheme != "http" && r.URL.Scheme != "https") {
			return nil, errors.New("an HTTP proxy request needs an absolute http:// or https:// URL, or CONNECT")
		}
		hostport, scheme = r.URL.Host, r.URL.Scheme
	}
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		host, p = hostport, map[string]string{"http": "80", "https": "443"}[scheme]
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 || host == "" {
		return nil, fmt.Errorf("bad target %q", hostport)
	}
	return &target{host: strings.ToLower(strings.Trim(host, "[]")), port: port, scheme: scheme, mode: "proxy"}, nil
}
