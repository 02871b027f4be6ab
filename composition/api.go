// Package composition assembles every service of the public API into HTTP handlers: all of them on
// one mux for `hangar dev`, or one at a time for a Cloud Run function. It is the only package that
// knows every service; services never know each other, and what one needs of another it gets here
// as an interface.
package composition

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strings"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"
	"gocloud.dev/blob"

	"github.com/hangar-dev/hangar/functions/apikeys"
	"github.com/hangar-dev/hangar/functions/automations"
	"github.com/hangar-dev/hangar/functions/automationworker"
	"github.com/hangar-dev/hangar/functions/fleetsvc"
	"github.com/hangar-dev/hangar/functions/harnesses"
	"github.com/hangar-dev/hangar/functions/imagesvc"
	"github.com/hangar-dev/hangar/functions/modelrouters"
	"github.com/hangar-dev/hangar/functions/oauthcreds"
	"github.com/hangar-dev/hangar/functions/orgsecrets"
	"github.com/hangar-dev/hangar/functions/profiles"
	"github.com/hangar-dev/hangar/functions/sessions"
	"github.com/hangar-dev/hangar/functions/signin"
	"github.com/hangar-dev/hangar/functions/tasks"
	"github.com/hangar-dev/hangar/functions/webhooks"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/harnesses/harnesscatalog"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/codec"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/platform/pubsub"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/platform/store"
	"github.com/hangar-dev/hangar/platform/telemetry"
	"github.com/hangar-dev/hangar/records/credentials"
	"github.com/hangar-dev/hangar/records/fleet"
	"github.com/hangar-dev/hangar/records/secrets"
	"github.com/hangar-dev/hangar/records/sessiondb"
	"github.com/hangar-dev/hangar/sandboxhosts/hostclient"
	"github.com/hangar-dev/hangar/web"
)

// Deps are what the services run on.
type Deps struct {
	DB     *firestore.Client
	Config config.Config
	Clock  clock.Clock
	Log    *slog.Logger
	// Bucket and Sealer serve sessions (artifacts, snapshots, sealed secrets). Without them
	// SessionService answers unavailable, naming what to configure.
	Bucket *blob.Bucket
	Sealer *seal.Sealer
	// DefaultImage is the image of sessions created without image_uri ("": image_uri required).
	DefaultImage string
	// Harnesses is the harness catalog; without one, one is made over Bucket with the embedded
	// built-in plugins and an in-memory compilation cache.
	Harnesses *harnesscatalog.Catalog
	// PubSub carries async work; with Sealer it serves webhooks (their secrets are sealed,
	// their deliveries published). Without them WebhookRegistrationService answers unavailable,
	// and automations cannot run (RunNow and DryRun answer unavailable).
	PubSub *pubsub.Client
	// JSCacheDir keeps the compiled JavaScript sandbox across processes; "" uses the user's
	// cache directory (the compile takes seconds, and a process makes it only when a script
	// first needs it).
	JSCacheDir string
	// BehindProxy says the API is served behind a proxy that appends the client's address to
	// X-Forwarded-For (Cloud Run's front end), so that limits per client address count the
	// client, not the proxy.
	BehindProxy bool
	// LoopbackProviders lets OAuth providers (OAuthCredentialService) and the OIDC issuer of
	// sign-in be plain http on loopback addresses: only tests' loopback providers set it;
	// deployments take https only.
	LoopbackProviders bool
}

// API is the assembled set of services.
type API struct {
	worker      *automationworker.Worker
	imageWorker *imagesvc.Worker
	images      *imagesvc.Service
	// fleet is FleetService, nil when sessions are not served here.
	fleet    *fleetsvc.Service
	routes   map[string]route
	authn    *auth.Authenticator
	keys     *auth.Keys
	users    *auth.Users
	services map[string]http.Handler
	// appHosts serves the apps' own origins, by Host, whatever the path.
	appHosts hostRoute
	log      *slog.Logger
	// ready are /readyz's checks: what the API cannot serve without.
	ready map[string]telemetry.Check
}

// hostRoute serves the requests whose Host it claims, for its service's function.
type hostRoute struct {
	service string
	claims  func(host string) bool
	h       http.Handler
}

