// Package hangar is the Cloud Run functions entry point: one HTTP function per public service,
// registered with the Functions Framework for Go. `make deploy` deploys each from this module
// with --entry-point set to the service's short name (TaskService, ProfileService, …); the
// functions themselves are the same handlers `hangar dev` serves on one mux.
package hangar

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"

	"github.com/hangar-dev/hangar/functions/api"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/pubsub"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/platform/store"
)

// deployed lists the services deployed as functions; each is registered under its short name.
var deployed = []string{
	"svc.app.v1.TaskService",
	"svc.app.v1.SessionService",
	"svc.app.v1.ProfileService",
	"svc.app.v1.ImageService",
	"svc.app.v1.HarnessCatalogService",
	"svc.app.v1.ModelRouterService",
	"svc.app.v1.ReviewService",
	"svc.app.v1.AutomationService",
	"svc.app.v1.AutomationRunService",
	"svc.app.v1.OAuthCredentialService",
	"svc.app.v1.ApiKeyService",
	"svc.app.v1.OrgSecretService",
	// Also serves POST /api/v1/webhooks/{id}, the inbound route its registrations' senders use.
	"svc.app.v1.WebhookRegistrationService",
}

func init() {
	for _, name := range deployed {
		functions.HTTP(strings.TrimPrefix(name, "svc.app.v1."), serve(name))
	}
	functions.HTTP("AutomationWorker", automationWorker)
}

// automationWorker is the function Pub/Sub pushes automation deliveries and run steps to, and
// Cloud Scheduler ticks each minute (automationworker's paths).
func automationWorker(w http.ResponseWriter, r *http.Request) {
	a, err := assemble()
	if err != nil || a.AutomationWorker() == nil {
		slog.Error("assemble automation worker", "err", err)
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	mux := http.NewServeMux()
	for pattern, h := range a.AutomationWorker().Routes() {
		mux.Handle(pattern, h)
	}
	mux.ServeHTTP(w, r)
}

// assemble builds the API once per instance, on the first request rather than at start-up, so
// a cold start that only serves health checks opens nothing.
var assemble = sync.OnceValues(func() (*api.API, error) {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	cfg, err := config.FromEnv()
	if err != nil {
		return nil, err
	}
	db, err := store.Open(context.Background(), cfg.Project)
	if err != nil {
		return nil, err
	}
	d := api.Deps{DB: db, Config: cfg, Log: log, BehindProxy: true}
	// Webhooks and automation runs need Pub/Sub: without it they answer unavailable and the
	// rest serves.
	if d.PubSub, err = pubsub.Open(context.Background(), cfg.Project); err != nil {
		log.Error("open pubsub", "err", err)
	}
	if len(cfg.SealKeyset) > 0 {
		// Org secrets and OAuth credentials are kept only sealed.
		if d.Sealer, err = seal.FromKeysetJSON(cfg.SealKeyset); err != nil {
			return nil, err
		}
	}
	return api.New(d), nil
})

func serve(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, err := assemble()
		if err != nil {
			slog.Error("assemble api", "err", err)
			http.Error(w, "service unavailable", http.StatusServiceUnavailable)
			return
		}
		h, ok := a.ServiceHandler(name)
		if !ok {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}
}
