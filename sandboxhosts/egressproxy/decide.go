package egressproxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/hangar-dev/hangar/platform/egress"

	"golang.org/x/net/http/httpguts"
)

// Where a request or connection goes, and whether it may. Every entry path (the explicit
// proxy's requests and CONNECTs, captured plain HTTP, intercepted TLS served by the forwarder,
// and any other captured TCP) decides by sb.decide, then, for an HTTP request, prepares it by
// sb.prepare (head checks, secrets injected, the request line checked) and reports it by the
// decision's event (audit.go): one rule cannot hold on one path and not on another.

// decision is what decide said of one destination.
type decision struct {
	// host is the destination's name in its one normal form (lower case, no trailing dot, an IP
	// literal as netip prints it, without brackets): what the rules matched, what is dialled and
	// what the audit names. For a host that is no host name or IP literal, it is the raw host.
	host    string
	port    int
	allowed bool
	// rule says which rule allowed or refused it, in the words of an audit event and a refusal.
	rule string
}

// decide decides a connection or request bound for host:port: the host must be a host name or
// an IP literal, the port a port, the session's rules must allow it, and the guarded dialer
// must not refuse it before any lookup (an IP literal of a special range, a metadata server's
// name), which it would on the dial anyway: refused here, it gets the same readable refusal on
// every path rather than a reset on one and a 502 on another.
func (sb *Sandbox) decide(host string, port int) decision {
	d := decision{host: host, port: port}
	h, err := egress.DestinationHost(host)
	if err != nil {
		d.rule = fmt.Sprintf("bad host %q: %v", host, err)
		return d
	}
	d.host = h
	if port < 1 || port > 65535 {
		d.rule = fmt.Sprintf("bad port %d", port)
		return d
	}
	ok, rule := sb.sess.Rules.decide(h, port)
	d.rule = rule
	if !ok {
		return d
	}
	if err := sb.p.dialer.CheckHost(h, uint16(port)); err != nil {
		d.rule = "guarded dialer: " + err.Error()
		return d
	}
	d.allowed = true
	return d
}

// refusal is the sentence a refused destination is answered with.
func (d decision) refusal() string {
	return fmt.Sprintf("%s refused (%s)", net.JoinHostPort(d.host, strconv.Itoa(d.port)), d.rule)
}

// badTarget reports whether a request line's target holds what would break it (a space, a
// line break, any other control character), which only a value put into it could have put there.
func badTarget(uri string) bool {
	return strings.ContainsFunc(uri, func(r rune) bool { return r <= ' ' || r == 0x7f })
}

// prepare readies a request bound for t, whose destination is allowed and whose head passed
// checkRequest, as every path does: the secrets it carries injected (inject), then the request
// line it will go with checked.
func (sb *Sandbox) prepare(r *http.Request, t *target) (injection, *refusal) {
	inj, ref := sb.inject(r, t)
	if ref != nil {
		return injection{}, ref
	}
	if badTarget(r.URL.RequestURI()) {
		msg := "the request's target holds a space or a control character"
		return injection{}, &refusal{rule: msg, msg: msg}
	}
	return inj, nil
}

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
	host, port, err := splitAuthority(hostport, map[string]int{"http": 80, "https": 443}[scheme])
	if err != nil {
		return nil, fmt.Errorf("bad target %q: %v", hostport, err)
	}
	return &target{host: host, port: port, scheme: scheme, mode: "proxy"}, nil
}

// splitAuthority splits a request's authority (a CONNECT's target, an absolute URL's host, a
// Host header) into its host and port, defaultPort when it names none. An IPv6 literal is in
// brackets, which the host keeps (egress.DestinationHost takes them off), as RFC 3986 has it:
// unbracketed, "::1:80" could be ::1 on port 80 or the address ::1:80.
func splitAuthority(hostport string, defaultPort int) (string, int, error) {
	host, port := hostport, ""
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return "", 0, errors.New(`"[" without "]"`)
		}
		host, port = hostport[:end+1], hostport[end+1:]
		if port != "" && port[0] != ':' {
			return "", 0, errors.New(`text after "]" that is not a :port`)
		}
		port = strings.TrimPrefix(port, ":")
	} else {
		switch strings.Count(hostport, ":") {
		case 0:
		case 1:
			host, port, _ = strings.Cut(hostport, ":")
		default:
			return "", 0, errors.New("an IPv6 literal in an authority goes in brackets")
		}
	}
	if host == "" {
		return "", 0, errors.New("no host")
	}
	if port == "" {
		return host, defaultPort, nil
	}
	n, err := strconv.Atoi(port)
	if err != nil || len(port) > 5 || strings.Trim(port, "0123456789") != "" || n < 1 || n > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return host, n, nil
}

// checkRequest makes the checks net/http's server makes of a request's head beyond parsing it,
// and refuses what an intercepted connection does not forward; it returns the status to answer
// with, or 0.
// hosts are the Host header's values as the request sent them (net/http's server has checked
// its own requests' already, and passes req.Host).
func checkRequest(req *http.Request, hosts []string) (int, string) {
	if req.ProtoMajor != 1 {
		return http.StatusHTTPVersionNotSupported, "unsupported protocol version"
	}
	if req.Method == http.MethodConnect {
		return http.StatusMethodNotAllowed, "CONNECT inside an intercepted connection is not forwarded"
	}
	// http.ReadRequest has refused a second Host header and moved the one into req.Host (or
	// taken an absolute target's).
	if req.ProtoAtLeast(1, 1) && len(hosts) == 0 {
		return http.StatusBadRequest, "missing required Host header"
	}
	for _, h := range append(hosts, req.Host) {
		if h != "" && !httpguts.ValidHostHeader(h) {
			return http.StatusBadRequest, "malformed Host header"
		}
	}
	if len(hosts) > 1 {
		return http.StatusBadRequest, "too many Host headers"
	}
	// The target is sent on as RequestURI has it: an origin-form path, or "*"; an opaque one
	// ("GET http:x HTTP/1.1") would go as "x", which no server reads.
	if uri := req.URL.RequestURI(); !strings.HasPrefix(uri, "/") && uri != "*" {
		return http.StatusBadRequest, "the request's target is neither a path nor an absolute URL with one"
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return http.StatusBadRequest, "invalid header name"
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return http.StatusBadRequest, "invalid header value"
			}
		}
	}
	if e := req.Header["Expect"]; len(e) > 0 && !(len(e) == 1 && strings.EqualFold(e[0], "100-continue")) {
		return http.StatusExpectationFailed, "unsupported Expect header"
	}
	return 0, ""
}
