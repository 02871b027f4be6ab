package egress_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/hangar-dev/hangar/platform/egress"
)

// serveOn is a loopback server on ip (an address of 127.0.0.0/8) that counts its requests.
func serveOn(t *testing.T, ip string, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h(w, r)
	}))
	_ = s.Listener.Close()
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	return s, &hits
}

// TestSecurityTheHostsOwnAddressIsRefusedWhatTheDefaultAllows replays a request to a service
// listening on 0.0.0.0 through the host's own address (192.0.2.2 on this machine, which looks
// public). 127.0.0.2 stands in for it: the host's interface list is injected to hold it, and
// the policy opens all of 127.0.0.0/8 as the default opens the public internet. Only an entry
// for that single address opens it.
func TestSecurityTheHostsOwnAddressIsRefusedWhatTheDefaultAllows(t *testing.T) {
	t.Parallel()
	srv, hits := serveOn(t, "127.0.0.2", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "host service") })
	own := netip.MustParseAddr("127.0.0.2")
	for _, tc := range []struct {
		name    string
		policy  egress.Policy
		refused bool
	}{
		{"the default (all of loopback standing in for the public internet)", egress.MustParse("127.0.0.0/8"), true},
		{"a prefix entry covering it", egress.MustParse("127.0.0.0/24", "127.0.0.2/31"), true},
		{"a name entry", egress.MustParse("127.0.0.0/8", "localhost", "*.example"), true},
		{"an entry for that address on another port", egress.MustParse("127.0.0.0/8", "127.0.0.2:1"), true},
		{"an entry for that single address", egress.MustParse("127.0.0.2"), false},
		{"a /32 entry for that address", egress.MustParse("127.0.0.2/32"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := hits.Load()
			resp, err := egress.WithHostAddrs(tc.policy, own).Client(egress.MaxRedirects, nil).Get(srv.URL)
			if !tc.refused {
				if err != nil {
					t.Fatalf("GET %s: %v", srv.URL, err)
				}
				_ = resp.Body.Close()
				return
			}
			var refused *egress.RefusedError
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), "127.0.0.2 is an address of this host's own network interfaces") {
				t.Fatalf("GET %s = %v, want refused by name", srv.URL, err)
			}
			if hits.Load() != before {
				t.Fatal("the refused request reached the host's service")
			}
		})
	}
	t.Run("the decision on the real host address, without dialing it", func(t *testing.T) {
		host := netip.MustParseAddr("192.0.2.2")
		at := netip.AddrPortFrom(host, 8080)
		if err := egress.WithHostAddrs(egress.MustParse("192.0.2.0/24"), host).CheckAddr("x", at); !errors.Is(err, egress.ErrRefused) ||
			!strings.Contains(err.Error(), "own network interfaces") {
			t.Fatalf("a /24 entry opened the host's own address: %v", err)
		}
		if err := egress.WithHostAddrs(egress.Policy{}, host).CheckAddr("x", at); !errors.Is(err, egress.ErrRefused) {
			t.Fatalf("the default opened the host's own address: %v", err)
		}
		if err := egress.WithHostAddrs(egress.MustParse("192.0.2.2:8080"), host).CheckAddr("x", at); err != nil {
			t.Fatalf("an entry for the address and port: %v", err)
		}
	})
}

// TestSecurityPortEntriesOpenOnlyTheirPort: an entry with a port opens that port, not the
// address's other ports (where, under `hangar dev`, the emulators listen).
func TestSecurityPortEntriesOpenOnlyTheirPort(t *testing.T) {
	t.Parallel()
	registry, _ := serveOn(t, "127.0.0.1", func(w http.ResponseWriter, r *http.Request) {})
	emulator, emulatorHits := serveOn(t, "127.0.0.1", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "document") })
	regPort, emuPort := port(t, registry), port(t, emulator)
	for _, tc := range []struct {
		name    string
		allow   string
		url     string
		refused bool
	}{
		{"an address with its port", "127.0.0.1:" + regPort, "http://127.0.0.1:" + regPort, false},
		{"an address with another port", "127.0.0.1:" + regPort, "http://127.0.0.1:" + emuPort, true},
		{"a name with its port", "localhost:" + regPort, "http://localhost:" + regPort, false},
		{"a name with another port", "localhost:" + regPort, "http://localhost:" + emuPort, true},
		{"an address without a port opens every port", "127.0.0.1", "http://127.0.0.1:" + emuPort, false},
		{"a prefix opens every port", "127.0.0.0/8", "http://127.0.0.1:" + emuPort, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := emulatorHits.Load()
			resp, err := egress.MustParse(tc.allow).Client(egress.MaxRedirects, nil).Get(tc.url)
			if !tc.refused {
				if err != nil {
					t.Fatalf("GET %s: %v", tc.url, err)
				}
				_ = resp.Body.Close()
				return
			}
			if !errors.Is(err, egress.ErrRefused) || !strings.Contains(err.Error(), "127.0.0.1") {
				t.Fatalf("GET %s = %v, want refused naming the address", tc.url, err)
			}
			if emulatorHits.Load() != before {
				t.Fatal("the refused request reached the other port")
			}
		})
	}
	for _, e := range []string{"[::1]:5000", "::1", "registry.internal:443", "*.corp.example:5000"} {
		if _, err := egress.Parse([]string{e}); err != nil {
			t.Errorf("Parse(%q): %v", e, err)
		}
	}
}

