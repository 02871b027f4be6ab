package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/coder/websocket"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/records/eventlog"
)

// attackShellURL is the shell route running argv `touch /tmp/<marker>`, as a page of another
// site would link to it.
func (o *originStack) attackShellURL(session, marker string, wake bool) string {
	q := url.Values{"argv": {"sh", "-c", "touch /tmp/" + marker}}
	if wake {
		q.Set("wake", "1")
	}
	return o.shellURL(session, q)
}

// dialShellByCookie opens the shell WebSocket signed in by the dashboard's cookie, from a page of
// origin ("" sends none); a refusal comes back with its HTTP status.
func (o *originStack) dialShellByCookie(t *testing.T, rawURL, origin string) (*wsShell, int) {
	t.Helper()
	h := http.Header{"Cookie": {auth.SessionCookie + "=" + o.dashboardCookie}}
	if origin != "" {
		h.Set("Origin", origin)
	}
	sh, status, _ := dialShell(t.Context(), strings.Replace(rawURL, "http://", "ws://", 1), "", h)
	if sh != nil {
		t.Cleanup(func() { _ = sh.conn.CloseNow() })
	}
	return sh, status
}

// noMarkers fails unless none of the markers exists in the session's /tmp (checked by an exec
// under the API key: the attack's command would have created them).
func (o *originStack) noMarkers(t *testing.T, session string, markers ...string) {
	t.Helper()
	for _, m := range markers {
		if got := o.sh(t, session, "test -e /tmp/"+m+" && echo present || echo absent"); got != "absent\n" {
			t.Errorf("/tmp/%s is %q: the attack's command ran", m, got)
		}
	}
}

// TestSecurityCrossSiteRequestsCannotRunShellCommands replays the cross-site shell attack: a
// signed-in browser sent by another site to GET /shell?argv=... (a navigation: the cookie goes
// along, no Origin, no upgrade), or a page of another origin opening the WebSocket with the
// cookie. Nothing may start, nor wake an evicted session; the dashboard's own WebSocket still
// opens a shell, and wakes one.
func TestSecurityCrossSiteRequestsCannotRunShellCommands(t *testing.T) {
	o := newOriginStack(t)
	id := o.create(t, nil)
	cookie := auth.SessionCookie + "=" + o.dashboardCookie
	otherOrigin := "http://127.0.0.1:1" // the same site as the API: the browser sends the cookie
	var markers []string

	t.Run("a cookie-signed GET that is not an upgrade is 426 and starts nothing", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			headers map[string]string
		}{
			{"a top-level navigation from another site (no Origin)", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}},
			{"a navigation with no fetch metadata at all", nil},
			{"a fetch from another origin", map[string]string{"Origin": otherOrigin, "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors"}},
			{"a fetch from Hangar's own page with the CSRF header", map[string]string{"Origin": o.url, auth.CSRFHeader: "1"}},
			{"half an upgrade: no Sec-WebSocket-Key", map[string]string{"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				marker := fmt.Sprintf("nav-%d", len(markers))
				markers = append(markers, marker)
				h := map[string]string{"Cookie": cookie}
				for k, v := range tc.headers {
					h[k] = v
				}
				p := o.get(t, http.MethodGet, o.attackShellURL(id, marker, false), h)
				if p.status != http.StatusUpgradeRequired || !strings.Contains(p.body, `"failed_precondition"`) {
					t.Fatalf("%d %q, want 426 failed_precondition", p.status, p.body)
				}
			})
		}
	})
	t.Run("a cookie-signed WebSocket from another origin, null or none is 403 and starts nothing", func(t *testing.T) {
		for _, origin := range []string{otherOrigin, "null", "http://evil.example", ""} {
			marker := fmt.Sprintf("ws-%d", len(markers))
			markers = append(markers, marker)
			if _, status := o.dialShellByCookie(t, o.attackShellURL(id, marker, false), origin); status != http.StatusForbidden {
				t.Errorf("Origin %q: status %d, want 403 permission_denied", origin, status)
			}
		}
	})
	t.Run("the dashboard's own WebSocket opens a shell", func(t *testing.T) {
		sh, status := o.dialShellByCookie(t, o.attackShellURL(id, "own-origin", false), o.url)
		if status != http.StatusSwitchingProtocols {
			t.Fatalf("status %d, want 101", status)
		}
		if code := sh.waitClosed(t); code != websocket.StatusNormalClosure {
			t.Fatalf("closed with %v, want normal closure after the program's exit", code)
		}
		if got := o.sh(t, id, "test -e /tmp/own-origin && echo present"); got != "present\n" {
			t.Fatalf("the dashboard's shell did not run its program: %q", got)
		}
	})
	t.Run("none of the attacks ran its command or opened a shell", func(t *testing.T) {
		o.noMarkers(t, id, markers...)
		// The one shell opened is the dashboard's: each start logs shell.opened, and the
		// dashboard's is already logged (its program exited).
		testkit.Eventually(t, 20*time.Second, "the dashboard's shell.opened", func() (bool, string) {
			n := len(o.listEvents(t, id, eventlog.KindShellOpened))
			return n >= 1, ""
		})
		if n := len(o.listEvents(t, id, eventlog.KindShellOpened)); n != 1 {
			t.Errorf("%d shell.opened events, want only the dashboard's", n)
		}
	})

	t.Run("wake=1 wakes nothing for a cross-site request, and still wakes for the dashboard", func(t *testing.T) {
		if _, err := o.svc.Snapshot(t.Context(), connect.NewRequest(&appv1.SnapshotRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
		if _, err := o.svc.EvictLocal(t.Context(), connect.NewRequest(&appv1.EvictLocalRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
		o.waitStatus(t, id, "evicted", 20*time.Second)
		p := o.get(t, http.MethodGet, o.attackShellURL(id, "wake-nav", true), map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"})
		if p.status != http.StatusUpgradeRequired {
			t.Errorf("navigation with wake: %d %q, want 426", p.status, p.body)
		}
		if _, status := o.dialShellByCookie(t, o.attackShellURL(id, "wake-ws", true), otherOrigin); status != http.StatusForbidden {
			t.Errorf("cross-origin WebSocket with wake: %d, want 403", status)
		}
		if got := o.status(t, id); got != "evicted" {
			t.Fatalf("after the attacks the session is %s, want still evicted", got)
		}
		sh, status := o.dialShellByCookie(t, o.attackShellURL(id, "woken", true), o.url)
		if status != http.StatusSwitchingProtocols {
			t.Fatalf("the dashboard's WebSocket with wake: %d, want 101", status)
		}
		sh.waitClosed(t)
		if got := o.status(t, id); got != "running" {
			t.Errorf("after the dashboard's wake the session is %s, want running", got)
		}
		o.noMarkers(t, id, "wake-nav", "wake-ws")
	})
}
