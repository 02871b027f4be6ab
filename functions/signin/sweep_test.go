package signin

import (
	"encoding/json"
	"maps"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/internal/oidctest"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/platform/ratelimit"
)

// Sign out everywhere ends every session of the person, wherever they signed in, and no one
// else's; an admin may sign another person out, a person may not; a page of another origin
// cannot make the call.
func TestSignOutEverywhereRevokesEverySessionOfOnePerson(t *testing.T) {
	e := newEnv(t)
	bobPerson := oidctest.Person{Email: "bob@example.com", EmailVerified: true, Name: "Bob"}
	signedIn := func(p oidctest.Person) (*http.Client, string) {
		b := e.browser(t)
		e.signIn(t, b, p)
		return b, e.sessionCookie(b)
	}
	adaLaptop, adaLaptopCookie := signedIn(ada)
	_, adaPhoneCookie := signedIn(ada)
	bob, bobCookie := signedIn(bobPerson)
	_, bobOtherCookie := signedIn(bobPerson)
	csrf := http.Header{"Origin": {e.url}, auth.CSRFHeader: {"1"}}
	revoke := func(b *http.Client, query string, h http.Header) (int, httpapi.RevokedSessions) {
		resp, body := e.form(t, b, httpapi.RevokeSessionsPath+query, nil, h)
		var out httpapi.RevokedSessions
		_ = json.Unmarshal([]byte(body), &out)
		return resp.StatusCode, out
	}

	if status, _ := revoke(http.DefaultClient, "", http.Header{"Origin": {"https://evil.example"}, "Cookie": {auth.SessionCookie + "=" + adaLaptopCookie}, auth.CSRFHeader: {"1"}}); status != http.StatusForbidden {
		t.Fatalf("a cross-site sign-out everywhere answered %d", status)
	}
	if status, _ := revoke(bob, "?user_id=someone-else", csrf); status != http.StatusForbidden {
		t.Fatalf("a person signing another out answered %d", status)
	}
	if status, out := revoke(adaLaptop, "", csrf); status != http.StatusOK || out.Revoked != 2 {
		t.Fatalf("sign out everywhere: %d %+v", status, out)
	}
	if e.sessionCookie(adaLaptop) != "" {
		t.Error("the browser that signed out still holds its cookie")
	}
	for name, c := range map[string]string{"ada's laptop": adaLaptopCookie, "ada's phone": adaPhoneCookie} {
		if code := e.rpc(t, e.sameOrigin(c)); code != connect.CodeUnauthenticated {
			t.Errorf("%s after sign out everywhere: %v", name, code)
		}
	}
	if code := e.rpc(t, e.sameOrigin(bobCookie)); code != connect.CodePermissionDenied {
		t.Errorf("bob's session after ada signed out: %v, want it live (permission_denied: not an admin)", code)
	}

	// An admin signs bob out everywhere.
	admin, _ := signedIn(ada)
	var whoBob httpapi.Whoami
	_, body := e.get(t, bob, httpapi.WhoamiPath)
	_ = json.Unmarshal([]byte(body), &whoBob)
	if status, out := revoke(admin, "?user_id="+whoBob.UserID, csrf); status != http.StatusOK || out.Revoked != 2 || out.UserID != whoBob.UserID {
		t.Fatalf("an admin signing bob out: %d %+v", status, out)
	}
	for _, c := range []string{bobCookie, bobOtherCookie} {
		if code := e.rpc(t, e.sameOrigin(c)); code != connect.CodeUnauthenticated {
			t.Errorf("bob's session after the admin signed him out: %v", code)
		}
	}
	if code := e.rpc(t, e.sameOrigin(e.sessionCookie(admin))); code == connect.CodeUnauthenticated {
		t.Error("the admin signed themself out signing bob out")
	}
}

// Sweep deletes the records sign-in made once they expired (plus an hour), a bounded batch a
// tick, and nothing that still counts.
func TestSweepDeletesExpiredSignInRecords(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	e.signIn(t, b, ada)
	e.deviceCode(t)
	if _, err := e.d.DB.Collection(flowsCollection).Doc("unfinished").Create(t.Context(), flow{ExpiresAt: e.clock.Now().Add(flowTTL)}); err != nil {
		t.Fatal(err)
	}
	count := func() map[string]int {
		out := map[string]int{}
		for _, c := range []string{flowsCollection, grantsCollection, userCodesCollection, "webSessions", ratelimit.Collection} {
			docs, err := e.d.DB.Collection(c).Documents(t.Context()).GetAll()
			if err != nil {
				t.Fatal(err)
			}
			out[c] = len(docs)
		}
		return out
	}
	// The address's sign-in and device code starts are one rate limit document each.
	want := map[string]int{flowsCollection: 1, grantsCollection: 1, userCodesCollection: 1, "webSessions": 1, ratelimit.Collection: 2}
	if err := e.svc.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := count(); !maps.Equal(got, want) {
		t.Fatalf("a sweep before expiry left %v, want %v", got, want)
	}
	e.clock.Advance(e.d.Config.DeviceCodeTTL + expiredKept + time.Minute)
	if err := e.svc.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	want = map[string]int{flowsCollection: 0, grantsCollection: 0, userCodesCollection: 0, "webSessions": 1, ratelimit.Collection: 0}
	if got := count(); !maps.Equal(got, want) {
		t.Fatalf("a sweep after the codes expired left %v, want %v (the session lives on)", got, want)
	}
	e.clock.Advance(e.d.Config.SessionTTL)
	if err := e.svc.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := count(); got["webSessions"] != 0 {
		t.Fatalf("a sweep after the session expired left %v", got)
	}
}
