package e2e

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"gocloud.dev/blob/memblob"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// stack is the whole API on a real loopback server, over a Firestore project of its own.
type stack struct {
	url   string
	api   *composition.API
	admin string
}

func newStack(t testing.TB) *stack {
	t.Helper()
	db, _ := testenv.Firestore(t)
	return serve(t, composition.New(composition.Deps{DB: db, Config: config.Default()}))
}

// newSessionsStack is newStack with SessionService configured (a bucket and a sealer) but no
// sandbox host, for tests of the API surface rather than of sandboxes.
func newSessionsStack(t testing.TB) *stack {
	t.Helper()
	db, _ := testenv.Firestore(t)
	return serveSessions(t, db)
}

// serveSessions is newSessionsStack over db. Plugins are registered from test registries on
// loopback, which the configuration lists as an operator would.
func serveSessions(t testing.TB, db *firestore.Client) *stack {
	t.Helper()
	cfg := config.Default()
	cfg.Registries = imagestest.Allow
	return serveSessionsWith(t, db, cfg)
}

// serveSessionsWith is serveSessions with cfg.
func serveSessionsWith(t testing.TB, db *firestore.Client, cfg config.Config) *stack {
	t.Helper()
	_, sealer := testenv.Keyset(t)
	b := memblob.OpenBucket(nil)
	t.Cleanup(func() { _ = b.Close() })
	return serve(t, composition.New(composition.Deps{DB: db, Config: cfg, Bucket: b, Sealer: sealer}))
}

// serve runs a on a real loopback server and mints an admin key.
func serve(t testing.TB, a *composition.API) *stack {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, ln, a)
}

// serveOn is serve on ln, for an API whose configuration needs its address first.
func serveOn(t testing.TB, ln net.Listener, a *composition.API) *stack {
	t.Helper()
	// The production server (HTTP/1.1 and cleartext HTTP/2), not httptest's, so gRPC works too.
	srv := composition.NewServer(a.Handler())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	s := &stack{url: "http://" + ln.Addr().String(), api: a}
	s.admin = s.mintKey(t, "admin@example.com", true)
	return s
}

// mintKey creates a personal key for the person with email.
func (s *stack) mintKey(t testing.TB, email string, admin bool) string {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	u, err := s.api.Users().EnsureHuman(ctx, email, "", now)
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := s.api.Keys().Create(ctx, auth.NewKeyInput{Name: email, Kind: auth.KindPersonal, UserID: u.ID, Admin: admin}, now)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// rpcURL is the base URL generated clients take.
func (s *stack) rpcURL() string { return s.url + httpapi.RPCPrefix }

var httpClient = &http.Client{Timeout: 30 * time.Second}

// streamClient has no whole-request timeout, for streams that last as long as the data they
// carry: under -race on a loaded machine, 10,000 events outlast httpClient's 30 s. The tests
// bound their streams with a context instead.
var streamClient = &http.Client{}
