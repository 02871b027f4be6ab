package egressproxy

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/sandboxhosts/sandboxnet"
)

// echoHost is api.example.com as an attacker would use it: every endpoint hands back what the
// request carried, as an error page, a redirect or an echo API does.
func echoHost() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/header", func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get(r.URL.Query().Get("name"))
		w.Header().Set("X-Echo", v)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "bad credential %q", v)
	})
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) { _ = r.Header.Write(w) })
	mux.HandleFunc("/query", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.URL.RawQuery) })
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://api.example.com/next?"+r.URL.RawQuery, http.StatusFound)
	})
	// /stream sends the header a byte a flush, so that the value is cut across reads.
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get("Authorization")
		for i := range len(v) {
			io.WriteString(w, v[i:i+1])
			w.(http.Flusher).Flush()
		}
	})
	// /stored answers the value without being sent it: an earlier request's, kept.
	mux.HandleFunc("/stored", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "last key: "+realKey) })
	mux.HandleFunc("/gzip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		io.WriteString(zw, r.Header.Get("Authorization"))
		zw.Close()
	})
	return mux
}

// echoFixture serves the session with api.example.com echoing, the anthropic-key secret
// (API-key slots) and spaced (query parameter key, a value that must be escaped).
func echoFixture(t *testing.T) *fixture {
	f := newFixture(t, Rules{AllowHosts: []string{"api.example.com"}},
		Secret{Name: "spaced", Placeholder: spacedPlaceholder, Value: spacedValue, AllowHosts: []string{"api.example.com"}, Slots: []Slot{{Query: "key"}}})
	f.api.Config.Handler = echoHost()
	return f
}

const spacedValue = "a b\r\nX-Injected: 1"

// leaks are the forms a value could reach the sandbox in.
var leaks = []string{realKey, spacedValue, "a+b%0D%0AX-Injected%3A+1", base64.StdEncoding.EncodeToString([]byte("x-access-token:" + realKey))}

// entry is a way into the proxy: do sends r as a sandbox's client would and returns the whole
// answer as it read it.
type entry struct {
	name string
	do   func(t *testing.T, f *fixture, r *http.Request) string
}

var entries = []entry{
	// Captured TLS to the host, intercepted: the forwarder.
	{"transparent", func(t *testing.T, f *fixture, r *http.Request) string {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(f.sb.p.opts.CA.CertPEM())
		tr := &http.Transport{
			TLSClientConfig:    &tls.Config{RootCAs: roots, ServerName: r.URL.Hostname()},
			DisableCompression: true,
			DialContext: func(context.Context, string, string) (net.Conn, error) {
				return dialIn(f.ns.Path, "93.184.216.34:"+cmpPort(r))
			},
		}
		defer tr.CloseIdleConnections()
		resp, err := tr.RoundTrip(r)
		if err != nil {
			t.Fatal(err)
		}
		return dump(t, resp)
	}},
	// An absolute URL sent to HTTP(S)_PROXY, as busybox wget sends https ones: the proxy
	// itself speaks TLS upstream (serveRequest's ReverseProxy).
	{"explicit proxy", func(t *testing.T, f *fixture, r *http.Request) string {
		c, err := dialIn(f.ns.Path, strings.TrimPrefix(sandboxnet.ProxyURL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if err := r.WriteProxy(c); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), r)
		if err != nil {
			t.Fatal(err)
		}
		return dump(t, resp)
	}},
}

func cmpPort(r *http.Request) string {
	if r.URL.Scheme == "http" {
		return "80"
	}
	return "443"
}

