package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/hangar-dev/hangar/platform/egress"
)

func TestSpecialAddressesAreRefusedByDefault(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		refused bool
	}{
		{"127.0.0.1", true},
		{"127.8.9.10", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true},
		{"10.1.2.3", true},
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"192.168.1.1", true},
		{"fc00::1", true},
		{"fd00:ec2::254", true},
		{"169.254.169.254", true},
		{"::ffff:169.254.169.254", true},
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"fd00::1%2", true},
		{"100.64.0.1", true},
		{"100.127.255.255", true},
		{"0.0.0.0", true},
		{"::", true},
		{"224.0.0.1", true},
		{"ff02::1", true},
		{"255.255.255.255", true},
		{"::127.0.0.1", true},        // IPv4-compatible
		{"64:ff9b::a9fe:a9fe", true}, // NAT64 of 169.254.169.254
		{"2002:a00:1::1", true},      // 6to4 of 10.0.0.1
		{"8.8.8.8", false},
		{"172.32.0.1", false},
		{"100.128.0.1", false},
		{"2606:4700:4700::1111", false},
		{"64:ff9b::808:808", false}, // NAT64 of 8.8.8.8
		{"::ffff:8.8.8.8", false},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			a := netip.MustParseAddr(tc.addr)
			err := egress.Policy{}.CheckAddr("example.com", netip.AddrPortFrom(a, 443))
			if got := err != nil; got != tc.refused {
				t.Fatalf("CheckAddr(%s) = %v, want refused=%v", tc.addr, err, tc.refused)
			}
			if err != nil && !errors.Is(err, egress.ErrRefused) {
				t.Fatalf("error %v does not match ErrRefused", err)
			}
		})
	}
}

func TestAllowEntriesOpenOnlyWhatTheyName(t *testing.T) {
	for _, tc := range []struct {
		name    string
		allow   []string
		host    string
		addr    string
		refused bool
	}{
		{"no entry refuses loopback", nil, "localhost", "127.0.0.1", true},
		{"a prefix opens its addresses", []string{"127.0.0.0/8"}, "anything", "127.0.0.7", false},
		{"a prefix opens nothing else", []string{"127.0.0.0/8"}, "anything", "10.0.0.1", true},
		{"an address entry opens that address", []string{"10.0.0.5"}, "x", "10.0.0.5", false},
		{"an address entry opens its mapped form", []string{"10.0.0.5"}, "x", "::ffff:10.0.0.5", false},
		{"an address entry opens no neighbour", []string{"10.0.0.5"}, "x", "10.0.0.6", true},
		{"a name opens what it resolves to", []string{"registry.internal"}, "registry.internal", "10.0.0.9", false},
		{"a name opens nothing for another name", []string{"registry.internal"}, "evil.example", "10.0.0.9", true},
		{"a suffix opens its subdomains", []string{"*.corp.example"}, "git.corp.example", "192.168.0.2", false},
		{"a suffix does not open its own apex", []string{"*.corp.example"}, "corp.example", "192.168.0.2", true},
		{"a name never opens link-local", []string{"registry.internal"}, "registry.internal", "169.254.169.254", true},
		{"a prefix may open link-local on purpose", []string{"169.254.0.0/16"}, "x", "169.254.169.254", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := egress.Parse(tc.allow)
			if err != nil {
				t.Fatal(err)
			}
			err = p.CheckAddr(tc.host, netip.AddrPortFrom(netip.MustParseAddr(tc.addr), 443))
			if got := err != nil; got != tc.refused {
				t.Fatalf("CheckAddr(%s, %s) = %v, want refused=%v", tc.host, tc.addr, err, tc.refused)
			}
		})
	}
}

func TestMetadataNamesAreRefusedBeforeAnyLookup(t *testing.T) {
	for _, host := range []string{"metadata.google.internal", "METADATA.google.internal.", "metadata", "169.254.169.254", "[fe80::1]"} {
		if err := (egress.Policy{}).CheckHost(host, 80); !errors.Is(err, egress.ErrRefused) {
			t.Errorf("CheckHost(%q) = %v, want refused", host, err)
		}
		if !egress.IsMetadataHost(host) {
			t.Errorf("IsMetadataHost(%q) = false", host)
		}
	}
	if err := (egress.Policy{}).CheckHost("api.example.com", 443); err != nil {
		t.Errorf("CheckHost(api.example.com) = %v", err)
	}
}

