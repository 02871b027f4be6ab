package sessions

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"gocloud.dev/blob/memblob"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/platform/ids"
)

// Two instances over one database: a token either spends once, and its record goes only once
// the token has long expired.
func TestAnAppTokenIsSpentOnceOnAnyInstanceAndItsRecordSweptOnceExpired(t *testing.T) {
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	clk := clock.NewFake(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	deps := Deps{DB: db, Sealer: sealer, Bucket: memblob.OpenBucket(nil), Clock: clk,
		Apps: config.Apps{Domain: "apps.localhost", CookieTTL: time.Hour}, PublicURL: "http://127.0.0.1:8080"}
	a, b := New(deps), New(deps)
	id := ids.New("sess")
	token, err := a.apps.seal(auth.Principal{UserID: "user_alice", WebSession: "ws"}, id, "web", grantToken, AppTokenTTL)
	if err != nil {
		t.Fatal(err)
	}
	g, err := b.apps.open(token, id, "web", grantToken)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.spendAppToken(t.Context(), g); err != nil {
		t.Fatalf("the first use: %v", err)
	}
	for name, inst := range map[string]*Service{"the same instance": a, "another instance": b} {
		err := inst.spendAppToken(t.Context(), g)
		if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "already used") || !strings.Contains(err.Error(), httpapi.AppURLPath(id, "web")) {
			t.Errorf("a second use on %s: %v, want unauthenticated naming the app's path route", name, err)
		}
	}
	if err := a.spendAppToken(t.Context(), appGrant{Session: id, App: "web"}); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("a token without an id: %v, want unauthenticated", err)
	}

	exists := func() bool {
		_, err := db.Collection(usedAppTokens).Doc(g.ID).Get(t.Context())
		return err == nil
	}
	clk.Advance(AppTokenTTL + usedTokenKept - time.Second)
	if err := b.SweepAppTokens(t.Context()); err != nil || !exists() {
		t.Fatalf("swept before its time (%v)", err)
	}
	clk.Advance(2 * time.Second)
	if err := b.SweepAppTokens(t.Context()); err != nil || exists() {
		t.Fatalf("not swept once expired (%v)", err)
	}
}