func dump(t *testing.T, resp *http.Response) string {
	b, err := httputil.DumpResponse(resp, true)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The attack of issue 23: a sandbox sends a secret's placeholder to the secret's own host at an
// endpoint that reflects it, and reads the real value in the answer.
func TestSecurityAnEchoingHostNeverHandsASecretBack(t *testing.T) {
	f := echoFixture(t)
	for _, tc := range []struct {
		name, url string
		header    http.Header
		// want is in the answer: the placeholder where the value was echoed, or a refusal.
		want string
	}{
		{"a header reflected in an error page and an answer header", "https://api.example.com/header?name=Authorization",
			http.Header{"Authorization": {"Bearer " + placeholder}}, "X-Echo: Bearer " + placeholder},
		{"every header echoed", "https://api.example.com/headers", http.Header{"X-Api-Key": {placeholder}}, "X-Api-Key: " + placeholder},
		{"basic credentials echoed", "https://api.example.com/headers",
			http.Header{"Authorization": {basic("x-access-token", placeholder)}}, basic("x-access-token", placeholder)},
		{"the query reflected", "https://api.example.com/query?key=" + spacedPlaceholder, nil, "key=" + spacedPlaceholder},
		{"a redirect that keeps the query", "https://api.example.com/redirect?key=" + spacedPlaceholder, nil,
			"Location: https://api.example.com/next?key=" + spacedPlaceholder},
		{"a value cut across reads", "https://api.example.com/stream", http.Header{"Authorization": {"Bearer " + placeholder}}, "Bearer " + placeholder},
		{"a value the host kept from an earlier request", "https://api.example.com/stored", nil, "last key: " + placeholder},
		{"a compressed answer, which cannot be checked", "https://api.example.com/gzip", http.Header{"Authorization": {"Bearer " + placeholder}}, "502 Bad Gateway"},
		{"the placeholder in an undeclared header", "https://api.example.com/header?name=X-Debug",
			http.Header{"X-Debug": {placeholder}}, "in its header X-Debug; it goes only in"},
		{"the placeholder in an undeclared query parameter", "https://api.example.com/query?q=" + placeholder, nil, "in its query"},
		{"the placeholder over plain http", "http://api.example.com/header?name=Authorization",
			http.Header{"Authorization": {"Bearer " + placeholder}}, "over plain http: secrets go only over https"},
	} {
		for _, e := range entries {
			t.Run(e.name+"/"+tc.name, func(t *testing.T) {
				r, err := http.NewRequest("GET", tc.url, nil)
				if err != nil {
					t.Fatal(err)
				}
				for k, vs := range tc.header {
					r.Header[k] = vs
				}
				got := e.do(t, f, r)
				for _, l := range leaks {
					if strings.Contains(got, l) {
						t.Fatalf("the sandbox read the secret's value %q:\n%s", l, got)
					}
				}
				if !strings.Contains(got, tc.want) {
					t.Fatalf("the answer has no %q:\n%s", tc.want, got)
				}
			})
		}
	}
	testkit.Eventually(t, 10*time.Second, "audit events naming the scrubbed secrets", func() (bool, string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		modes := map[string]bool{}
		for _, c := range f.events {
			if slices.Contains(c.Scrubbed, "anthropic-key") {
				modes[c.Mode] = true
			}
		}
		return modes["proxy"] && modes["intercepted"], fmt.Sprintf("scrubbed in modes %v; events %+v", modes, f.events)
	})
}

// A refused upstream never reads as an allowed connection with secrets injected.
func TestSecurityARefusedDialIsNotAuditedAsAnInjection(t *testing.T) {
	// A metadata server's name, which the guarded dialer refuses before any lookup, whatever
	// the rules and the secret say.
	const host = "metadata.google.internal"
	f := newFixture(t, Rules{AllowHosts: []string{host}}, Secret{
		Name: "unreached", Placeholder: githubPlaceholder, Value: "v", AllowHosts: []string{host}, Slots: []Slot{BearerSlot},
	})
	for _, e := range entries {
		r, _ := http.NewRequest("GET", "https://"+host+"/", nil)
		r.Header.Set("Authorization", "Bearer "+githubPlaceholder)
		_ = e.do(t, f, r)
	}
	testkit.Eventually(t, 10*time.Second, "both requests audited as refused", func() (bool, string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		modes := map[string]bool{}
		for _, c := range f.events {
			if c.Host != host {
				continue
			}
			if len(c.Injected) > 0 || c.Decision == Allowed {
				return false, fmt.Sprintf("a refused request audited as allowed or injected: %+v", c)
			}
			if strings.HasPrefix(c.Rule, "guarded dialer") {
				modes[c.Mode] = true
			}
		}
		return modes["proxy"] && modes["intercepted"], fmt.Sprintf("events %+v", f.events)
	})
}