// TestSecurityRegistryRedirectsStayOnTheOpenedHostAndPort: a registry opened by an entry that
// covers every port of its address redirects a pull to another port of it (an emulator): the hop
// goes through the public-only dialer and is refused, while a hop on the registry's own
// host:port is followed.
func TestSecurityRegistryRedirectsStayOnTheOpenedHostAndPort(t *testing.T) {
	t.Parallel()
	emulator, emulatorHits := serveOn(t, "127.0.0.1", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "{}") })
	var self string
	registry, _ := serveOn(t, "127.0.0.1", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v2/":
		case "/v2/x/manifests/away":
			http.Redirect(w, r, emulator.URL+"/v1/projects/p/databases/(default)/documents/users/alice", http.StatusTemporaryRedirect)
		case "/v2/x/manifests/here":
			http.Redirect(w, r, self+"/v2/x/manifests/landed", http.StatusTemporaryRedirect)
		default:
			http.NotFound(w, r)
		}
	})
	self = registry.URL
	policy := egress.MustParse("127.0.0.1")
	client := &http.Client{Transport: policy.RegistryTransport()}

	_, err := client.Get(registry.URL + "/v2/x/manifests/away")
	if !errors.Is(err, egress.ErrRefused) || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("redirect to another port = %v, want refused by name", err)
	}
	resp, err := client.Get(registry.URL + "/v2/x/manifests/here")
	if err != nil {
		t.Fatalf("redirect on the registry's host:port: %v", err)
	}
	_ = resp.Body.Close()

	// The same through go-containerregistry, as a pull or a plugin fetch makes it.
	ref, err := name.ParseReference(strings.TrimPrefix(registry.URL, "http://") + "/x:away")
	if err != nil {
		t.Fatal(err)
	}
	_, err = remote.Get(ref, append(policy.Registry(), remote.WithContext(context.Background()))...)
	if err = egress.RegistryError(err); !errors.Is(err, egress.ErrRefused) {
		t.Fatalf("pull redirected to another port = %v, want refused", err)
	}
	if emulatorHits.Load() != 0 {
		t.Fatal("a redirected request reached the other port")
	}
}

// TestSecurityRegistryErrorsNeverQuoteA2xxBody: a registry answering 200 with a body that is not
// a manifest fails the pull in Hangar's words; no byte of the body (not even the one character a
// JSON decoder names) appears.
func TestSecurityRegistryErrorsNeverQuoteA2xxBody(t *testing.T) {
	t.Parallel()
	const body = "INTERNAL document: Zebra"
	registry, _ := serveOn(t, "127.0.0.1", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		_, _ = io.WriteString(w, body)
	})
	ref, err := name.ParseReference(strings.TrimPrefix(registry.URL, "http://") + "/x:latest")
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref, append(egress.MustParse("127.0.0.1").Registry(), remote.WithContext(context.Background()))...)
	if err == nil {
		_, err = img.Manifest()
	}
	if err == nil {
		t.Fatal("a non-JSON manifest was accepted")
	}
	got := egress.RegistryError(err).Error()
	if got != "the registry's answer is not valid JSON" {
		t.Fatalf("RegistryError = %q", got)
	}
	for _, leak := range []string{"INTERNAL", "'I'", "Zebra", "document"} {
		if strings.Contains(got, leak) {
			t.Fatalf("RegistryError %q repeats the body (%q)", got, leak)
		}
	}
}
