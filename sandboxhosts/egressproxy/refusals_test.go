package egressproxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/platform/egress"

	"github.com/hangar-dev/hangar/internal/testkit"
)

// refusalFixture serves a session whose rules list, beside plain.example.com:80 and
// api.example.com (whose secret makes it intercepted), destinations that must be refused
// whatever a rule says: special addresses, a metadata server's name, names that are no host
// names. plain.example.com and api.example.com are recorders.
func refusalFixture(t *testing.T) (f *fixture, plain, api *recorder) {
	t.Helper()
	f = newFixture(t, Rules{AllowHosts: []string{"plain.example.com:80", "api.example.com", "10.0.0.1", "::1", "::ffff:127.0.0.1",
		"metadata.google.internal", "a!b.example.com", "2130706433", "a..example.com"}})
	plain, api = &recorder{}, &recorder{}
	f.plain.Config.Handler, f.api.Config.Handler = plain, api
	return f, plain, api
}

// capturedAddr is a public address the sandbox's capture sends to the proxy: a connection to it
// is named by its SNI or Host only.
const capturedAddr = "93.184.216.34"

// newEvent waits for the first denial of mode for host (in its normal form, or as written when
// it has none) reported after the first n events.
func (f *fixture) newEvent(t *testing.T, n int, mode, host string) Connection {
	t.Helper()
	if h, err := egress.DestinationHost(host); err == nil {
		host = h
	}
	var got Connection
	testkit.Eventually(t, 10*time.Second, "a "+mode+" denial", func() (bool, string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, e := range f.events[min(n, len(f.events)):] {
			if e.Mode == mode && e.Decision == Denied && e.Host == host {
				got = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("events %+v", f.events[min(n, len(f.events)):])
	})
	return got
}

func (f *fixture) eventCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.events)
}

// exchangeRaw writes raw on c (from another goroutine: the proxy may answer before it has read
// all of it) and reads one answer; status 0 is a connection ended without one.
func exchangeRaw(t *testing.T, c net.Conn, br *bufio.Reader, raw string) (int, http.Header, string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	go io.WriteString(c, raw)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		return 0, nil, err.Error()
	}
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

