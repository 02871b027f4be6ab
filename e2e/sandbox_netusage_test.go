package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/records/eventlog"
	"github.com/hangar-dev/hangar/sandboxhosts/egressproxy"
)

// networkUsage reads the session's network-usage route with key, and answers the status and
// the body.
func (s *sandboxStack) networkUsage(t *testing.T, session, key string) (int, httpapi.NetworkUsage) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.url+strings.Replace(httpapi.NetworkUsagePath, "{id}", url.PathEscape(session), 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(httpapi.APIKeyHeader, key)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var u httpapi.NetworkUsage
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &u); err != nil {
			t.Fatalf("network usage %s: %v", b, err)
		}
	}
	return resp.StatusCode, u
}

// connectionTotals adds up the session's net.connection events, as its usage must.
func (s *sandboxStack) connectionTotals(t *testing.T, session string) httpapi.NetworkTotals {
	t.Helper()
	var sum httpapi.NetworkTotals
	for _, e := range s.listEvents(t, session, "net.connection") {
		var c egressproxy.Connection
		if err := json.Unmarshal([]byte(e.GetPayloadJson()), &c); err != nil {
			t.Fatal(err)
		}
		sum = sum.Plus(httpapi.NetworkTotals{BytesOut: c.BytesOut, BytesIn: c.BytesIn})
		if c.Decision == egressproxy.Denied {
			sum.ConnectionsDenied++
		} else {
			sum.ConnectionsAllowed++
		}
	}
	return sum
}

// waitUsage waits until the session's usage reports allowed and denied connections, and holds
// exactly what its net.connection events add up to.
func (s *sandboxStack) waitUsage(t *testing.T, session string, allowed, denied int64) httpapi.NetworkUsage {
	t.Helper()
	var u httpapi.NetworkUsage
	testkit.Eventually(t, 20*time.Second, fmt.Sprintf("%d allowed and %d denied connections reported", allowed, denied), func() (bool, string) {
		status, got := s.networkUsage(t, session, s.admin)
		u = got
		sum := s.connectionTotals(t, session)
		return status == http.StatusOK && got.ConnectionsAllowed == allowed && got.ConnectionsDenied == denied && got.NetworkTotals == sum,
			fmt.Sprintf("status %d, usage %+v, the events add up to %+v", status, got, sum)
	})
	return u
}

func TestNetworkUsageCountsRealTrafficAcrossEvictionAndAHostCrash(t *testing.T) {
	s, router, _ := networkStack(t)
	s.hosts = append(s.hosts, s.sb.StartHost(t, "host-b"))
	ctx := t.Context()
	id := s.create(t, &appv1.CreateSessionRequest{Harness: ptr("claude-code"), ModelRouter: ptr("lab")})

	if status, u := s.networkUsage(t, id, s.admin); status != http.StatusOK || u.NetworkTotals != (httpapi.NetworkTotals{}) || u.AsOf != "" || u.SessionID != id {
		t.Fatalf("a session without traffic: %d %+v, want zeros", status, u)
	}
	// One allowed request to the router (a body comes back) and one refused, per round.
	traffic := func() {
		t.Helper()
		out := s.sh(t, id, `wget -q -O- https://llm.example.com/v1/messages; wget -q -O- http://plain.example.com/ 2>&1; true`)
		if !strings.Contains(out, "reached llm.example.com") || !strings.Contains(out, "403") {
			t.Fatalf("traffic: %q", out)
		}
	}

	traffic()
	first := s.waitUsage(t, id, 1, 1)
	if first.BytesIn < int64(len("reached llm.example.com\n")) || first.BytesOut == 0 || first.EventIdx == 0 || first.AsOf == "" {
		t.Fatalf("after one round: %+v, want the body's bytes in, the request's out, and the event it comes from", first)
	}
	ev := s.listEvents(t, id, eventlog.KindNetUsage)
	if len(ev) == 0 || ev[len(ev)-1].GetIdx() != first.EventIdx {
		t.Fatalf("the route's event %d is not the log's last net.usage event (%d of them)", first.EventIdx, len(ev))
	}

	t.Run("an eviction and a resume count on", func(t *testing.T) {
		if _, err := s.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
		if _, err := s.svc.EvictLocal(ctx, connect.NewRequest(&appv1.EvictLocalRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
		if status, u := s.networkUsage(t, id, s.admin); status != http.StatusOK || u.NetworkTotals != first.NetworkTotals {
			t.Fatalf("an evicted session's usage: %d %+v, want %+v", status, u, first.NetworkTotals)
		}
		if _, err := s.svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
		traffic()
		s.waitUsage(t, id, 2, 2)
	})
	t.Run("a host that crashes keeps what it reported, and the next host counts on", func(t *testing.T) {
		s.killHostOf(t, id)
		if _, err := s.svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
		traffic()
		s.waitUsage(t, id, 3, 3)
	})
	if n := len(router.got()); n != 3 {
		t.Fatalf("the router was reached %d times, want 3", n)
	}

	t.Run("strangers are refused", func(t *testing.T) {
		bob := s.mintKey(t, "bob@example.com", false)
		for key, want := range map[string]int{"": http.StatusUnauthorized, "hk_not-a-key": http.StatusUnauthorized, bob: http.StatusNotFound} {
			if status, _ := s.networkUsage(t, id, key); status != want {
				t.Errorf("key %q: status %d, want %d", key, status, want)
			}
		}
	})
}