func TestParseRefusesMalformedEntries(t *testing.T) {
	for _, e := range []string{"10.0.0.0/33", "user@host", "host:0", "host:99999", "[10.0.0.1]:80", "fe80::1%eth0", "*.", "not a host"} {
		if _, err := egress.Parse([]string{e}); err == nil {
			t.Errorf("Parse(%q) accepted it", e)
		}
	}
	p, err := egress.Parse([]string{" ", "", "Registry.Internal", "10.0.0.0/8", "::1"})
	if err != nil || p.Empty() {
		t.Fatalf("Parse = %v, %v", p, err)
	}
}

// counted is a loopback server that counts the requests reaching it and remembers the last
// request's headers.
type counted struct {
	*httptest.Server
	hits    atomic.Int32
	headers atomic.Pointer[http.Header]
}

func newCounted(t *testing.T, h http.HandlerFunc) *counted {
	c := &counted{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		hd := r.Header.Clone()
		c.headers.Store(&hd)
		h(w, r)
	}))
	t.Cleanup(c.Close)
	return c
}

func port(t *testing.T, s *httptest.Server) string {
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

func TestDialRefusesLoopbackAfterResolutionUnlessAllowed(t *testing.T) {
	srv := newCounted(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "inside") })
	p := port(t, srv.Server)
	for _, tc := range []struct {
		name    string
		policy  egress.Policy
		url     string
		refused bool
	}{
		{"a loopback literal", egress.Policy{}, "http://127.0.0.1:" + p, true},
		// localhost is a name: only the address it resolves to, checked at connect, stops it.
		{"a name resolving to loopback", egress.Policy{}, "http://localhost:" + p, true},
		{"a loopback prefix entry", egress.MustParse("127.0.0.0/8"), "http://localhost:" + p, false},
		{"a name entry, for that name", egress.MustParse("localhost"), "http://localhost:" + p, false},
		{"a name entry, for another name of the address", egress.MustParse("localhost"), "http://127.0.0.1:" + p, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.hits.Load()
			resp, err := tc.policy.Client(egress.MaxRedirects, nil).Get(tc.url)
			if tc.refused {
				if !errors.Is(err, egress.ErrRefused) {
					t.Fatalf("GET %s = %v, want refused", tc.url, err)
				}
				if strings.Contains(err.Error(), "inside") {
					t.Fatalf("error repeats the server's body: %v", err)
				}
				if srv.hits.Load() != before {
					t.Fatal("a refused request reached the server")
				}
				return
			}
			if err != nil {
				t.Fatalf("GET %s: %v", tc.url, err)
			}
			_ = resp.Body.Close()
		})
	}
}