func (f *fixture) dialSandbox(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := dialIn(f.ns.Path, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// authority is host and port as a URL, a CONNECT or a Host header names them.
func authority(host string, port int) string { return host + ":" + itoa(port) }

// Every destination refusal is one decision (decide.go), whichever way the sandbox's request
// or connection reaches the proxy: an explicit proxy request with an absolute URL, an explicit
// CONNECT, a captured plain HTTP request named by its Host, and a captured TLS connection named
// by its SNI (or, for an IP literal, by its address). HTTP gets the same status on each path,
// TLS a reset, and every path's audit event names the same rule; nothing reaches an upstream.
func TestSecurityEveryRefusalHoldsOnBothEntryPaths(t *testing.T) {
	f, plain, api := refusalFixture(t)
	type attempt struct {
		status int
		rule   string
	}
	paths := []struct {
		name, mode string
		// try sends the case's request for host:port (as written: brackets, case, dots kept)
		// and returns what the sandbox got and what the audit said (rule "": no event, as for
		// a malformed request).
		try func(t *testing.T, host string, port int, wantEvent bool) attempt
		// takes reports whether the path can name host: an unbracketed IPv6 literal is no
		// authority, and TLS names an IP literal by its address, which IPv6 cannot reach here.
		takes func(host string) bool
	}{
		{"explicit proxy request", "proxy", func(t *testing.T, host string, port int, wantEvent bool) attempt {
			n := f.eventCount()
			c, br := f.dialSandbox(t, "127.0.0.1:3128")
			a := authority(host, port)
			status, h, body := exchangeRaw(t, c, br, "GET http://"+a+"/x HTTP/1.1\r\nHost: "+a+"\r\n\r\n")
			if status == http.StatusForbidden && (h.Get("X-Hangar-Egress") != "denied" || !strings.Contains(body, "refused (")) {
				t.Errorf("403 without the proxy's refusal: %v %q", h, body)
			}
			if !wantEvent {
				return attempt{status: status}
			}
			return attempt{status, f.newEvent(t, n, "proxy", host).Rule}
		}, func(host string) bool { return !strings.Contains(host, ":") || strings.HasPrefix(host, "[") }},
		{"explicit CONNECT", "proxy", func(t *testing.T, host string, port int, wantEvent bool) attempt {
			n := f.eventCount()
			c, br := f.dialSandbox(t, "127.0.0.1:3128")
			a := authority(host, port)
			status, _, _ := exchangeRaw(t, c, br, "CONNECT "+a+" HTTP/1.1\r\nHost: "+a+"\r\n\r\n")
			if !wantEvent {
				return attempt{status: status}
			}
			return attempt{status, f.newEvent(t, n, "proxy", host).Rule}
		}, func(host string) bool { return !strings.Contains(host, ":") || strings.HasPrefix(host, "[") }},
		{"captured plain http", "transparent", func(t *testing.T, host string, port int, wantEvent bool) attempt {
			n := f.eventCount()
			c, br := f.dialSandbox(t, authority(capturedAddr, port))
			status, _, _ := exchangeRaw(t, c, br, "GET /x HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
			c.Close() // the connection's event comes as it ends
			if !wantEvent {
				return attempt{status: status}
			}
			return attempt{status, f.newEvent(t, n, "transparent", host).Rule}
		}, func(string) bool { return true }},
		{"captured tls", "transparent", func(t *testing.T, host string, port int, wantEvent bool) attempt {
			n := f.eventCount()
			addr, sni := authority(capturedAddr, port), host
			if a, err := egress.DestinationHost(host); err == nil && net.ParseIP(a) != nil {
				addr, sni = authority(a, port), ""
			}
			c, _ := f.dialSandbox(t, addr)
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			if err := tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true}).Handshake(); err == nil {
				t.Errorf("the TLS handshake for %s went through", host)
			}
			return attempt{0, f.newEvent(t, n, "transparent", host).Rule}
		}, func(host string) bool {
			a, err := egress.DestinationHost(host)
			return err != nil || net.ParseIP(a) == nil || net.ParseIP(a).To4() != nil && !strings.Contains(a, ":")
		}},
	}
	for _, tc := range []struct {
		name, host string
		port       int
		// status is what an HTTP path answers; 400 is a malformed authority, never audited.
		status int
		rule   string
	}{
		{"a host no rule names", "denied.example.com", 80, 403, "default deny: denied.example.com is in no"},
		{"a listed host on a port its entry does not name", "plain.example.com", 8080, 403, "default deny: plain.example.com is in no"},
		{"upper case and a trailing dot are the same host", "DENIED.Example.COM.", 80, 403, "default deny: denied.example.com is in no"},
		{"a private IPv4 literal, though listed", "10.0.0.1", 80, 403, "guarded dialer: 10.0.0.1 is"},
		{"IPv6 loopback in brackets, though listed", "[::1]", 80, 403, "guarded dialer: ::1 is"},
		{"IPv6 loopback spelled out in brackets, though listed", "[0:0:0:0:0:0:0:1]", 80, 403, "guarded dialer: ::1 is"},
		{"an IPv4-mapped IPv6 loopback, though listed", "[::ffff:127.0.0.1]", 80, 403, "guarded dialer: ::ffff:127.0.0.1 (127.0.0.1) is"},
		{"an IPv6 literal without brackets is no authority", "::1", 80, 400, ""},
		{"a metadata server's name, though listed", "metadata.google.internal", 80, 403, "guarded dialer: metadata.google.internal is a cloud metadata server"},
		{"a name with a character no host name has, though listed", "a!b.example.com", 80, 403, `bad host "a!b.example.com"`},
		{"an IPv4 address as one decimal number, though listed", "2130706433", 80, 403, `bad host "2130706433"`},
		{"a name with an empty label, though listed", "a..example.com", 80, 403, `bad host "a..example.com"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rules []string
			for _, p := range paths {
				if !p.takes(tc.host) {
					continue
				}
				t.Run(p.name, func(t *testing.T) {
					got := p.try(t, tc.host, tc.port, tc.rule != "")
					want := tc.status
					if p.name == "captured tls" {
						want = 0
					}
					if got.status != want {
						t.Errorf("status %d, want %d", got.status, want)
					}
					if !strings.HasPrefix(got.rule, tc.rule) {
						t.Errorf("rule %q, want it to start %q", got.rule, tc.rule)
					}
					rules = append(rules, p.name+": "+got.rule)
				})
			}
			for _, r := range rules[1:] {
				if _, rule, _ := strings.Cut(r, ": "); !strings.HasSuffix(rules[0], ": "+rule) {
					t.Errorf("the paths' rules differ:\n%s", strings.Join(rules, "\n"))
					break
				}
			}
		})
	}
	if seen := append(plain.requests(), api.requests()...); len(seen) != 0 {
		t.Fatalf("an upstream got %+v", seen)
	}

	t.Run("upper case and a trailing dot of an allowed host reach it by its name on every path", func(t *testing.T) {
		c, br := f.dialSandbox(t, "127.0.0.1:3128")
		if status, _, body := exchangeRaw(t, c, br, "GET http://PLAIN.Example.com./x HTTP/1.1\r\nHost: PLAIN.Example.com.\r\n\r\n"); status != 200 {
			t.Errorf("explicit: %d %q", status, body)
		}
		c, br = f.dialSandbox(t, capturedAddr+":80")
		if status, _, body := exchangeRaw(t, c, br, "GET /x HTTP/1.1\r\nHost: PLAIN.Example.com.\r\n\r\n"); status != 200 {
			t.Errorf("captured: %d %q", status, body)
		}
	})
}

// headPath is one way an HTTP request's head reaches the proxy: explicit (net/http's server,
// absolute-form), captured plain HTTP (net/http's server, origin-form) or intercepted TLS (the
// forwarder, origin-form).
type headPath struct {
	name string
	open func(t *testing.T) (net.Conn, *bufio.Reader)
	// target is the request-target the path's client sends for path; absolute is the
	// absolute-form of it, host the Host it names.
	target   func(path string) string
	absolute func(path string) string
	host     string
}

// Every smuggling and malformed-head case gets the same answer on every path that reads HTTP
// heads (net/http's server for the explicit proxy and captured plain HTTP, the forwarder for
// intercepted TLS), and none reaches an upstream.
func TestSecurityEveryMalformedHeadIsRefusedOnEveryEntryPath(t *testing.T) {
	f, plain, api := refusalFixture(t)
	paths := []headPath{
		{"explicit proxy", func(t *testing.T) (net.Conn, *bufio.Reader) { return f.dialSandbox(t, "127.0.0.1:3128") },
			func(p string) string { return "http://plain.example.com" + p }, func(p string) string { return "http://plain.example.com" + p }, "plain.example.com"},
		{"captured plain http", func(t *testing.T) (net.Conn, *bufio.Reader) { return f.dialSandbox(t, capturedAddr+":80") },
			func(p string) string { return p }, func(p string) string { return "http://plain.example.com" + p }, "plain.example.com"},
		{"intercepted tls", func(t *testing.T) (net.Conn, *bufio.Reader) { c, br := f.intercepted(t); return c, br },
			func(p string) string { return p }, func(p string) string { return "https://api.example.com" + p }, "api.example.com"},
	}
	for _, tc := range []struct {
		name   string
		raw    func(p headPath) string
		status int
		// notOn names a path the case does not apply to (a CONNECT is the explicit proxy's own).
		notOn string
	}{
		{"a space in the query", func(p headPath) string {
			return "GET " + p.target("/?a=b c") + " HTTP/1.1\r\nHost: " + p.host + "\r\n\r\n"
		}, 400, ""},
		{"a tab in the path", func(p headPath) string {
			return "GET " + p.target("/a\tb") + " HTTP/1.1\r\nHost: " + p.host + "\r\n\r\n"
		}, 400, ""},
		{"a bare CR in a header value", func(p headPath) string {
			return "GET " + p.target("/") + " HTTP/1.1\r\nHost: " + p.host + "\r\nX-A: a\rInjected: 1\r\n\r\n"
		}, 400, ""},
		{"a NUL in a header value", func(p headPath) string {
			return "GET " + p.target("/") + " HTTP/1.1\r\nHost: " + p.host + "\r\nX-A: a\x00b\r\n\r\n"
		}, 400, ""},
		{"a header name with a space", func(p headPath) string {
			return "GET " + p.target("/") + " HTTP/1.1\r\nHost: " + p.host + "\r\nX A: 1\r\n\r\n"
		}, 400, ""},
		{"two Host headers", func(p headPath) string {
			return "GET " + p.target("/") + " HTTP/1.1\r\nHost: " + p.host + "\r\nHost: denied.example.com\r\n\r\n"
		}, 400, ""},
		{"no Host header with an absolute-form target", func(p headPath) string {
			return "GET " + p.absolute("/") + " HTTP/1.1\r\n\r\n"
		}, 400, ""},
		{"an absolute-form target with a malformed Host header", func(p headPath) string {
			return "GET " + p.absolute("/") + " HTTP/1.1\r\nHost: a b\r\n\r\n"
		}, 400, ""},
		{"an opaque absolute target", func(p headPath) string {
			return "GET http:x HTTP/1.1\r\nHost: " + p.host + "\r\n\r\n"
		}, 400, ""},
		{"a head larger than net/http's limit", func(p headPath) string {
			return "GET " + p.target("/") + " HTTP/1.1\r\nHost: " + p.host + "\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n"
		}, 431, ""},
		{"two different Content-Lengths", func(p headPath) string {
			return "POST " + p.target("/") + " HTTP/1.1\r\nHost: " + p.host + "\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nbody"
		}, 400, ""},
		{"a Transfer-Encoding other than chunked", func(p headPath) string {
			return "POST " + p.target("/") + " HTTP/1.1\r\nHost: " + p.host + "\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n"
		}, 501, ""},
		{"two Transfer-Encodings", func(p headPath) string {
			return "POST " + p.target("/") + " HTTP/1.1\r\nHost: " + p.host + "\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n"
		}, 501, ""},
		{"an Expect other than 100-continue", func(p headPath) string {
			return "GET " + p.target("/") + " HTTP/1.1\r\nHost: " + p.host + "\r\nExpect: something\r\n\r\n"
		}, 417, ""},
		{"a CONNECT inside a connection that is not the explicit proxy's", func(p headPath) string {
			return "CONNECT other.example.com:443 HTTP/1.1\r\nHost: other.example.com:443\r\n\r\n"
		}, 405, "explicit proxy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range paths {
				if p.name == tc.notOn {
					continue
				}
				t.Run(p.name, func(t *testing.T) {
					c, br := p.open(t)
					status, _, body := exchangeRaw(t, c, br, tc.raw(p))
					if status != tc.status {
						t.Fatalf("status %d (%q), want %d", status, body, tc.status)
					}
					// The connection is not read on after a malformed head.
					_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
					if _, err := br.ReadByte(); err == nil {
						t.Fatal("the connection was read on after a malformed request")
					}
				})
			}
		})
	}
	if seen := append(plain.requests(), api.requests()...); len(seen) != 0 {
		t.Fatalf("an upstream got %+v", seen)
	}

	// Framing the proxy resolves one way: the upstream gets the request as the proxy read it.
	for _, p := range paths {
		t.Run("Content-Length and chunked together reach the upstream chunked only: "+p.name, func(t *testing.T) {
			rec := plain
			if p.host == "api.example.com" {
				rec = api
			}
			before := len(rec.requests())
			c, br := p.open(t)
			// Read by its Content-Length the body would be "0\r\n\r" and the rest a second request.
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			go io.WriteString(c, "POST "+p.target("/smuggle")+" HTTP/1.1\r\nHost: "+p.host+"\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"+
				"0\r\n\r\nGET "+p.target("/smuggled")+" HTTP/1.1\r\nHost: "+p.host+"\r\n\r\n")
			for range 2 {
				if resp, err := http.ReadResponse(br, &http.Request{Method: "GET"}); err != nil {
					t.Fatal(err)
				} else {
					io.Copy(io.Discard, resp.Body)
				}
			}
			seen := rec.requests()[before:]
			if len(seen) != 2 || seen[0].Header.Get("Content-Length") != "" || len(seen[0].TE) != 1 || seen[0].Body != "" || seen[1].Path != "/smuggled" {
				t.Fatalf("upstream got %+v, want the POST chunked with an empty body, then the GET the proxy read as a request too", seen)
			}
		})
		t.Run("an absolute-form target's host is the one sent on, whatever Host says: "+p.name, func(t *testing.T) {
			rec := plain
			if p.host == "api.example.com" {
				rec = api
			}
			before := len(rec.requests())
			c, br := p.open(t)
			status, _, body := exchangeRaw(t, c, br, "GET "+p.absolute("/abs")+" HTTP/1.1\r\nHost: denied.example.com\r\n\r\n")
			if status != 200 {
				t.Fatalf("status %d %q", status, body)
			}
			if seen := rec.requests()[before:]; len(seen) != 1 || seen[0].Host != p.host {
				t.Fatalf("upstream got %+v, want one request with Host %s", seen, p.host)
			}
		})
	}
	t.Run("an absolute-form target no rule names is refused, whatever Host says", func(t *testing.T) {
		for _, p := range paths[:2] {
			c, br := p.open(t)
			if status, _, body := exchangeRaw(t, c, br, "GET http://denied.example.com/ HTTP/1.1\r\nHost: plain.example.com\r\n\r\n"); status != 403 {
				t.Errorf("%s: status %d %q", p.name, status, body)
			}
		}
	})
}
