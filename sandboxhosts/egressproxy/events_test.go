package egressproxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// Each request the proxy reads is audited once, with its verdict: a refused one is one denial
// (never a denial and an allowed connection beside it), counted once in the sandbox's usage,
// on every path that reads requests; a captured connection's requests for different hosts are
// each their own event, so a refusal cannot hide behind an allowed request on the same
// connection.
func TestEachRequestIsOneEventWithItsVerdict(t *testing.T) {
	f := newFixture(t, Rules{AllowHosts: []string{"plain.example.com:80", "api.example.com"}},
		Secret{Name: "github-token", Placeholder: githubPlaceholder, Value: "ghp-real", AllowHosts: []string{"github.example.com"}, Slots: APIKeySlots})
	get := func(host string, auth string) string {
		return "GET /x HTTP/1.1\r\nHost: " + host + "\r\n" + auth + "\r\n"
	}
	type want struct {
		host, decision, refused string
	}
	for _, tc := range []struct {
		name string
		// addr is where the sandbox connects; tls says the connection is intercepted TLS.
		addr     string
		tls      bool
		requests []string
		statuses []int
		events   []want
	}{
		{"captured plain http carrying a placeholder where its secret may not go", capturedAddr + ":80", false,
			[]string{get("plain.example.com", bearer(placeholder))}, []int{403},
			[]want{{"plain.example.com", Denied, "anthropic-key"}}},
		{"captured plain http to a host no rule names", capturedAddr + ":80", false,
			[]string{get("denied.example.com", "")}, []int{403},
			[]want{{"denied.example.com", Denied, ""}}},
		{"captured plain http: a refused request, then an allowed one on the same connection", capturedAddr + ":80", false,
			[]string{get("denied.example.com", ""), get("plain.example.com", "")}, []int{403, 200},
			[]want{{"denied.example.com", Denied, ""}, {"plain.example.com", Allowed, ""}}},
		{"captured plain http: an allowed request, then a refused one on the same connection", capturedAddr + ":80", false,
			[]string{get("plain.example.com", ""), get("denied.example.com", "")}, []int{200, 403},
			[]want{{"plain.example.com", Allowed, ""}, {"denied.example.com", Denied, ""}}},
		{"explicit proxy request carrying a placeholder where its secret may not go", "127.0.0.1:3128", false,
			[]string{"GET http://plain.example.com/x HTTP/1.1\r\nHost: plain.example.com\r\n" + bearer(placeholder) + "\r\n"}, []int{403},
			[]want{{"plain.example.com", Denied, "anthropic-key"}}},
		{"intercepted request carrying another secret's placeholder", capturedAddr + ":443", true,
			[]string{get("api.example.com", bearer(githubPlaceholder))}, []int{403},
			[]want{{"api.example.com", Denied, "github-token"}}},
		{"intercepted: a refused request, then an allowed one on the same connection", capturedAddr + ":443", true,
			[]string{get("api.example.com", bearer(githubPlaceholder)), get("api.example.com", bearer(placeholder))}, []int{403, 200},
			[]want{{"api.example.com", Denied, "github-token"}, {"api.example.com", Allowed, ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, before := f.eventCount(), f.sb.Counters.Usage()
			var c net.Conn
			c, _ = f.dialSandbox(t, tc.addr)
			if tc.tls {
				roots := x509.NewCertPool()
				roots.AppendCertsFromPEM(f.sb.p.opts.CA.CertPEM())
				c = tls.Client(c, &tls.Config{ServerName: "api.example.com", RootCAs: roots})
			}
			br := bufio.NewReader(c)
			for i, raw := range tc.requests {
				if status, _, body := exchangeRaw(t, c, br, raw); status != tc.statuses[i] {
					t.Fatalf("request %d: status %d %q, want %d", i, status, body, tc.statuses[i])
				}
			}
			c.Close()
			// Every event of a connection is sent before the proxy lets go of it.
			testkit.Eventually(t, 10*time.Second, "the connection let go", func() (bool, string) {
				return f.sb.held() == 0, fmt.Sprintf("%d held", f.sb.held())
			})
			f.mu.Lock()
			evs := slices.Clone(f.events[n:])
			f.mu.Unlock()
			var got []want
			var usage httpapi.NetworkTotals
			for _, e := range evs {
				got = append(got, want{e.Host, e.Decision, e.Refused})
				usage = usage.Plus(httpapi.NetworkTotals{BytesOut: e.BytesOut, BytesIn: e.BytesIn})
				if e.Decision == Denied {
					usage.ConnectionsDenied++
				} else {
					usage.ConnectionsAllowed++
				}
			}
			// The intercepted connection's allowed requests are one event, sent as it ends:
			// after the refusals, which are sent as they happen.
			if !slices.Equal(got, tc.events) {
				t.Fatalf("events %+v, want %+v", evs, tc.events)
			}
			after := f.sb.Counters.Usage()
			delta := httpapi.NetworkTotals{BytesOut: after.BytesOut - before.BytesOut, BytesIn: after.BytesIn - before.BytesIn,
				ConnectionsAllowed: after.ConnectionsAllowed - before.ConnectionsAllowed, ConnectionsDenied: after.ConnectionsDenied - before.ConnectionsDenied}
			if delta != usage {
				t.Fatalf("counters moved by %+v, want the events' %+v", delta, usage)
			}
			if usage.BytesOut < int64(len(tc.requests[0])) || usage.BytesIn == 0 {
				t.Fatalf("events carry %+v, want the exchanges' bytes", usage)
			}
		})
	}
}
