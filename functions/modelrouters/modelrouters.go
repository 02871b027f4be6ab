// Package modelrouters serves ModelRouterService: the model routers the deployment configures
// (config.ModelRouter) and the model catalog Hangar keeps of each in Firestore.
//
// A refresh reads the router's OpenRouter-shaped catalog (GET <base_url>/models) and upserts one
// record per model under model_routers/{router}/models/{escaped model id}. What the upstream says
// is replaced whole; admin policy (enabled, user_enabled) is never touched by a refresh. Models
// the upstream stops listing stay, marked unavailable, so that their policy survives a transient
// disappearance. A new model arrives disabled for everyone: routers add models by the dozen, with
// prices and data policies an operator should see before any session can spend money on them.
//
// Audiences: USER sees models that are enabled, user_enabled and available; PROGRAMMATIC (API
// keys, automations) those enabled and available; ADMIN_CATALOG, for admins only, every model.
package modelrouters

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/opt"
	"github.com/hangar-dev/hangar/platform/store"
)

const (
	routersCollection = "model_routers"
	modelsCollection  = "models"
)

// Credentials holds the secrets routers' credential_secret references name (the org secret
// store): Exists says whether one is there without opening it, Lookup opens it (ok false when
// there is none).
type Credentials interface {
	Exists(ctx context.Context, ref string) (bool, error)
	Lookup(ctx context.Context, ref string) (secret string, ok bool, err error)
}

// Service implements ModelRouterService. Every caller may list routers and the models of their
// audience; refreshing and changing policy is for admins.
type Service struct {
	db      *firestore.Client
	clock   clock.Clock
	routers []config.ModelRouter
	creds   Credentials
	fetch   *fetcher
}

var _ appv1connect.ModelRouterServiceHandler = (*Service)(nil)

// New returns the service over the routers cfg configures. creds may be nil: routers are then
// called without a credential and report credential_configured false.
func New(db *firestore.Client, c clock.Clock, cfg config.Config, creds Credentials) *Service {
	return &Service{db: db, clock: c, routers: cfg.ModelRouters, creds: creds, fetch: newFetcher(cfg)}
}

// ListModelRouters lists the configured routers in configuration order, with their sync state
// and model counts.
func (s *Service) ListModelRouters(ctx context.Context, _ *connect.Request[emptypb.Empty]) (*connect.Response[appv1.ListModelRoutersResponse], error) {
	out := make([]*appv1.ModelRouter, len(s.routers))
	for i, r := range s.routers {
		p, err := s.describe(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("describe model router %s: %w", r.ID, err)
		}
		out[i] = p
	}
	return connect.NewResponse(&appv1.ListModelRoutersResponse{Routers: out}), nil
}

func (s *Service) describe(ctx context.Context, r config.ModelRouter) (*appv1.ModelRouter, error) {
	var st routerState
	snap, err := s.routerDoc(r.ID).Get(ctx)
	switch {
	case store.IsNotFound(err):
	case err != nil:
		return nil, err
	default:
		if err := snap.DataTo(&st); err != nil {
			return nil, err
		}
	}
	configured := false
	if r.CredentialSecret != "" && s.creds != nil {
		if configured, err = s.creds.Exists(ctx, r.CredentialSecret); err != nil {
			return nil, err
		}
	}
	models := s.models(r.ID).Query
	var counts [3]int64
	for i, q := range []firestore.Query{models, models.Where("available", "==", true), models.Where("enabled", "==", true)} {
		if counts[i], err = store.Count(ctx, q, nil); err != nil {
			return nil, err
		}
	}
	return &appv1.ModelRouter{
		Id: r.ID, Label: r.Label, Description: r.Description,
		Protocols: r.Protocols, CredentialSecret: r.CredentialSecret, EgressHosts: r.EgressHosts,
		CredentialConfigured: configured,
		LastSuccessfulSyncAt: clock.FormatPtr(st.LastSuccessfulSyncAt),
		LastSyncError:        opt.String(st.LastSyncError),
		ModelCount:           uint32(counts[0]), AvailableModelCount: uint32(counts[1]), EnabledModelCount: uint32(counts[2]),
		DefaultModel: r.DefaultModel,
	}, nil
}

