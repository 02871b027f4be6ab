package composition

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/telemetry"
	"github.com/hangar-dev/hangar/web"
)

// Function is one Cloud Run function: the Functions Framework entry point functions.go
// registers and `make deploy` deploys.
type Function struct {
	// EntryPoint is the function's --entry-point: a service's short name, or AutomationWorker.
	EntryPoint string
	// Service is the fully qualified service it serves; "" for the automation worker.
	Service string
	// Public functions authenticate callers themselves (--allow-unauthenticated); the others
	// take only Google-signed OIDC tokens (Pub/Sub push, Cloud Scheduler).
	Public bool
}

// Name is the function's Cloud Run name: hangar-task-service for TaskService.
func (f Function) Name() string {
	return "hangar-" + strings.ToLower(wordBoundary.ReplaceAllString(f.EntryPoint, "$1-$2"))
}

var wordBoundary = regexp.MustCompile(`([a-z])([A-Z])`)

// NotBuilt are the public services whose every method still answers unimplemented: routed by
// `hangar dev` so clients learn so, but not deployed, since a function that can only refuse
// costs a deployment and promises an API that is not there. Every service is built now; a new
// one added to proto/ goes here until it does something.
var NotBuilt []string

// Functions lists every Cloud Run function: one per built public service, and the automation
// worker. It is the one list: functions.go registers it, `hangar functions` prints it for
// `make deploy`.
func Functions() []Function {
	services := []string{
		appv1connect.TaskServiceName,
		appv1connect.SessionServiceName,
		appv1connect.ProfileServiceName,
		appv1connect.HarnessCatalogServiceName,
		appv1connect.ModelRouterServiceName,
		appv1connect.AutomationServiceName,
		appv1connect.AutomationRunServiceName,
		// Also serves GET /api/auth/oauth/callback, where redirect flows' providers send browsers.
		appv1connect.OAuthCredentialServiceName,
		appv1connect.ApiKeyServiceName,
		appv1connect.OrgSecretServiceName,
		appv1connect.ImageServiceName,
		appv1connect.FleetServiceName,
		appv1connect.ReviewServiceName,
		// Also serves POST /api/v1/webhooks/{id}, the inbound route its registrations' senders use.
		appv1connect.WebhookRegistrationServiceName,
	}
	fns := make([]Function, 0, len(services)+1)
	for _, s := range services {
		fns = append(fns, Function{EntryPoint: s[strings.LastIndex(s, ".")+1:], Service: s, Public: true})
	}
	// Pub/Sub pushes automation deliveries and run steps to it; Cloud Scheduler ticks it.
	return append(fns, Function{EntryPoint: "AutomationWorker"}, Dashboard)
}

// Dashboard is the web app's function: the load balancer's default route (everything but
// /rpc/… and /api/…) goes to it. It serves only the embedded static files, so it opens nothing.
var Dashboard = Function{EntryPoint: "Dashboard", Public: true}

// Instance is the API of one Cloud Run instance, opened on its first request rather than at
// start-up, so a cold start that only answers health checks opens nothing. A failed open is not
// kept: the next request tries again, so a Firestore that was briefly unreachable at start
// does not leave the instance refusing everything for its lifetime.
type Instance struct {
	open   func(context.Context) (*API, error)
	log    *slog.Logger
	mu     sync.Mutex // one open at a time; the requests that wait share its result
	opened atomic.Pointer[API]
}

// NewInstance is an Instance that opens its API with open, logging failures to log (nil:
// slog.Default).
func NewInstance(open func(context.Context) (*API, error), log *slog.Logger) *Instance {
	if log == nil {
		log = slog.Default()
	}
	return &Instance{open: open, log: log}
}

// API opens the API unless it is open already.
func (i *Instance) API(ctx context.Context) (*API, error) {
	if a := i.opened.Load(); a != nil {
		return a, nil
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if a := i.opened.Load(); a != nil {
		return a, nil
	}
	// What is opened outlives the request that opens it.
	a, err := i.open(context.WithoutCancel(ctx))
	if err != nil {
		return nil, err
	}
	i.opened.Store(a)
	return a, nil
}

// Handler serves fn: its service on both paths (see ServiceHandler) and its plain routes, or
// the automation worker's routes, each request with its id, trace and panic recovery
// (telemetry.Middleware).
func (i *Instance) Handler(fn Function) http.HandlerFunc {
	if fn == Dashboard {
		return web.Handler().ServeHTTP
	}
	// The middleware wraps the function once, not per request: its instruments are made once.
	return telemetry.Middleware(i.log, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := i.API(r.Context())
		if err != nil {
			i.log.Error("open the api", "function", fn.EntryPoint, "err", err)
			http.Error(w, "service unavailable", http.StatusServiceUnavailable)
			return
		}
		h, ok := a.FunctionHandler(fn)
		if !ok {
			http.Error(w, fn.EntryPoint+" is not served here", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})).ServeHTTP
}

// FunctionHandler is what fn serves; false when this API cannot serve it (the automation
// worker without Pub/Sub).
func (a *API) FunctionHandler(fn Function) (http.Handler, bool) {
	if fn.Service != "" {
		return a.ServiceHandler(fn.Service)
	}
	if a.worker == nil {
		return nil, false
	}
	mux := http.NewServeMux()
	for pattern, h := range a.worker.Routes() {
		mux.Handle(pattern, h)
	}
	if a.imageWorker != nil { // image enable jobs ride on the same worker function
		for pattern, h := range a.imageWorker.Routes() {
			mux.Handle(pattern, h)
		}
	}
	return mux, true
}