// in is next with the requests h claims taken off to h, when it belongs to service ("" for all).
func (h hostRoute) in(service string, next http.Handler) http.Handler {
	if h.claims == nil || service != "" && service != h.service {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.claims(r.Host) {
			h.h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// New wires every service over d.
func New(d Deps) *API {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	authn := auth.NewAuthenticator(d.DB, d.Clock, d.Config.Limits.AuthCacheTTL, d.Log)
	if d.BehindProxy {
		authn.BehindProxy()
	}
	a := &API{
		authn:    authn,
		keys:     auth.NewKeys(d.DB, authn),
		users:    auth.NewUsers(d.DB),
		services: make(map[string]http.Handler),
		routes:   make(map[string]route),
	}
	a.log = d.Log
	a.ready = map[string]telemetry.Check{}
	if d.DB != nil {
		a.ready["firestore"] = func(ctx context.Context) error { return store.Ping(ctx, d.DB) }
	}
	if d.PubSub != nil {
		a.ready["pubsub"] = d.PubSub.Ping
	}
	// Tracing outermost, so a call's span holds its normalized error and the time of all the rest.
	opts := connect.WithHandlerOptions(
		telemetry.Interceptor(),
		connect.WithInterceptors(measured{}, apierr.Interceptor(d.Log), auth.Interceptor(authn)),
		connect.WithReadMaxBytes(d.Config.Limits.MaxRequestBytes),
		codec.JSON(),
	)
	add := func(path string, h http.Handler) { a.services[strings.Trim(path, "/")] = h }

	add(appv1connect.NewApiKeyServiceHandler(apikeys.New(a.keys, a.users, d.Clock, d.Config.Limits), opts))

	if d.Harnesses == nil && d.Bucket != nil {
		var err error
		if d.Harnesses, err = OpenHarnesses(context.Background(), d.DB, d.Bucket, d.Sealer, d.Config, d.Clock, ""); err != nil {
			d.Log.Error("harness catalog", "err", err)
		}
	}
	if d.Harnesses != nil {
		add(appv1connect.NewHarnessCatalogServiceHandler(harnesses.New(d.Harnesses), opts))
	} else {
		add(appv1connect.NewHarnessCatalogServiceHandler(appv1connect.UnimplementedHarnessCatalogServiceHandler{}, opts,
			connect.WithInterceptors(unavailable("the harness catalog is not configured here: set HANGAR_BLOB_URL"))))
	}

	// Org secrets and OAuth credentials are sealed at rest: without a keyset there are none.
	var secretStore *secrets.Store
	var credStore *credentials.Store
	var routerCreds modelrouters.Credentials
	var oauthSvc *oauthcreds.Service
	if d.Sealer != nil {
		secretStore = secrets.New(d.DB, d.Sealer, d.Clock.Now, secrets.Limits{MaxValueBytes: d.Config.Limits.MaxSecretBytes, MaxSecrets: d.Config.Limits.MaxOrgSecrets})
		credStore = credentials.New(d.DB, d.Sealer, d.Clock.Now, d.Config.Limits.MaxSecretBytes)
		routerCreds = secretStore
		add(appv1connect.NewOrgSecretServiceHandler(orgsecrets.New(secretStore), opts))
		oauthSvc = a.oauth(d, opts, add, secretStore, credStore)
	} else {
		noKeyset := connect.WithInterceptors(unavailable("secrets are not kept here: set HANGAR_SEAL_KEYSET"))
		add(appv1connect.NewOrgSecretServiceHandler(appv1connect.UnimplementedOrgSecretServiceHandler{}, opts, noKeyset))
		add(appv1connect.NewOAuthCredentialServiceHandler(appv1connect.UnimplementedOAuthCredentialServiceHandler{}, opts, noKeyset))
	}

	// Sessions first: tasks run in them and profiles look inside images through their hosts.
	var sessionSvc *sessions.Service
	var taskRuns tasks.Sessions
	var repos profiles.RepoFinder
	var hosts *hostclient.Pool
	if d.Bucket != nil && d.Sealer != nil {
		hosts = hostclient.New(fleet.New(d.DB, d.Clock.Now, d.Config.Host.HostTimeout), d.Config.HostToken)
	}
	// Images before sessions: sessions start from enabled images.
	var imageResolver sessions.ImageResolver
	if svc := a.imagesService(d, opts, add, hosts, secretStore); svc != nil {
		imageResolver = svc
	}
	routerSvc := modelrouters.New(d.DB, d.Clock, d.Config, routerCreds)
	if hosts != nil {
		sessionSvc = sessions.New(sessions.Deps{
			DB: d.DB, Hosts: hosts, Sealer: d.Sealer, Bucket: d.Bucket, Users: a.users,
			Clock: d.Clock, Limits: d.Config.Limits, DefaultImage: d.DefaultImage, Harnesses: d.Harnesses,
			Routers: d.Config.ModelRouters, Secrets: secretStore, Credentials: credStore, Images: imageResolver,
			Apps: d.Config.Apps, PublicURL: d.Config.SignIn.PublicURL,
			OAuthHosts: oauthSandboxHosts(d.Config.OAuthProviders),
			RouterModel: func(ctx context.Context, router, model string) (sessions.RouterModel, error) {
				p, err := routerSvc.ModelPolicy(ctx, router, model)
				return sessions.RouterModel(p), err
			},
		})
		// Session streams carry file bytes and command output, which gzip turns into CPU time
		// rather than savings (ReadFile ran at 44 MiB/s compressed): answers go uncompressed.
		add(appv1connect.NewSessionServiceHandler(sessionSvc, opts, connect.WithCompression("gzip", nil, nil)))
		taskRuns, repos = taskSessions{sessionSvc}, sessionSvc.FindImageRepos
		a.routes["GET "+httpapi.EventsPath] = route{appv1connect.SessionServiceName, sessionSvc.SSE(authn)}
		a.routes["GET "+httpapi.ShellPath] = route{appv1connect.SessionServiceName, sessionSvc.Shell(authn)}
		a.routes[httpapi.FilesPath] = route{appv1connect.SessionServiceName, sessionSvc.Files(authn)}
		a.routes[httpapi.AppsPath] = route{appv1connect.SessionServiceName, sessionSvc.Apps(authn)}
		a.routes["GET "+httpapi.NetworkUsagePath] = route{appv1connect.SessionServiceName, sessionSvc.NetworkUsage(authn)}
		a.appHosts = hostRoute{appv1connect.SessionServiceName, sessionSvc.IsAppHost, sessionSvc.AppOrigin(authn)}
		a.fleet = fleetsvc.New(fleetsvc.Deps{Hosts: hosts, Store: sessiondb.NewStore(d.DB, d.Clock.Now), Sessions: fleetSessions{sessionSvc}, Log: d.Log})
		add(appv1connect.NewFleetServiceHandler(a.fleet, opts))
	} else {
		add(appv1connect.NewFleetServiceHandler(appv1connect.UnimplementedFleetServiceHandler{}, opts,
			connect.WithInterceptors(unavailable("the fleet is not served here: set HANGAR_BLOB_URL, HANGAR_SEAL_KEYSET and HANGAR_HOST_TOKEN"))))
		add(appv1connect.NewSessionServiceHandler(appv1connect.UnimplementedSessionServiceHandler{}, opts,
			connect.WithInterceptors(unavailable("sessions are not configured here: set HANGAR_BLOB_URL, HANGAR_SEAL_KEYSET and HANGAR_HOST_TOKEN"))))
	}
	profileSvc := profiles.New(d.DB, repos, secretStore, d.Clock, d.Config.Limits)
	add(appv1connect.NewProfileServiceHandler(profileSvc, opts))
	taskSvc := tasks.New(d.DB, profileSvc, taskRuns, a.users, d.Clock, d.Config.Limits)
	add(appv1connect.NewTaskServiceHandler(taskSvc, opts))

	// Services that later work builds answer unimplemented, naming the method, until then.
	add(appv1connect.NewModelRouterServiceHandler(routerSvc, opts))
	effects := automationEffects{tasks: taskSvc, sessions: sessionSvc, secrets: secretStore, keys: a.keys}
	reviewSvc := reviewService(d, effects, secretStore, profileSvc)
	add(appv1connect.NewReviewServiceHandler(reviewSvc, opts))
	access := automations.Access{Owner: effects.actor, Secrets: secretStore}
	var hooks *webhooks.Service
	if d.Sealer != nil && d.PubSub != nil {
		hooks = webhooks.New(webhooks.Deps{
			DB: d.DB, Sealer: d.Sealer, PubSub: d.PubSub, Clock: d.Clock, Limits: d.Config.Limits.Webhooks, Log: d.Log,
		})
		access.Webhook = hooks.Readable
	}
	a.automations(d, opts, add, effects, access, profileSvc.KeyOptions)
	a.signIn(d, secretStore)
	if a.worker != nil && oauthSvc != nil {
		a.worker.AlsoTick(oauthSvc.Sweep)
	}
	if a.worker != nil && sessionSvc != nil {
		a.worker.AlsoTick(sessionSvc.SweepAppTokens) // used app tokens' records go once expired
	}
	if a.worker != nil {
		// Reviews hear GitHub deliveries and ticks through the automation worker.
		a.worker.Listen(reviewSvc)
	}
	if a.worker != nil && a.imageWorker != nil {
		// The tick re-queues enable jobs whose worker died and collects images nothing
		// references when due, as `hangar dev`'s image worker does on its own ticker.
		a.worker.AlsoTick(a.imageWorker.Tick)
	}
	if hooks != nil {
		add(appv1connect.NewWebhookRegistrationServiceHandler(hooks, opts))
		a.routes["POST "+httpapi.InboundWebhookPath] = route{appv1connect.WebhookRegistrationServiceName, hooks.Inbound()}
	} else {
		add(appv1connect.NewWebhookRegistrationServiceHandler(appv1connect.UnimplementedWebhookRegistrationServiceHandler{}, opts,
			connect.WithInterceptors(unavailable("webhooks are not served here: set HANGAR_SEAL_KEYSET and give the API Pub/Sub"))))
	}
	return a
}

// signIn serves /api/auth (functions/signin) and lets the interceptor take its session cookies.
// Its routes go with ApiKeyService's function: `hangar login` ends in a new API key. The
// OAuth callback page of OAuthCredentialService's redirect flows is not among them: that service
// mounts it as a route of its own, a.routes["GET "+httpapi.OAuthCallbackPath], and finds the
// signed-in person with a.authn.AuthenticateHTTP(r, auth.Callback).
func (a *API) signIn(d Deps, secretStore *secrets.Store) {
	sessions := auth.NewWebSessions(d.DB, a.authn)
	a.authn.AcceptSessions(sessions, signin.PublicOrigins(d.Config.SignIn))
	sd := signin.Deps{
		DB: d.DB, Authn: a.authn, Sessions: sessions, Users: a.users, Keys: a.keys,
		Config: d.Config.SignIn, Clock: d.Clock, Log: d.Log, Egress: d.Config.Egress, LoopbackHTTP: d.LoopbackProviders,
	}
	if secretStore != nil {
		sd.Secrets = secretStore
	}
	svc := signin.New(sd)
	for pattern, h := range svc.Routes() {
		a.routes[pattern] = route{appv1connect.ApiKeyServiceName, h}
	}
	if a.worker != nil {
		a.worker.AlsoTick(svc.Sweep) // expired sign-in records and sessions go
	}
}

// oauth wires OAuthCredentialService over the credential store and its provider registry, and
// its callback route; a registry HANGAR_OAUTH_PROVIDERS cannot build leaves the service
// unavailable, saying why.
func (a *API) oauth(d Deps, opts connect.HandlerOption, add func(string, http.Handler), secretStore *secrets.Store, credStore *credentials.Store) *oauthcreds.Service {
	providers, err := oauthcreds.NewRegistry(d.Config.OAuthProviders)
	if err != nil {
		d.Log.Error("oauth providers", "err", err)
		add(appv1connect.NewOAuthCredentialServiceHandler(appv1connect.UnimplementedOAuthCredentialServiceHandler{}, opts,
			connect.WithInterceptors(unavailable(err.Error()))))
		return nil
	}
	svc := oauthcreds.New(oauthcreds.Deps{
		Store: credStore, Flows: credentials.NewFlows(d.DB, d.Clock.Now), Secrets: secretStore,
		Sessions: sessiondb.NewStore(d.DB, d.Clock.Now), Sealer: d.Sealer, Providers: providers,
		Egress: d.Config.Egress, LoopbackHTTP: d.LoopbackProviders, Clock: d.Clock, Log: d.Log,
	})
	add(appv1connect.NewOAuthCredentialServiceHandler(svc, opts))
	a.routes["GET "+httpapi.OAuthCallbackPath] = route{appv1connect.OAuthCredentialServiceName, svc.Callback(func(r *http.Request) (auth.Principal, error) {
		// A browser comes back signed in by its session cookie, sent on by the provider's site
		// (auth.Callback: no Origin to check); the flow's state binds the code to the subject
		// that began it, which is what stops a forged callback.
		return a.authn.AuthenticateHTTP(r, auth.Callback)
	})}
	return svc
}

// oauthSandboxHosts is the provider registry's SandboxHosts, for sessions to keep access
// tokens out of sandboxes. When HANGAR_OAUTH_PROVIDERS does not build (OAuthCredentialService
// then says why), the built-ins still keep their providers' tokens out.
func oauthSandboxHosts(configured string) func(string) (string, []string, bool) {
	providers, err := oauthcreds.NewRegistry(configured)
	if err != nil {
		providers, _ = oauthcreds.NewRegistry("")
	}
	return providers.SandboxHosts
}

// Keys is the API key store (used to bootstrap the first admin key).
func (a *API) Keys() *auth.Keys { return a.keys }

// Users is the user directory.
func (a *API) Users() *auth.Users { return a.users }

// Authenticator verifies keys, for plain HTTP routes outside Connect.
func (a *API) Authenticator() *auth.Authenticator { return a.authn }

// ServiceNames lists the fully qualified names of the served services, sorted.
func (a *API) ServiceNames() []string {
	names := make([]string, 0, len(a.services))
	for n := range a.services {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Handler serves every service under httpapi.RPCPrefix, GET /healthz (alive), GET /readyz
// (Firestore and Pub/Sub reachable), and the dashboard at every other path, each request with
// its id, trace and panic recovery (telemetry.Middleware).
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	for name, h := range a.services {
		mount(mux, name, h)
	}
	for pattern, r := range a.routes {
		mux.Handle(pattern, r.h)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.Handle("GET /readyz", telemetry.Ready(a.log, a.ready))
	mux.Handle("/", web.Handler())
	return telemetry.Middleware(a.log, a.appHosts.in("", mux))
}

// ServiceHandler serves one service, for its own Cloud Run function. It answers both under
// httpapi.RPCPrefix (behind the load balancer that routes /rpc/svc.app.v1.<Service>/* to it) and at
// the bare path (the function's own URL), and serves the service's plain HTTP routes.
func (a *API) ServiceHandler(name string) (http.Handler, bool) {
	h, ok := a.services[name]
	if !ok {
		return nil, false
	}
	mux := http.NewServeMux()
	mount(mux, name, h)
	mux.Handle("/"+name+"/", h)
	for pattern, r := range a.routes {
		if r.service == name {
			mux.Handle(pattern, r.h)
		}
	}
	return a.appHosts.in(name, mux), true
}

// route is a plain HTTP route outside Connect, served by its service's function.
type route struct {
	service string
	h       http.Handler
}

func mount(mux *http.ServeMux, name string, h http.Handler) {
	mux.Handle(httpapi.RPCPrefix+"/"+name+"/", http.StripPrefix(httpapi.RPCPrefix, h))
}

// unavailable answers every call of a service that cannot run with why.
func unavailable(why string) connect.Interceptor {
	err := connect.NewError(connect.CodeUnavailable, errors.New(why))
	return &refuse{err: err}
}

type refuse struct{ err error }

func (r *refuse) WrapUnary(connect.UnaryFunc) connect.UnaryFunc {
	return func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) { return nil, r.err }
}

func (r *refuse) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (r *refuse) WrapStreamingHandler(connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(context.Context, connect.StreamingHandlerConn) error { return r.err }
}

// fleetSessions lets FleetService resume the sessions it moves off a host.
type fleetSessions struct{ svc *sessions.Service }

func (f fleetSessions) Relocate(ctx context.Context, id string) (string, error) {
	host, _, err := f.svc.Relocate(ctx, id)
	return host, err
}

// taskSessions lets tasks run in sessions, calling SessionService in process with the caller's
// identity, so a task's session is its creator's (sessions.Service.StartForTask reads the
// profile's secrets, mints their placeholders and has the host clone the repos).
type taskSessions struct{ svc *sessions.Service }

func (t taskSessions) Start(ctx context.Context, spec tasks.SessionSpec) (string, error) {
	checkouts := make([]sessions.Checkout, len(spec.Checkouts))
	for i, c := range spec.Checkouts {
		checkouts[i] = sessions.Checkout(c)
	}
	return t.svc.StartForTask(ctx, sessions.TaskSession{
		Key: spec.Key, Image: spec.Image, Harness: spec.Harness, HarnessMode: spec.HarnessMode, Prompt: spec.Prompt,
		Model: spec.Model, Effort: spec.Effort, ModelRouter: spec.ModelRouter, Env: spec.Env, SecretRefs: spec.SecretRefs,
		ProfileID: spec.ProfileID, Network: sessions.TaskNetwork(spec.Network), Repos: spec.Repos, Checkouts: checkouts,
		ProxySecrets: spec.ProxySecrets, Apps: spec.Apps, IncludeUserTokens: spec.IncludeUserTokens,
		ProfileOwner: spec.ProfileOwner,
	})
}

func (t taskSessions) Sessions(ctx context.Context, ids []string) (map[string]*appv1.Session, error) {
	return t.svc.Records(ctx, ids)
}

func (t taskSessions) SyncTask(ctx context.Context, id string) error { return t.svc.SyncTask(ctx, id) }

func (t taskSessions) Delete(ctx context.Context, id string) error {
	_, err := t.svc.DeleteSession(ctx, connect.NewRequest(&appv1.DeleteSessionRequest{SessionId: id}))
	if connect.CodeOf(err) == connect.CodeNotFound {
		return nil
	}
	return err
}
