package oauthcreds

import (
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/records/credentials"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// brokeredSession records a running session of alice's bound to her acme credential, as
// SessionService does on CreateSession, and answers its id and broker token.
func brokeredSession(t *testing.T, h *harness, id string) string {
	t.Helper()
	token, broker, err := credentials.NewBroker(aliceSub, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(broker.TokenHash), token) {
		t.Fatal("the record keeps the token")
	}
	rec := &sessiondb.Record{ID: id, Owner: alice.UserID, Status: sessiondb.Running, Broker: broker}
	if _, err := h.sessions.Create(t.Context(), rec, 0); err != nil {
		t.Fatal(err)
	}
	return token
}

func update(h *harness, id, token string, expected int64, bundle string) (*connect.Response[appv1.UpdateSessionCredentialResponse], error) {
	return h.svc.UpdateSessionCredential(h.alice, connect.NewRequest(&appv1.UpdateSessionCredentialRequest{
		SessionId: id, BrokerToken: token, ExpectedVersion: expected, OpaqueBundle: []byte(bundle),
	}))
}

// Two sessions racing to save a refreshed bundle over the same version: one wins, the other is
// aborted with the current version in its message, and fetching then answers the winner's.
func TestBrokerUpdatesAreCompareAndSwap(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	connectAlice(t, h)
	tokens := map[string]string{"sess_a": brokeredSession(t, h, "sess_a"), "sess_b": brokeredSession(t, h, "sess_b")}
	got, err := h.svc.FetchSessionCredential(h.alice, connect.NewRequest(&appv1.FetchSessionCredentialRequest{SessionId: "sess_a", BrokerToken: tokens["sess_a"]}))
	if err != nil || got.Msg.GetProvider() != "acme" || got.Msg.GetVersion() != 1 || len(got.Msg.GetOpaqueBundle()) == 0 {
		t.Fatalf("fetch: %v, %v", got, err)
	}
	var wg sync.WaitGroup
	errs := map[string]error{}
	var mu sync.Mutex
	for id, token := range tokens {
		wg.Go(func() {
			_, err := update(h, id, token, 1, `{"claudeAiOauth":{"accessToken":"from-`+id+`"}}`)
			mu.Lock()
			errs[id] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	var winner string
	for id, err := range errs {
		switch {
		case err == nil:
			if winner != "" {
				t.Fatal("both updates won")
			}
			winner = id
		case connect.CodeOf(err) == connect.CodeAborted:
			if !strings.Contains(err.Error(), "at version 2") {
				t.Fatalf("the loser is not told the current version: %v", err)
			}
		default:
			t.Fatalf("update of %s: %v", id, err)
		}
	}
	if winner == "" {
		t.Fatal("no update won")
	}
	got, err = h.svc.FetchSessionCredential(h.alice, connect.NewRequest(&appv1.FetchSessionCredentialRequest{SessionId: "sess_a", BrokerToken: tokens["sess_a"]}))
	if err != nil || got.Msg.GetVersion() != 2 || !strings.Contains(string(got.Msg.GetOpaqueBundle()), "from-"+winner) {
		t.Fatalf("fetch after the race: %v, %v", got, err)
	}
}

// A broker token opens only its own session's credential, and only while the session lives;
// every refusal is the same unauthenticated answer.
func TestSecurityBrokerTokenIsBoundToItsLiveSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	connectAlice(t, h)
	a, b := brokeredSession(t, h, "sess_a"), brokeredSession(t, h, "sess_b")
	for name, req := range map[string]*appv1.FetchSessionCredentialRequest{
		"another session's token": {SessionId: "sess_a", BrokerToken: b},
		"no token":                {SessionId: "sess_a"},
		"an unknown session":      {SessionId: "sess_zzz", BrokerToken: a},
		"a made-up token":         {SessionId: "sess_a", BrokerToken: credentials.BrokerPrefix + "AAAA"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := h.svc.FetchSessionCredential(h.alice, connect.NewRequest(req))
			testenv.WantCode(t, err, connect.CodeUnauthenticated)
		})
	}
	if _, _, err := h.sessions.Move(t.Context(), "sess_a", sessiondb.Deleted, "deleted", nil); err != nil {
		t.Fatal(err)
	}
	_, err := h.svc.FetchSessionCredential(h.alice, connect.NewRequest(&appv1.FetchSessionCredentialRequest{SessionId: "sess_a", BrokerToken: a}))
	testenv.WantCode(t, err, connect.CodeUnauthenticated)
	_, err = update(h, "sess_a", a, 1, "x")
	testenv.WantCode(t, err, connect.CodeUnauthenticated)
	_, err = update(h, "sess_b", b, 0, "x")
	testenv.WantCode(t, err, connect.CodeInvalidArgument)
}

// A session whose sandbox holds its credential as a placeholder (SessionService sealed the
// sandbox's bundle into it) fetches that bundle, at the credential's current version, and
// cannot save one: Hangar refreshes the credential.
func TestProxiedSessionsFetchTheirPlaceholderBundleAndCannotSave(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	connectAlice(t, h)
	token, broker, err := credentials.NewBroker(aliceSub, "acme")
	if err != nil {
		t.Fatal(err)
	}
	broker.Proxied = true
	const sandboxed = `{"claudeAiOauth":{"accessToken":"hangar-placeholder-1"}}`
	sealed, err := h.svc.d.Sealer.Seal([]byte(sandboxed), sessiondb.CredentialOwner("sess_p"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &sessiondb.Record{ID: "sess_p", Owner: alice.UserID, Status: sessiondb.Running, Broker: broker, SealedCredential: sealed}
	if _, err := h.sessions.Create(t.Context(), rec, 0); err != nil {
		t.Fatal(err)
	}
	got, err := h.svc.FetchSessionCredential(h.alice, connect.NewRequest(&appv1.FetchSessionCredentialRequest{SessionId: "sess_p", BrokerToken: token}))
	if err != nil || string(got.Msg.GetOpaqueBundle()) != sandboxed || got.Msg.GetVersion() != 1 {
		t.Fatalf("fetch: %v, %v", got, err)
	}
	_, err = update(h, "sess_p", token, 1, `{"claudeAiOauth":{"accessToken":"from-the-sandbox"}}`)
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	if m := meta(t, h); m.GetVersion() != 1 {
		t.Fatalf("the credential changed: %v", m)
	}
}

// The broker's methods take no credential but the token, so the session id they are named is
// checked before it names a document: a path into a sub-collection (where a record planted with
// the caller's own token would have been served), a parent path, or a name Firestore reserves is
// invalid_argument naming session_id, not a read of another document nor a 500.
func TestSecurityBrokerRefusesSessionIDsThatAreNotDocumentIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	connectAlice(t, h)
	token := brokeredSession(t, h, "sess_a/planted/x")
	for name, id := range map[string]string{
		"a planted sub-collection record": "sess_a/planted/x",
		"a sub-collection path":           "a/b/c",
		"a parent path":                   "../x",
		"dot dot":                         "..",
		"a reserved name":                 "__x__",
		"a control character":             "sess_a\x00",
		"an overlong id":                  strings.Repeat("s", 129),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := h.svc.FetchSessionCredential(h.alice, connect.NewRequest(&appv1.FetchSessionCredentialRequest{SessionId: id, BrokerToken: token}))
			if got := testenv.ViolatedFields(t, err); len(got) != 1 || got[0] != "session_id" {
				t.Errorf("fetch: violated fields %v, want [session_id]", got)
			}
			_, err = update(h, id, token, 1, `{}`)
			if got := testenv.ViolatedFields(t, err); len(got) != 1 || got[0] != "session_id" {
				t.Errorf("update: violated fields %v, want [session_id]", got)
			}
		})
	}
}