func TestRedirectsAreRecheckedAndCrossHostHopsLoseCredentials(t *testing.T) {
	second := newCounted(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	sameHostTarget := ""
	first := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/cross":
			// Another host: localhost is not 127.0.0.1, and the port differs too.
			http.Redirect(w, r, "http://localhost:"+port(t, second.Server)+"/landed", http.StatusFound)
		case "/same":
			http.Redirect(w, r, sameHostTarget, http.StatusFound)
		case "/metadata":
			http.Redirect(w, r, "http://169.254.169.254/computeMetadata/v1/", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	sameHostTarget = first.URL + "/landed"
	policy := egress.MustParse("127.0.0.0/8")
	onlyFirst := func(u *url.URL) error {
		if u.Hostname() != "127.0.0.1" {
			return fmt.Errorf("host %s is not allowed", u.Hostname())
		}
		return nil
	}
	send := func(path string, allow func(*url.URL) error) error {
		req, _ := http.NewRequest(http.MethodGet, first.URL+path, nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		req.Header.Set("X-Api-Key", "s3cret")
		req.Header.Set("Accept", "application/json")
		resp, err := policy.Client(3, allow).Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}

	t.Run("a hop to a host the allow function refuses is not taken", func(t *testing.T) {
		if err := send("/cross", onlyFirst); err == nil || !strings.Contains(err.Error(), "not allowed") {
			t.Fatalf("err = %v, want the redirect refused", err)
		}
		if second.hits.Load() != 0 {
			t.Fatal("the refused hop reached the second server")
		}
	})
	t.Run("a hop to metadata is refused by the dialer even when allowed by the function", func(t *testing.T) {
		if err := send("/metadata", nil); !errors.Is(err, egress.ErrRefused) {
			t.Fatalf("err = %v, want refused", err)
		}
	})
	t.Run("a cross-host hop drops every credential header", func(t *testing.T) {
		if err := send("/cross", nil); err != nil {
			t.Fatal(err)
		}
		h := *second.headers.Load()
		if h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" {
			t.Fatalf("the second host got credentials: %v", h)
		}
		if h.Get("Accept") != "application/json" {
			t.Fatalf("the harmless Accept header was dropped: %v", h)
		}
	})
	t.Run("a same-host hop keeps the headers", func(t *testing.T) {
		if err := send("/same", nil); err != nil {
			t.Fatal(err)
		}
		if h := *first.headers.Load(); h.Get("X-Api-Key") != "s3cret" {
			t.Fatalf("same-host hop lost its headers: %v", h)
		}
	})
	t.Run("hops beyond the limit are refused", func(t *testing.T) {
		if err := send("/loop", nil); err == nil || !strings.Contains(err.Error(), "more than 3 redirects") {
			t.Fatalf("err = %v, want the hop limit", err)
		}
	})
}

func TestRedirectFromHTTPSToHTTPIsRefused(t *testing.T) {
	plain := newCounted(t, func(w http.ResponseWriter, r *http.Request) {})
	tls := httptest.NewTLSServer(http.RedirectHandler(plain.URL, http.StatusFound))
	t.Cleanup(tls.Close)
	c := egress.MustParse("127.0.0.0/8").Client(egress.MaxRedirects, nil)
	c.Transport.(*http.Transport).TLSClientConfig = tls.Client().Transport.(*http.Transport).TLSClientConfig
	if _, err := c.Get(tls.URL); err == nil || !strings.Contains(err.Error(), "leaves https") {
		t.Fatalf("err = %v, want the downgrade refused", err)
	}
	if plain.hits.Load() != 0 {
		t.Fatal("the downgraded hop was sent")
	}
}

func TestRegistryErrorsNeverRepeatRemoteText(t *testing.T) {
	body := `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"PRIVATE-BODY"},{"code":"<script>PRIVATE</script>","message":"x"}]}`
	resp := &http.Response{
		StatusCode: http.StatusNotFound, Body: io.NopCloser(strings.NewReader(body)),
		Request: &http.Request{Method: http.MethodGet, URL: &url.URL{Scheme: "https", Host: "r.example", Path: "/v2/x/manifests/latest"}},
	}
	plain := &http.Response{
		StatusCode: http.StatusInternalServerError, Body: io.NopCloser(strings.NewReader("PRIVATE-BODY")),
		Request: resp.Request,
	}
	refused := &egress.RefusedError{Host: "localhost", Addr: netip.MustParseAddr("127.0.0.1"), Reason: "a loopback address"}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"registry diagnostics", transport.CheckError(resp, http.StatusOK), "the registry answered 404 Not Found (MANIFEST_UNKNOWN)"},
		{"a raw body", transport.CheckError(plain, http.StatusOK), "the registry answered 500 Internal Server Error"},
		{"a token server's answer", errors.New("no token in bearer response:\nPRIVATE-BODY"), "the registry's answer is not an image or artifact Hangar can use"},
		{"a refused destination", fmt.Errorf("GET: %w", &net.OpError{Op: "dial", Err: refused}), refused.Error()},
		{"a deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), "the registry did not answer in time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := egress.RegistryError(tc.err)
			if got.Error() != tc.want {
				t.Fatalf("RegistryError = %q, want %q", got, tc.want)
			}
			if strings.Contains(got.Error(), "PRIVATE") {
				t.Fatalf("remote text leaked: %q", got)
			}
		})
	}
}