// ListRouterModels lists a router's models for an audience (USER when unspecified), sorted by id.
func (s *Service) ListRouterModels(ctx context.Context, req *connect.Request[appv1.ListRouterModelsRequest]) (*connect.Response[appv1.ListRouterModelsResponse], error) {
	shown, err := audienceFilter(ctx, req.Msg.GetAudience())
	if err != nil {
		return nil, err
	}
	r, err := s.router(req.Msg.GetRouterId())
	if err != nil {
		return nil, err
	}
	recs, err := store.All[modelRecord](s.models(r.ID).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list models of router %s: %w", r.ID, err)
	}
	search := strings.ToLower(strings.TrimSpace(req.Msg.GetSearch()))
	out := []*appv1.RouterModel{}
	for _, m := range recs {
		if shown(m) && m.matches(search) {
			out = append(out, m.proto())
		}
	}
	slices.SortFunc(out, func(a, b *appv1.RouterModel) int { return cmp.Compare(a.GetId(), b.GetId()) })
	return connect.NewResponse(&appv1.ListRouterModelsResponse{Models: out}), nil
}

func audienceFilter(ctx context.Context, a appv1.RouterModelAudience) (func(modelRecord) bool, error) {
	switch a {
	case appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_UNSPECIFIED, appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_USER:
		return func(m modelRecord) bool { return m.Enabled && m.UserEnabled && m.Available }, nil
	case appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_PROGRAMMATIC:
		return func(m modelRecord) bool { return m.Enabled && m.Available }, nil
	case appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_ADMIN_CATALOG:
		if err := requireAdmin(ctx, "see the whole model catalog"); err != nil {
			return nil, err
		}
		return func(modelRecord) bool { return true }, nil
	}
	return nil, apierr.InvalidArgument("audience", fmt.Sprintf("unknown audience %d", a))
}

// RefreshRouterModels reads the router's catalog and brings its model records up to date.
// discovered counts models seen for the first time, available the models the router lists now,
// marked_unavailable those it listed before and no longer does. Whatever the outcome, it is
// recorded on the router (last_successful_sync_at or last_sync_error).
func (s *Service) RefreshRouterModels(ctx context.Context, req *connect.Request[appv1.RefreshRouterModelsRequest]) (*connect.Response[appv1.RefreshRouterModelsResponse], error) {
	if err := requireAdmin(ctx, "refresh model catalogs"); err != nil {
		return nil, err
	}
	r, err := s.router(req.Msg.GetRouterId())
	if err != nil {
		return nil, err
	}
	counts, syncErr := s.sync(ctx, r)
	if err := s.recordSync(ctx, r.ID, syncErr); err != nil {
		return nil, errors.Join(syncErr, fmt.Errorf("record sync of router %s: %w", r.ID, err))
	}
	if syncErr != nil {
		return nil, syncErr
	}
	return connect.NewResponse(counts), nil
}

// sync fetches and stores r's catalog. Upstream failures come back as unavailable errors whose
// message is the reason, the same text recordSync keeps.
func (s *Service) sync(ctx context.Context, r config.ModelRouter) (*appv1.RefreshRouterModelsResponse, error) {
	secret, _, err := s.secret(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("read credential %s: %w", r.CredentialSecret, err)
	}
	listed, err := s.fetch.fetch(ctx, r, secret)
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("refresh router %s: %w", r.ID, err))
	}
	known, err := store.All[modelRecord](s.models(r.ID).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("read models of router %s: %w", r.ID, err)
	}
	byID := make(map[string]modelRecord, len(known))
	for _, m := range known {
		byID[m.ID] = m
	}
	now := s.clock.Now()
	res := &appv1.RefreshRouterModelsResponse{}
	bw := s.db.BulkWriter(ctx)
	var jobs []*firestore.BulkWriterJob
	write := func(j *firestore.BulkWriterJob, err error) {
		if err == nil {
			jobs = append(jobs, j)
		}
	}
	seen := make(map[string]bool, len(listed))
	for _, m := range listed {
		if !modelIDPattern.MatchString(m.ID) || seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		res.Available++
		entry := m.entry(r)
		cur, exists := byID[m.ID]
		switch {
		case !exists:
			res.Discovered++
			write(bw.Create(s.modelDoc(r.ID, m.ID), modelRecord{RouterID: r.ID, ID: m.ID, Catalog: entry, Available: true, UpdatedAt: now}))
		case !cur.Available || !cur.Catalog.same(entry):
			write(bw.Update(s.modelDoc(r.ID, m.ID), []firestore.Update{
				{Path: "catalog", Value: entry}, {Path: "available", Value: true}, {Path: "updated_at", Value: now},
			}))
		}
	}
	for _, m := range known {
		if m.Available && !seen[m.ID] {
			res.MarkedUnavailable++
			write(bw.Update(s.modelDoc(r.ID, m.ID), []firestore.Update{{Path: "available", Value: false}, {Path: "updated_at", Value: now}}))
		}
	}
	bw.End()
	for _, j := range jobs {
		if _, err := j.Results(); err != nil {
			return nil, fmt.Errorf("store models of router %s: %w", r.ID, err)
		}
	}
	return res, nil
}

