package auth

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/platform/store"
)

// Principal is the authenticated caller of a request.
type Principal struct {
	UserID string
	KeyID  string
	Kind   string
	Admin  bool
	// WebSession is the record id of the dashboard session that signed the caller in (Kind
	// KindWebSession), which Recheck finds again; it signs nobody in by itself.
	WebSession string
	// Via is the credential that signed the caller in on this request (Identify).
	Via Credentials
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// Caller returns the request's principal; handlers behind the interceptor always have one.
func Caller(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Authenticator verifies keys against Firestore, remembering verified ones for a short TTL so a
// request costs no database read in the common case, and failed ones so that bad keys cost
// none either (failures.go).
type Authenticator struct {
	db    *firestore.Client
	clock clock.Clock
	ttl   time.Duration
	log   *slog.Logger
	// behindProxy trusts the last X-Forwarded-For hop as the client's address.
	behindProxy bool

	mu    sync.Mutex
	cache map[string]cached

	failures *failures
	lookups  atomic.Int64

	// sessions and origins are set by AcceptSessions (websessions.go): without them only API
	// keys authenticate.
	sessions *WebSessions
	origins  map[string]bool
	cookie   string
}

type cached struct {
	p       Principal
	expires time.Time
}

// maxCached bounds the cache; past it the cache starts over, which only costs re-reads.
const maxCached = 10000

// lastUsedEvery is how stale a key's last_used_at may get before a verification rewrites it.
const lastUsedEvery = time.Minute

// NewAuthenticator returns an authenticator over db's keys.
func NewAuthenticator(db *firestore.Client, c clock.Clock, ttl time.Duration, log *slog.Logger) *Authenticator {
	if log == nil {
		// touch logs a failed last_used_at write off the request path, where a nil logger
		// would panic the process.
		log = slog.Default()
	}
	return &Authenticator{db: db, clock: c, ttl: ttl, log: log, cache: make(map[string]cached), failures: newFailures(db, c.Now, log)}
}

// BehindProxy makes the authenticator take a request's client address from the last
// X-Forwarded-For hop, for a server behind a proxy that appends it (Cloud Run's front end).
func (a *Authenticator) BehindProxy() { a.behindProxy = true }

// ClientAddress is the address a request with the peer address and headers came from, as the
// failure limits count it.
func (a *Authenticator) ClientAddress(peer string, h http.Header) string {
	return clientAddress(peer, h, a.behindProxy)
}

// Lookups is how many keys the authenticator has read from Firestore, for metrics and tests.
func (a *Authenticator) Lookups() int64 { return a.lookups.Load() }

// Authenticate returns the principal of a key presented from client (an address, "" when
// unknown), or the unauthenticated error for a key that is missing, malformed, unknown or
// revoked. A client, or a key id, with too many failures is resource_exhausted until it has
// waited (failures.go).
func (a *Authenticator) Authenticate(ctx context.Context, key, client string) (Principal, error) {
	id, ok := parseKey(key)
	if !ok {
		return Principal{}, apierr.Unauthenticated()
	}
	h := hashKey(key)
	now := a.clock.Now()
	if p, ok := a.recalled(h, now); ok {
		return p, nil
	}
	if a.failures.known(h, now) {
		return Principal{}, apierr.Unauthenticated()
	}
	if err := a.failures.exhausted(client, id); err != nil {
		return Principal{}, err
	}
	a.lookups.Add(1)
	snap, err := a.db.Collection(keysCollection).Doc(id).Get(ctx)
	if store.IsNotFound(err) {
		a.failures.failed(ctx, h, client, id, now)
		return Principal{}, apierr.Unauthenticated()
	}
	if err != nil {
		return Principal{}, err
	}
	var k Key
	if err := snap.DataTo(&k); err != nil {
		return Principal{}, err
	}
	if k.Revoked() || !hashesEqual(k.Hash, h) {
		a.failures.failed(ctx, h, client, id, now)
		return Principal{}, apierr.Unauthenticated()
	}
	p := Principal{UserID: k.UserID, KeyID: k.ID, Kind: k.Kind, Admin: k.Admin}
	a.remember(h, p, now.Add(a.ttl))
	if now.Sub(k.LastUsedAt) > lastUsedEvery {
		a.touch(snap.Ref, now)
	}
	return p, nil
}

// touch records last use off the request path: a lost update only makes last_used_at older.
func (a *Authenticator) touch(ref *firestore.DocumentRef, now time.Time) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := ref.Update(ctx, []firestore.Update{{Path: "last_used_at", Value: now}}); err != nil {
			a.log.Warn("record api key use", "key", ref.ID, "err", err)
		}
	}()
}

func (a *Authenticator) forget(hash string) {
	a.mu.Lock()
	delete(a.cache, hash)
	a.mu.Unlock()
}

// Interceptor authenticates every RPC by Identify, taken as Act: by API key in httpapi.APIKeyHeader
// or (when AcceptSessions was called) by the dashboard's cookie, but for the methods that
// authenticate themselves (SelfAuthenticated), and enforces AdminServices.
func Interceptor(a *Authenticator) connect.Interceptor { return &interceptor{a: a} }

type interceptor struct{ a *Authenticator }

// rpcRoute is what an RPC of procedure declares.
func rpcRoute(procedure string) Route {
	if SelfAuthenticated[procedure] {
		return Route{Use: Act, Accepts: BrokerToken}
	}
	return Route{Use: Act, Accepts: HeaderKey | SignInCookie}
}

func (i *interceptor) check(ctx context.Context, procedure string, peer connect.Peer, h http.Header) (context.Context, error) {
	p, err := i.a.Identify(rpcRequest(ctx, peer.Addr, h), rpcRoute(procedure))
	if err != nil {
		return ctx, err
	}
	if p.Kind == KindBrokered {
		// Nobody is signed in: the method checks the broker token in its request.
		return ctx, nil
	}
	if AdminServices[serviceOf(procedure)] && !p.Admin {
		return ctx, apierr.PermissionDenied("%s is for admins only", serviceOf(procedure))
	}
	return WithPrincipal(ctx, p), nil
}

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, err := i.check(ctx, req.Spec().Procedure, req.Peer(), req.Header())
		if err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := i.check(ctx, conn.Spec().Procedure, conn.Peer(), conn.RequestHeader())
		if err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// serviceOf returns "svc.app.v1.TaskService" for "/svc.app.v1.TaskService/CreateTask".
func serviceOf(procedure string) string {
	s := strings.TrimPrefix(procedure, "/")
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i]
	}
	return s
}

// WithKey makes a Connect client send key in httpapi.APIKeyHeader with every request, unary and
// streaming: what the CLI, the tests and any Go client of the API use.
func WithKey(key string) connect.ClientOption {
	return connect.WithInterceptors(clientKey(key))
}

type clientKey string

func (key clientKey) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set(httpapi.APIKeyHeader, string(key))
		return next(ctx, req)
	}
}

func (key clientKey) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set(httpapi.APIKeyHeader, string(key))
		return conn
	}
}

// WrapStreamingHandler leaves handlers alone: the key is a client's to send.
func (clientKey) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
