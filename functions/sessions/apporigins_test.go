package sessions

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/ids"
)

func TestAppHostsNameOneSessionsApp(t *testing.T) {
	o := newAppOrigins(config.Apps{Domain: "Apps.Example.com:8443"}, "https://hangar.example.com", nil, time.Now)
	id := ids.New("sess")
	ulid := id[len("sess_"):]
	if got, want := o.origin(id, "web"), "https://web-"+ulid+".apps.example.com:8443"; got != want {
		t.Fatalf("origin = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		name, host, wantID, wantApp string
	}{
		{"an app's host", "web-" + ulid + ".apps.example.com", id, "web"},
		{"with a port and in capitals", "WEB-" + ulid + ".apps.example.com:8443", id, "web"},
		{"an app name with dashes", "my-app-2-" + ulid + ".apps.example.com", id, "my-app-2"},
		{"the API's own host", "hangar.example.com", "", ""},
		{"the apps domain itself", "apps.example.com", "", ""},
		{"a host one level deeper", "x.web-" + ulid + ".apps.example.com", "", ""},
		{"another domain ending alike", "web-" + ulid + ".evilapps.example.com", "", ""},
		{"no app name", "-" + ulid + ".apps.example.com", "", ""},
		{"an id of the wrong shape", "web-" + ulid[:25] + "u.apps.example.com", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotID, gotApp, ok := o.parseHost(tc.host)
			if gotID != tc.wantID || gotApp != tc.wantApp || ok != (tc.wantID != "") {
				t.Fatalf("parseHost(%q) = %q, %q, %v; want %q, %q", tc.host, gotID, gotApp, ok, tc.wantID, tc.wantApp)
			}
		})
	}
	if o.origin("nightly-build", "web") != "" {
		t.Error("a record id of an old shape got an origin")
	}
	if (appOrigins{}).origin(id, "web") != "" || (appOrigins{}).enabled() {
		t.Error("apps got origins with no domain configured")
	}
}

func TestAppGrantsOpenOnlyWhereAndAsTheyWereMade(t *testing.T) {
	_, sealer := testenv.Keyset(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := newAppOrigins(config.Apps{Domain: "apps.localhost", CookieTTL: time.Hour}, "http://127.0.0.1:8080", sealer, func() time.Time { return now })
	id, other := ids.New("sess"), ids.New("sess")
	alice := auth.Principal{UserID: "user_alice", Admin: true, WebSession: "dashboard-session"}
	token, err := o.seal(alice, id, "web", grantToken, AppTokenTTL)
	if err != nil {
		t.Fatal(err)
	}
	g, err := o.open(token, id, "web", grantToken)
	if err != nil || g.source() != (auth.Principal{UserID: alice.UserID, Admin: true, WebSession: alice.WebSession}) || g.ID == "" {
		t.Fatalf("open = %+v, %v; want alice, admin, her dashboard session, a token id", g, err)
	}
	if again, _ := o.seal(alice, id, "web", grantToken, AppTokenTTL); again == token {
		t.Error("two tokens are the same: one could not be used up without the other")
	}
	for _, tc := range []struct {
		name, session, app, kind string
		after                    time.Duration
	}{
		{"at another app of the session", id, "api", grantToken, 0},
		{"at the same app of another session", other, "web", grantToken, 0},
		{"as a cookie", id, "web", grantCookie, 0},
		{"once expired", id, "web", grantToken, AppTokenTTL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now = now.Add(tc.after)
			defer func() { now = now.Add(-tc.after) }()
			if _, err := o.open(token, tc.session, tc.app, tc.kind); connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("open = %v, want unauthenticated", err)
			}
		})
	}
	if _, err := o.open("bm90IGEgdG9rZW4", id, "web", grantToken); err == nil {
		t.Error("a forged token opened")
	}
	if o.cookieName() != "hangar_app" || newAppOrigins(config.Apps{Domain: "apps.example.com"}, "", nil, time.Now).cookieName() != "__Host-hangar_app" {
		t.Error("the cookie is __Host- only under https")
	}
}
