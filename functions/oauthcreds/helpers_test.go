package oauthcreds

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/oauthtest"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/records/credentials"
	"github.com/hangar-dev/hangar/records/secrets"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// harness is the service over the emulator, signing in to one loopback provider ("acme", a
// confidential client whose id and secret are org secrets every user may use).
type harness struct {
	svc      *Service
	db       *firestore.Client
	provider *oauthtest.Provider
	clock    *clock.Fake
	logs     *testkit.SyncBuffer
	sessions *sessiondb.Store
	alice    context.Context
	bob      context.Context
}

var (
	userSubject = &appv1.OAuthSubject{Kind: appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_USER}
	alice       = auth.Principal{UserID: "user_alice", KeyID: "key_alice"}
	bob         = auth.Principal{UserID: "user_bob", KeyID: "key_bob"}
)

func newHarness(t *testing.T) *harness {
	t.Helper()
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	clk := clock.NewFake(time.Now())
	p := oauthtest.New(t)
	sec := secrets.New(db, sealer, clk.Now, secrets.Limits{MaxValueBytes: 4096, MaxSecrets: 100})
	all := &secrets.Access{Visibility: secrets.AllUsers}
	for name, value := range map[string]string{"ACME_CLIENT_ID": p.ClientID, "ACME_CLIENT_SECRET": p.ClientSecret} {
		if _, _, err := sec.Put(context.Background(), secrets.Put{Name: name, Value: value, Access: all, By: "user_root"}); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := NewRegistry(p.RegistryJSON("acme", "ACME_CLIENT_ID", "ACME_CLIENT_SECRET"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.SyncBuffer{}
	h := &harness{
		db: db, provider: p, clock: clk, logs: logs, sessions: sessiondb.NewStore(db, clk.Now),
		alice: auth.WithPrincipal(context.Background(), alice), bob: auth.WithPrincipal(context.Background(), bob),
	}
	h.svc = New(Deps{
		Store: credentials.New(db, sealer, clk.Now, 8192), Flows: credentials.NewFlows(db, clk.Now), Secrets: sec,
		Sessions: h.sessions, Sealer: sealer, Providers: reg, Egress: egress.MustParse("127.0.0.1"), LoopbackHTTP: true,
		Clock: clk, Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	return h
}

// secretPut is an admins-only org secret.
func secretPut(name, value string) secrets.Put {
	return secrets.Put{Name: name, Value: value, By: "user_root"}
}