// recordSync keeps the outcome of a refresh on the router's state document.
func (s *Service) recordSync(ctx context.Context, id string, syncErr error) error {
	now := s.clock.Now()
	fields := map[string]any{"last_sync_attempt_at": now, "last_sync_error": ""}
	if syncErr != nil {
		fields["last_sync_error"] = errorText(syncErr)
	} else {
		fields["last_successful_sync_at"] = now
	}
	// A failed refresh may have been cut short by its caller; its outcome is still worth keeping.
	_, err := s.routerDoc(id).Set(context.WithoutCancel(ctx), fields, firestore.MergeAll)
	return err
}

// errorText is what an admin reads of a failed refresh: the Connect message, without the code.
func errorText(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}

// UpdateRouterModelPolicy sets who may use one model of a router. The USER audience needs both
// flags, so user_enabled without enabled is kept but has no effect until enabled is set too.
func (s *Service) UpdateRouterModelPolicy(ctx context.Context, req *connect.Request[appv1.UpdateRouterModelPolicyRequest]) (*connect.Response[appv1.UpdateRouterModelPolicyResponse], error) {
	if err := requireAdmin(ctx, "change model policy"); err != nil {
		return nil, err
	}
	// The model's document id is its escaped id (modelDoc).
	if err := ids.Check("model_id", url.PathEscape(req.Msg.GetModelId())); err != nil {
		return nil, err
	}
	r, err := s.router(req.Msg.GetRouterId())
	if err != nil {
		return nil, err
	}
	id := req.Msg.GetModelId()
	var rec modelRecord
	err = s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		ref := s.modelDoc(r.ID, id)
		snap, err := tx.Get(ref)
		if store.IsNotFound(err) {
			return apierr.NotFound("model", id)
		}
		if err != nil {
			return err
		}
		if err := snap.DataTo(&rec); err != nil {
			return err
		}
		rec.Enabled, rec.UserEnabled, rec.UpdatedAt = req.Msg.GetEnabled(), req.Msg.GetUserEnabled(), s.clock.Now()
		return tx.Update(ref, []firestore.Update{
			{Path: "enabled", Value: rec.Enabled}, {Path: "user_enabled", Value: rec.UserEnabled}, {Path: "updated_at", Value: rec.UpdatedAt},
		})
	})
	if err != nil {
		return nil, fmt.Errorf("update policy of model %s of router %s: %w", id, r.ID, err)
	}
	return connect.NewResponse(&appv1.UpdateRouterModelPolicyResponse{Model: rec.proto()}), nil
}

// Policy is what the catalog says of one model of a router: whether it has the model at all,
// and the model's admin policy and availability.
type Policy struct {
	Found, Enabled, UserEnabled, Available bool
}

// ModelPolicy reads the policy of model in router's catalog (Found false: the catalog has no
// such model, which is as good as disabled: new models arrive disabled).
func (s *Service) ModelPolicy(ctx context.Context, router, model string) (Policy, error) {
	snap, err := s.modelDoc(router, model).Get(ctx)
	if store.IsNotFound(err) {
		return Policy{}, nil
	}
	if err != nil {
		return Policy{}, fmt.Errorf("read model %s of router %s: %w", model, router, err)
	}
	var rec modelRecord
	if err := snap.DataTo(&rec); err != nil {
		return Policy{}, fmt.Errorf("read model %s of router %s: %w", model, router, err)
	}
	return Policy{Found: true, Enabled: rec.Enabled, UserEnabled: rec.UserEnabled, Available: rec.Available}, nil
}

func (s *Service) router(id string) (config.ModelRouter, error) {
	if id == "" {
		return config.ModelRouter{}, apierr.InvalidArgument("router_id", "is required")
	}
	for _, r := range s.routers {
		if r.ID == id {
			return r, nil
		}
	}
	return config.ModelRouter{}, apierr.NotFound("model router", id)
}

func (s *Service) secret(ctx context.Context, r config.ModelRouter) (string, bool, error) {
	if r.CredentialSecret == "" || s.creds == nil {
		return "", false, nil
	}
	return s.creds.Lookup(ctx, r.CredentialSecret)
}

func requireAdmin(ctx context.Context, what string) error {
	if p, _ := auth.Caller(ctx); !p.Admin {
		return apierr.PermissionDenied("only admins may %s", what)
	}
	return nil
}

func (s *Service) routerDoc(id string) *firestore.DocumentRef {
	return s.db.Collection(routersCollection).Doc(id)
}

func (s *Service) models(router string) *firestore.CollectionRef {
	return s.routerDoc(router).Collection(modelsCollection)
}

// modelDoc escapes the model id, whose slashes Firestore would read as path separators.
func (s *Service) modelDoc(router, model string) *firestore.DocumentRef {
	return s.models(router).Doc(url.PathEscape(model))
}
