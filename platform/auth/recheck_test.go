package auth_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
)

// Recheck answers a principal while the dashboard session or API key it came from is live, on
// every instance: the instance that revokes forgets at once, another within its cache's TTL.
func TestRecheckEndsWithTheSessionOrKeyAPrincipalCameFrom(t *testing.T) {
	db, _ := testenv.Firestore(t)
	clk := clock.NewFake(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	const ttl = 10 * time.Second
	a := auth.NewAuthenticator(db, clk, ttl, nil)
	b := auth.NewAuthenticator(db, clk, ttl, nil)
	sessionsA, sessionsB := auth.NewWebSessions(db, a), auth.NewWebSessions(db, b)
	a.AcceptSessions(sessionsA, nil)
	b.AcceptSessions(sessionsB, nil)
	keys := auth.NewKeys(db, a)
	ctx := t.Context()

	signIn := func(t *testing.T, life time.Duration) (auth.Principal, string) {
		t.Helper()
		token, err := sessionsA.Create(ctx, "user_carol", false, clk.Now(), life)
		if err != nil {
			t.Fatal(err)
		}
		p, err := a.AuthenticateSession(ctx, token, "")
		if err != nil || p.WebSession == "" {
			t.Fatalf("sign-in = %+v, %v; want a principal naming its session", p, err)
		}
		return p, token
	}
	live := func(t *testing.T, inst *auth.Authenticator, p auth.Principal) bool {
		t.Helper()
		got, err := inst.Recheck(ctx, p)
		if err != nil && connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("Recheck: %v", err)
		}
		return err == nil && got.UserID == p.UserID
	}

	t.Run("a dashboard session signed out", func(t *testing.T) {
		p, token := signIn(t, time.Hour)
		if !live(t, a, p) || !live(t, b, p) {
			t.Fatal("a live session is not live")
		}
		if err := sessionsA.Revoke(ctx, token, clk.Now()); err != nil {
			t.Fatal(err)
		}
		if live(t, a, p) {
			t.Error("the instance that signed out still takes the session")
		}
		clk.Advance(ttl)
		if live(t, b, p) {
			t.Error("another instance takes the session past its cache's TTL")
		}
	})
	t.Run("a dashboard session signed out everywhere", func(t *testing.T) {
		p, _ := signIn(t, time.Hour)
		if _, err := sessionsB.RevokeAll(ctx, p.UserID, clk.Now()); err != nil {
			t.Fatal(err)
		}
		if live(t, b, p) {
			t.Error("the session is live after signing out everywhere")
		}
	})
	t.Run("a dashboard session expired", func(t *testing.T) {
		p, _ := signIn(t, time.Minute)
		clk.Advance(time.Minute)
		if live(t, a, p) || live(t, b, p) {
			t.Error("an expired session is live")
		}
	})
	t.Run("an API key revoked", func(t *testing.T) {
		k, secret, err := keys.Create(ctx, auth.NewKeyInput{Name: "carol", Kind: auth.KindPersonal, UserID: "user_carol"}, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		p, err := a.Authenticate(ctx, secret, "")
		if err != nil || !live(t, a, p) || !live(t, b, p) {
			t.Fatalf("a live key is not live: %v", err)
		}
		if _, err := keys.Revoke(ctx, k.ID, clk.Now()); err != nil {
			t.Fatal(err)
		}
		if live(t, a, p) {
			t.Error("the instance that revoked the key still takes it")
		}
		clk.Advance(ttl)
		if live(t, b, p) {
			t.Error("another instance takes a revoked key past its cache's TTL")
		}
	})
	t.Run("a principal naming no credential, or another user's", func(t *testing.T) {
		p, _ := signIn(t, time.Hour)
		for _, q := range []auth.Principal{{UserID: p.UserID}, {UserID: "user_mallory", WebSession: p.WebSession}, {UserID: p.UserID, WebSession: "no-such-session"}} {
			if live(t, b, q) {
				t.Errorf("%+v is live", q)
			}
		}
	})
}
