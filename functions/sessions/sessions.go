// Package sessions is SessionService: sandboxed agent sessions as their owners see them. It owns
// who may touch a session and what a request may ask; the work inside a sandbox happens on the
// session's host, which this package finds through the fleet and calls over the host API,
// passing streams through. Events and checkpoints are read straight from Firestore, so they stay
// readable while a session is evicted or its host is gone.
package sessions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	"github.com/hangar-dev/hangar/gen/host/v1/hostv1connect"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/harnesscatalog"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/records/credentials"
	"github.com/hangar-dev/hangar/records/eventlog"
	"github.com/hangar-dev/hangar/records/secrets"
	"github.com/hangar-dev/hangar/records/sessiondb"
	"github.com/hangar-dev/hangar/sandboxhosts/hostclient"
	"github.com/hangar-dev/hangar/sandboxhosts/snapshots"
)

// Session modes. A sandbox session is a bare sandbox driven by exec and file calls; an agent
// session also runs a harness on prompts (the harness work of a later issue).
const (
	ModeSandbox = "sandbox"
	ModeAgent   = "agent"
)

// DefaultHarness runs an agent session's prompts when it names no harness: it needs no model,
// so an agent session works offline.
const DefaultHarness = "bash"

// agentChoice is what CreateSession makes of a request's harness fields.
type agentChoice struct {
	harness string
	router  *config.ModelRouter
	env     map[string]string // the router's variables for the harness
	// oauth is the OAuth provider whose bundle the harness takes (nil: none).
	oauth *abi.OAuth
	// network is what the harness and its router need to reach, and the router's key, which
	// the sandbox holds only as a placeholder.
	network *hostv1.SandboxNetwork
}

// chooseAgent checks the harness fields of m against the harness's descriptor, reporting bad
// ones in v. A router the harness speaks no protocol of is failed_precondition, for the
// caller to answer once the request is otherwise valid. The harness's egress opens in the
// session's network only where egressFor, who decides that network, may open it
// (harnesscatalog.Entry.EgressAppliesFor); elsewhere the session runs without it.
func (s *Service) chooseAgent(ctx context.Context, m *appv1.CreateSessionRequest, v *apierr.Violations, egressFor string) (agentChoice, error) {
	c := agentChoice{harness: m.GetHarness()}
	if c.harness == "" && (m.GetMode() == ModeAgent || m.Prompt != nil) {
		c.harness = DefaultHarness
	}
	if c.harness == "" {
		if m.HarnessMode != nil {
			v.Add("harness_mode", "needs a harness")
		}
		if m.Model != nil || m.Effort != nil || m.ModelRouter != nil {
			v.Add("model", "model, effort and model_router need a harness")
		}
		return c, nil
	}
	if m.GetMode() == ModeSandbox {
		v.Add("mode", "a sandbox session runs no harness: use mode agent, or leave mode empty")
	}
	if s.d.Harnesses == nil {
		v.Add("harness", "this deployment has no harness catalog")
		return c, nil
	}
	e, err := s.d.Harnesses.Get(ctx, c.harness)
	if err != nil {
		v.Addf("harness", "no harness %q: see ListHarnesses", c.harness)
		return c, nil
	}
	d := e.Descriptor
	c.network = &hostv1.SandboxNetwork{}
	if e.EgressAppliesFor(egressFor) {
		addEgress(c.network, d.Egress)
		addEgress(c.network, d.NativeEgress)
	}
	if d.Auth != nil {
		c.oauth = d.Auth.UserOAuth
	}
	if hm := m.GetHarnessMode(); hm != "" && !slices.ContainsFunc(d.Modes, func(x abi.Mode) bool { return x.ID == hm }) {
		v.Addf("harness_mode", "harness %s has no mode %q", c.harness, hm)
	}
	if ef := m.GetEffort(); ef != "" && !slices.ContainsFunc(d.Effort, func(o abi.Option) bool { return o.ID == ef }) {
		v.Addf("effort", "harness %s has no effort level %q", c.harness, ef)
	}
	name := m.GetModelRouter()
	if name == "" {
		// Without a router the model is one the harness offers; with one, the router's catalog's.
		if mo := m.GetModel(); mo != "" && !slices.ContainsFunc(d.Models, func(o abi.Option) bool { return o.ID == mo }) {
			ids := make([]string, len(d.Models))
			for i, o := range d.Models {
				ids[i] = o.ID
			}
			if len(ids) == 0 {
				v.Addf("model", "harness %s offers no model to choose (asked for %q)", c.harness, mo)
			} else {
				v.Addf("model", "harness %s offers no model %q (it offers %s), unless through a model_router", c.harness, mo, strings.Join(ids, ", "))
			}
		}
		return c, nil
	}
	if c.router = s.router(name); c.router == nil {
		v.Addf("model_router", "no model router %q: see ListModelRouters", name)
		return c, nil
	}
	proto := commonProtocol(d.RouterProtocols, c.router.Protocols)
	if proto == "" {
		return c, apierr.FailedPrecondition("harness %s speaks none of model router %s's protocols (%s)", c.harness, name, strings.Join(c.router.Protocols, ", "))
	}
	if err := s.checkRouterModel(ctx, c.router, cmp.Or(m.GetModel(), c.router.DefaultModel)); err != nil {
		return c, err
	}
	key, err := s.routerKey(ctx, c.router)
	if err != nil {
		return c, err
	}
	hosts := routerHosts(c.router)
	c.network.AllowHosts = append(c.network.AllowHosts, hosts...)
	if key != "" {
		// The harness sees a placeholder; the egress proxy swaps in the key on the way to the router.
		placeholder := NewPlaceholder()
		c.network.Secrets = append(c.network.Secrets, &hostv1.ProxySecret{
			Name: c.router.CredentialSecret, Placeholder: placeholder, Value: key, AllowHosts: hosts,
			Slots: BearerSlots(),
		})
		key = placeholder
	}
	c.env = routerEnv(c.router, proto, cmp.Or(m.GetModel(), c.router.DefaultModel), key)
	return c, nil
}

// RouterModel is what a router's catalog says of one model: whether it has it, its admin policy
// (enabled: for anyone; user_enabled: for users too, not only service accounts) and whether the
// router still lists it.
type RouterModel struct {
	Found, Enabled, UserEnabled, Available bool
}

// checkRouterModel refuses a session's model (its own or its router's default) that the
// router's catalog does not have (invalid_argument), or that its policy does not let the caller
// use (failed_precondition: an admin enables it), as ListRouterModels shows users and service
// accounts theirs.
func (s *Service) checkRouterModel(ctx context.Context, r *config.ModelRouter, model string) error {
	if model == "" || s.d.RouterModel == nil {
		return nil
	}
	pol, err := s.d.RouterModel(ctx, r.ID, model)
	if err != nil {
		return err
	}
	caller, _ := auth.Caller(ctx)
	switch {
	case !pol.Found:
		return apierr.InvalidArgument("model", fmt.Sprintf("model router %s has no model %q: see ListRouterModels", r.ID, model))
	case !pol.Available:
		return apierr.FailedPrecondition("model %q of model router %s is no longer in the router's catalog", model, r.ID)
	case !pol.Enabled:
		return apierr.FailedPrecondition("model %q of model router %s is disabled by the router's policy (enabled is off): an admin enables it with UpdateRouterModelPolicy", model, r.ID)
	case !pol.UserEnabled && caller.Kind != auth.KindServiceAccount:
		return apierr.FailedPrecondition("model %q of model router %s is not enabled for users by the router's policy (user_enabled is off): an admin enables it with UpdateRouterModelPolicy", model, r.ID)
	}
	return nil
}

// routerKey is the value of the router's credential secret ("" for a router that names none),
// for the caller: the key lands in the session's environment, where the caller can read it, so
// the secret's access policy must let the caller use it (permission_denied naming it
// otherwise). A named secret that does not exist is failed_precondition: the router would
// refuse the harness, and only an admin can fix it.
func (s *Service) routerKey(ctx context.Context, r *config.ModelRouter) (string, error) {
	if r.CredentialSecret == "" {
		return "", nil
	}
	if s.d.Secrets == nil {
		return "", apierr.FailedPrecondition("model router %s needs its credential secret %q, and this deployment keeps no org secrets", r.ID, r.CredentialSecret)
	}
	caller, _ := auth.Caller(ctx)
	key, err := s.d.Secrets.Use(ctx, secrets.SubjectOf(caller, ""), r.CredentialSecret)
	if err != nil {
		return "", fmt.Errorf("the credential of model router %s: %w", r.ID, err)
	}
	return key, nil
}

// router is the configured model router called name, or nil.
func (s *Service) router(name string) *config.ModelRouter {
	for i := range s.d.Routers {
		if s.d.Routers[i].ID == name {
			return &s.d.Routers[i]
		}
	}
	return nil
}

// commonProtocol is the first of the harness's router protocols the router speaks, or "".
func commonProtocol(harness, router []string) string {
	for _, p := range harness {
		if slices.Contains(router, p) {
			return p
		}
	}
	return ""
}

// routerEnv points a harness at a model router, with its key when it has one, in the variables
// its protocol's clients read. Anthropic's clients (Claude Code) send ANTHROPIC_AUTH_TOKEN as
// "Authorization: Bearer", what routers (OpenRouter, LiteLLM) take and RefreshRouterModels
// sends, while ANTHROPIC_API_KEY would go as x-api-key; so the key goes in the first and the
// second is emptied, so that an Anthropic key among the session's secrets is never sent to the
// router.
func routerEnv(r *config.ModelRouter, protocol, model, key string) map[string]string {
	env := map[string]string{"HANGAR_MODEL_ROUTER": r.ID, "HANGAR_MODEL_ROUTER_URL": r.BaseURL}
	switch {
	case protocol == "anthropic":
		env["ANTHROPIC_BASE_URL"] = r.BaseURL
		if model != "" {
			env["ANTHROPIC_MODEL"] = model
		}
		if key != "" {
			env["ANTHROPIC_AUTH_TOKEN"], env["ANTHROPIC_API_KEY"] = key, ""
		}
	case strings.HasPrefix(protocol, "openai"):
		env["OPENAI_BASE_URL"] = r.BaseURL
		if key != "" {
			env["OPENAI_API_KEY"] = key
		}
	}
	return env
}

// oauthBundle opens the OAuth credential a session asks for (nil: none), once the harness is
// known to take that provider's bundle and the caller to be allowed the subject's credentials,
// and mints the session's broker binding: the broker token goes into env (the sandbox's
// environment, sealed with the session's other secrets) with the session id, and only its hash
// into the record, so the token works while the session lives and reaches only its credential.
//
// When the provider's API hosts are known (Deps.OAuthHosts), the bundle answered is the
// sandbox's: its access token a placeholder, its refresh token gone, and the proxy secret
// that has the egress proxy inject the credential's current token for those hosts is added to
// network.
func (s *Service) oauthBundle(ctx context.Context, caller auth.Principal, agent agentChoice, b *appv1.OAuthCredentialBinding, id string, env map[string]string, network *hostv1.SandboxNetwork) (string, *sessiondb.Broker, error) {
	if b == nil {
		return "", nil, nil
	}
	provider := strings.TrimSpace(b.GetProvider())
	if agent.oauth == nil {
		return "", nil, apierr.FailedPrecondition("harness %s takes no OAuth credential (asked for %q)", agent.harness, provider)
	}
	if agent.oauth.Provider != provider {
		return "", nil, apierr.FailedPrecondition("harness %s takes an OAuth credential of provider %q, not %q", agent.harness, agent.oauth.Provider, provider)
	}
	if s.d.Credentials == nil {
		return "", nil, apierr.FailedPrecondition("this deployment keeps no OAuth credentials")
	}
	sub, err := credentials.SubjectOf(caller, b.GetSubject())
	if err != nil {
		return "", nil, err
	}
	bundle, _, err := s.d.Credentials.Bundle(ctx, sub, provider)
	if err != nil {
		return "", nil, err
	}
	token, broker, err := credentials.NewBroker(sub, provider)
	if err != nil {
		return "", nil, err
	}
	env[credentials.EnvBrokerToken], env[credentials.EnvSessionID] = token, id
	if s.d.OAuthHosts == nil {
		return bundle, broker, nil
	}
	format, hosts, ok := s.d.OAuthHosts(provider)
	if !ok {
		return bundle, broker, nil
	}
	placeholder := NewPlaceholder()
	sandboxed, ok := credentials.SandboxBundle(format, bundle, placeholder, s.d.Clock.Now())
	if !ok {
		return "", nil, apierr.FailedPrecondition("the %s credential of %s holds no access token Hangar can read in its %q format: sign in again", provider, sub, cmp.Or(format, credentials.BundleTokenJSON))
	}
	network.Secrets = append(network.Secrets, &hostv1.ProxySecret{
		Name: "oauth/" + provider, Placeholder: placeholder, AllowHosts: hosts, Slots: BearerSlots(),
		Credential: &hostv1.ProxyCredential{SubjectKind: sub.Kind, SubjectId: sub.ID, Provider: provider, BundleFormat: format},
	})
	broker.Proxied = true
	return sandboxed, broker, nil
}

// userTokens is the binding of a task's session to its creator's own credential of the
// provider the harness takes (a profile's include_user_tokens), nil when the harness takes none
// or the creator has none connected: the profile asks for the person's tokens where they exist.
func (s *Service) userTokens(ctx context.Context, caller auth.Principal, agent agentChoice) (*appv1.OAuthCredentialBinding, error) {
	if agent.oauth == nil || s.d.Credentials == nil {
		return nil, nil
	}
	me := credentials.Subject{Kind: credentials.KindUser, ID: caller.UserID}
	metas, err := s.d.Credentials.List(ctx, me)
	if err != nil {
		return nil, err
	}
	for _, m := range metas {
		if m.Provider == agent.oauth.Provider && m.Connected() {
			return &appv1.OAuthCredentialBinding{Subject: me.Proto(), Provider: m.Provider}, nil
		}
	}
	return nil, nil
}

// Kind is what CreateSessionResponse.kind says: the sandbox technology a session runs on.
const Kind = "runc"

// Deps are what the service runs on.
type Deps struct {
	DB     *firestore.Client
	Hosts  *hostclient.Pool
	Sealer *seal.Sealer
	Bucket *blob.Bucket
	Users  *auth.Users
	Clock  clock.Clock
	Limits config.Limits
	// DefaultImage is the image of a session created without image_uri ("" makes it required).
	DefaultImage string
	// Harnesses resolves the harness an agent session names.
	Harnesses *harnesscatalog.Catalog
	// Routers are the deployment's model routers; RouterModel reads the policy of one model of
	// a router's catalog (ModelRouterService's), which a session's model must pass.
	Routers     []config.ModelRouter
	RouterModel func(ctx context.Context, router, model string) (RouterModel, error)
	// Secrets holds the routers' keys; Credentials the OAuth credentials sessions may name.
	Secrets     *secrets.Store
	Credentials *credentials.Store
	// OAuthHosts says, for an OAuth provider, its bundles' format and the hosts its access
	// token may go to (ok false: unknown). A session's sandbox then holds the token only as a
	// placeholder the egress proxy swaps; nil, or ok false, gives the sandbox the real bundle.
	OAuthHosts func(provider string) (format string, hosts []string, ok bool)
	// Images resolves image_uri to an enabled image; nil takes image_uri as an OCI reference
	// the host pulls as it is.
	Images ImageResolver
	// Apps gives apps origins of their own under its domain; PublicURL is the API's, whose
	// scheme the apps' origins share.
	Apps      config.Apps
	PublicURL string
}

// ImageResolver finds the enabled image a session names (by id or uri): the reference by
// digest its host pulls or stages from chunks, its warm layer, and its config, read only: the
// environment it sets (under the session's own harness_env and secrets), and the working
// directory and resources that replace the image's own. An image that is not enabled is
// failed_precondition saying so.
type ImageResolver interface {
	ResolveImage(ctx context.Context, image string) (ref, warmLayer string, config *appv1.ImageConfig, err error)
}

// Service implements SessionService.
type Service struct {
	appv1connect.UnimplementedSessionServiceHandler
	d      Deps
	store  *sessiondb.Store
	events *eventlog.Reader
	snaps  *snapshots.Store
	recent recent
	// keyer derives the record ids of sessions created with a key (ids.go).
	keyer ids.Keyer
	// apps knows the apps' own origins (apporigins.go).
	apps appOrigins
}

// New returns the service over d.
func New(d Deps) *Service {
	return &Service{d: d, store: sessiondb.NewStore(d.DB, d.Clock.Now), events: eventlog.NewReader(d.DB),
		// Only manifests are touched here, never chunks, so no local chunk cache is needed.
		snaps: snapshots.NewStore(d.Bucket, "", snapshots.Options{}),
		keyer: ids.NewKeyer(d.Sealer.Derive(keyPurpose)),
		apps:  newAppOrigins(d.Apps, d.PublicURL, d.Sealer, d.Clock.Now)}
}

var (
	// A client-chosen session id: what ids.New makes for "sess", or any short slug a client
	// prefers, so that retries with the same id find the same session.
	requestedID = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{2,62}$`)
	envName     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// CreateSession places a new sandbox on a host and starts it. With requested_session_id a retry
// returns the session the first call made; the requested id is the caller's alone (ids.go).
func (s *Service) CreateSession(ctx context.Context, req *connect.Request[appv1.CreateSessionRequest]) (*connect.Response[appv1.CreateSessionResponse], error) {
	// A session of the caller's own has the network they decide: their own harnesses' egress
	// opens in it.
	caller, _ := auth.Caller(ctx)
	requested := req.Msg.GetRequestedSessionId()
	if requested == "" {
		return s.create(ctx, req.Msg, ids.New("sess"), "", nil, TaskStart{}, caller.UserID)
	}
	id := s.derivedID(caller.UserID, spaceRequested, requested)
	// A session created before requested ids were scoped has the id it requested as its record
	// id: its owner's retry finds it too.
	return s.create(ctx, req.Msg, id, requested, []string{id, requested}, TaskStart{}, caller.UserID)
}

// createForTask creates the session a task runs in, for the caller; m's requested_session_id is
// not used. With a key (the task's id) the session's id derives from the caller and key, so a
// retried start finds the session the first made; the answer's session_id is the record id
// either way. start holds the task's profile's egress (its network section, its repos' hosts and
// its proxy-mode secrets), added to what the harness and router need, and its repos, cloned at
// start.
func (s *Service) createForTask(ctx context.Context, m *appv1.CreateSessionRequest, key string, start TaskStart) (*connect.Response[appv1.CreateSessionResponse], error) {
	caller, _ := auth.Caller(ctx)
	if key == "" {
		return s.create(ctx, m, ids.New("sess"), "", nil, start, start.ProfileOwner)
	}
	id := s.derivedID(caller.UserID, spaceTask, key)
	return s.create(ctx, m, id, "", []string{id}, start, start.ProfileOwner)
}

// create is CreateSession of a session whose record id is id, requested by its owner as
// requested ("" when not), whose egress adds extra's to what its harness needs, the harness's
// own opening as egressFor (the user deciding the session's network: the profile's owner for a
// task's session, the caller for their own) allows. A retry answers the caller's session at
// the first of prior (record ids) that exists, without placing a sandbox.
func (s *Service) create(ctx context.Context, m *appv1.CreateSessionRequest, id, requested string, prior []string, extra TaskStart, egressFor string) (*connect.Response[appv1.CreateSessionResponse], error) {
	caller, _ := auth.Caller(ctx)
	var v apierr.Violations
	image := strings.TrimSpace(cmp.Or(m.GetImageUri(), s.d.DefaultImage))
	if image == "" {
		v.Add("image_uri", "is required")
	}
	mode := cmp.Or(m.GetMode(), ModeSandbox)
	if mode != ModeSandbox && mode != ModeAgent {
		v.Addf("mode", "must be %q or %q", ModeSandbox, ModeAgent)
	}
	if requested != "" && !requestedID.MatchString(requested) {
		v.Add("requested_session_id", "must be 3 to 63 lowercase letters, digits, '_' or '-'")
	}
	env, size := map[string]string{}, 0
	for _, f := range []struct {
		name string
		vars map[string]string
	}{{"harness_env", m.GetHarnessEnv()}, {"secrets", m.GetSecrets()}} {
		for k, val := range f.vars {
			if !envName.MatchString(k) {
				v.Addf(f.name, "%q is not an environment variable name", k)
			}
			env[k] = val
			size += len(k) + len(val)
		}
	}
	if size > s.d.Limits.MaxSessionEnvBytes {
		v.Addf("secrets", "secrets and harness_env hold %d bytes; at most %d", size, s.d.Limits.MaxSessionEnvBytes)
	}
	if m.Prompt != nil && m.GetPrompt() == "" {
		v.Add("prompt", "is empty")
	}
	apps := sessionApps(m.GetApps(), &v)
	agent, agentErr := s.chooseAgent(ctx, m, &v, egressFor)
	if agent.harness != "" {
		mode = ModeAgent
	}
	if m.GetOauthCredential() != nil && agent.harness == "" {
		v.Add("oauth_credential", "needs a harness")
	}
	maps.Copy(env, agent.env)
	if err := v.Err(); err != nil {
		return nil, err
	}
	if agentErr != nil {
		return nil, agentErr
	}
	for _, p := range prior {
		rec, err := s.store.Get(ctx, p)
		if err == nil && rec.Owner == caller.UserID {
			return existing(ctx, rec), nil
		}
		if err != nil && !errors.Is(err, sessiondb.ErrNotFound) {
			return nil, err
		}
	}
	binding := m.GetOauthCredential()
	if binding == nil && extra.UserTokens {
		var err error
		if binding, err = s.userTokens(ctx, caller, agent); err != nil {
			return nil, err
		}
	}
	network := MergeNetwork(agent.network, extra.Network)
	bundle, broker, err := s.oauthBundle(ctx, caller, agent, binding, id, env, network)
	if err != nil {
		return nil, err
	}
	warmLayer := ""
	var imageConfig *appv1.ImageConfig
	if s.d.Images != nil {
		if image, warmLayer, imageConfig, err = s.d.Images.ResolveImage(ctx, image); err != nil {
			return nil, err
		}
		for k, val := range imageConfig.GetEnv() {
			if _, set := env[k]; !set {
				env[k] = val
			}
		}
	}
	hosts, err := s.hostCandidates(ctx)
	if err != nil {
		return nil, err
	}
	sealed, err := s.d.Sealer.SealEnv(env, sessiondb.EnvOwner(id))
	if err != nil {
		return nil, err
	}
	sealedNet, err := sealNetwork(s.d.Sealer, id, network)
	if err != nil {
		return nil, err
	}
	var sealedCred []byte
	if bundle != "" {
		if sealedCred, err = s.d.Sealer.Seal([]byte(bundle), sessiondb.CredentialOwner(id)); err != nil {
			return nil, err
		}
	}
	rec := &sessiondb.Record{
		ID: id, Owner: caller.UserID, RequestedID: requested, Status: sessiondb.Creating, HostID: hosts[0].ID,
		ImageURI: image, WarmLayer: warmLayer, ImageWorkdir: imageConfig.GetWorkdir(), ImageResources: imageResources(imageConfig.GetResources()), Mode: mode, SealedEnv: sealed, SealedCredential: sealedCred, SealedNetwork: sealedNet, Broker: broker, Harness: agent.harness, HarnessMode: m.GetHarnessMode(),
		Model: m.GetModel(), Effort: m.GetEffort(), ModelRouter: m.GetModelRouter(), Apps: apps,
	}
	if agent.router != nil && rec.Model == "" {
		rec.Model = agent.router.DefaultModel
	}
	if len(extra.Repos) > 0 {
		rec.AgentWorkdir = path.Clean(extra.Repos[0].GetPath())
	}
	version, err := s.store.Create(ctx, rec, s.d.Limits.MaxSessionsPerUser)
	switch {
	case sessiondb.IsAlreadyExists(err):
		// A concurrent retry made it first. Its id derives from the caller, so it is theirs.
		first, err := s.store.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		return existing(ctx, first), nil
	case errors.Is(err, sessiondb.ErrLimit):
		return nil, s.overLimit(caller.UserID)
	case err != nil:
		return nil, err
	}
	create := &hostv1.CreateSandboxRequest{SessionId: id, Env: env, ImageUri: image, WarmLayer: warmLayer, Network: network, Repos: extra.Repos, Resources: imageConfig.GetResources(),
		RecordVersion: timestamppb.New(version)}
	if imageConfig.GetWorkdir() != "" {
		create.Workdir = imageConfig.Workdir
	}
	resp, host, client, err := startOnCandidates(ctx, s, id, sessiondb.Creating, sessiondb.Failed, hosts, func(c hostv1connect.HostServiceClient, replaced bool) (*connect.Response[hostv1.CreateSandboxResponse], error) {
		if replaced {
			// The record moved to another host since version: that host reads it.
			create.RecordVersion = nil
		}
		return c.CreateSandbox(ctx, connect.NewRequest(create))
	})
	if err != nil {
		return nil, err
	}
	rec.HostID = host.ID
	// A new session is used at once: its first exec should not wait for a read of what the
	// host just wrote.
	if resp.Msg.GetStatus() == string(sessiondb.Running) {
		running := *rec
		running.Status, running.SandboxID, running.ImageDigest = sessiondb.Running, resp.Msg.GetSandboxId(), resp.Msg.GetImageDigest()
		s.recent.put(caller.UserID, shownID(ctx, &running), &running)
	}
	if m.Prompt != nil {
		if _, err := client.SendPrompt(ctx, connect.NewRequest(&appv1.SendPromptRequest{SessionId: id, Text: m.GetPrompt(), PromptId: m.GetPromptId()})); err != nil {
			return nil, fmt.Errorf("first prompt of %s: %w", id, err)
		}
	}
	return connect.NewResponse(&appv1.CreateSessionResponse{
		SessionId: shownID(ctx, rec), Status: resp.Msg.GetStatus(), ImageVersion: resp.Msg.GetImageDigest(), Kind: Kind,
	}), nil
}

// imageResources is what the session record keeps of an enabled image's resources (nil for
// none).
func imageResources(r *appv1.ImageResources) *sessiondb.ImageResources {
	if r.GetSuggestedMemoryMib() == 0 && r.GetSuggestedVcpus() == 0 && r.GetSuggestedDiskGib() == 0 {
		return nil
	}
	return &sessiondb.ImageResources{MemoryMiB: r.GetSuggestedMemoryMib(), VCPUs: r.GetSuggestedVcpus(), DiskGiB: r.GetSuggestedDiskGib()}
}

// existing answers a repeated create with the session the first one made.
func existing(ctx context.Context, rec *sessiondb.Record) *connect.Response[appv1.CreateSessionResponse] {
	return connect.NewResponse(&appv1.CreateSessionResponse{
		SessionId: shownID(ctx, rec), Status: string(rec.Status), ImageVersion: rec.ImageDigest, Kind: Kind,
	})
}

// ListSessions returns the caller's sessions, newest first (every user's for an admin), with
// their owners.
func (s *Service) ListSessions(ctx context.Context, _ *connect.Request[emptypb.Empty]) (*connect.Response[appv1.ListSessionsResponse], error) {
	caller, _ := auth.Caller(ctx)
	owner := caller.UserID
	if caller.Admin {
		owner = ""
	}
	recs, err := s.store.ListByOwner(ctx, owner, s.d.Limits.Sessions)
	if err != nil {
		return nil, err
	}
	owners := make([]string, len(recs))
	for i, r := range recs {
		owners[i] = r.Owner
	}
	users, err := s.d.Users.GetMany(ctx, owners)
	if err != nil {
		return nil, err
	}
	out := &appv1.ListSessionsResponse{Sessions: make([]*appv1.SessionListItem, 0, len(recs))}
	for _, r := range recs {
		r = s.settle(ctx, r)
		item := &appv1.SessionListItem{Session: s.toProto(r, shownID(ctx, r))}
		if u, ok := users[r.Owner]; ok {
			item.OwnerEmail, item.OwnerName, item.OwnerKind = &u.Email, &u.Name, &u.Kind
		}
		out.Sessions = append(out.Sessions, item)
	}
	return connect.NewResponse(out), nil
}

// GetSession returns one session.
func (s *Service) GetSession(ctx context.Context, req *connect.Request[appv1.GetSessionRequest]) (*connect.Response[appv1.GetSessionResponse], error) {
	rec, err := s.load(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	rec = s.settle(ctx, rec)
	return connect.NewResponse(&appv1.GetSessionResponse{Session: s.toProto(rec, shownID(ctx, rec))}), nil
}

// DeleteSession stops the sandbox, frees its host and marks the record deleted; the session's
// checkpoints go with the next snapshot garbage collection. Deleting a deleted session is a
// success, as deletes are.
func (s *Service) DeleteSession(ctx context.Context, req *connect.Request[appv1.DeleteSessionRequest]) (*connect.Response[emptypb.Empty], error) {
	rec, err := s.resolve(ctx, "session_id", req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	if rec.Status == sessiondb.Deleted {
		// A retry finishes what a failed first attempt left.
		return connect.NewResponse(&emptypb.Empty{}), s.dropFiles(ctx, rec.ID)
	}
	if rec.Status.Live() {
		_, client, err := s.d.Hosts.Host(ctx, rec.HostID)
		switch {
		case errors.Is(err, hostclient.ErrHostLost):
			// Nothing to stop: the sandbox went with its host.
		case err != nil:
			return nil, err
		default:
			if _, err := client.DeleteSandbox(ctx, connect.NewRequest(&hostv1.DeleteSandboxRequest{SessionId: rec.ID})); err != nil {
				return nil, err
			}
		}
	}
	s.recent.drop(rec.ID)
	if _, _, err := s.store.Move(ctx, rec.ID, sessiondb.Deleted, "deleted by "+callerName(ctx), nil); err != nil {
		return nil, err
	}
	return connect.NewResponse(&emptypb.Empty{}), s.dropFiles(ctx, rec.ID)
}

// dropFiles deletes a deleted session's checkpoint manifests and artifacts; the chunks only it
// used go with the hosts' next snapshot garbage collection.
func (s *Service) dropFiles(ctx context.Context, id string) error {
	if _, err := s.snaps.DeleteSession(ctx, id); err != nil {
		return fmt.Errorf("delete checkpoints of %s: %w", id, err)
	}
	it := s.d.Bucket.List(&blob.ListOptions{Prefix: sessiondb.ArtifactPrefix(id)})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list artifacts of %s: %w", id, err)
		}
		if err := s.d.Bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("delete artifact %s: %w", obj.Key, err)
		}
	}
}

func callerName(ctx context.Context) string {
	caller, _ := auth.Caller(ctx)
	return caller.UserID
}

// load reads the session a request's session_id names, which the caller may see and which is
// not deleted; anything else is not_found, so that ids of other users' sessions reveal nothing.
func (s *Service) load(ctx context.Context, id string) (*sessiondb.Record, error) {
	return s.loadField(ctx, "session_id", id)
}

// loadField is load of the id in a request's field.
func (s *Service) loadField(ctx context.Context, field, id string) (*sessiondb.Record, error) {
	rec, err := s.resolve(ctx, field, id)
	if err != nil {
		return nil, err
	}
	if rec.Status == sessiondb.Deleted {
		return nil, apierr.NotFound("session", id)
	}
	return rec, nil
}

// settle marks a session lost when the host it lives on stopped heartbeating, so nobody waits
// on a sandbox that is gone; Resume then brings it back from its last checkpoint. Reads that
// show a session's state settle it; calls that need its sandbox find out through host.
func (s *Service) settle(ctx context.Context, rec *sessiondb.Record) *sessiondb.Record {
	if !rec.Status.Live() || rec.HostID == "" {
		return rec
	}
	if _, _, err := s.d.Hosts.Host(ctx, rec.HostID); !errors.Is(err, hostclient.ErrHostLost) {
		return rec
	}
	return s.markLost(ctx, rec)
}

// markLost records that a session's host is gone.
func (s *Service) markLost(ctx context.Context, rec *sessiondb.Record) *sessiondb.Record {
	s.recent.drop(rec.ID)
	_, moved, err := s.store.Move(ctx, rec.ID, sessiondb.Lost, "host "+rec.HostID+" stopped heartbeating", nil)
	if err != nil {
		return rec
	}
	return moved
}

// host returns the client of the host a live session runs on, with one (usually cached) fleet
// read. A session whose host died is marked lost; an evicted or lost one is resumed first when
// wake is set, and refused otherwise.
func (s *Service) host(ctx context.Context, rec *sessiondb.Record, wake bool) (hostv1connect.HostServiceClient, error) {
	if rec.Status.Live() {
		_, client, err := s.d.Hosts.Host(ctx, rec.HostID)
		if !errors.Is(err, hostclient.ErrHostLost) {
			return client, err
		}
		rec = s.markLost(ctx, rec)
	}
	if !wake || !rec.Status.Resumable() {
		why := ""
		if rec.StatusReason != "" {
			why = " (" + rec.StatusReason + ")"
		}
		return nil, apierr.FailedPrecondition("session %s is %s%s: resume it first (or pass wake)", rec.ID, rec.Status, why)
	}
	r, err := s.resume(ctx, rec)
	if err != nil {
		return nil, err
	}
	_, client, err := s.d.Hosts.Host(ctx, r.HostID)
	if errors.Is(err, hostclient.ErrHostLost) {
		return nil, apierr.FailedPrecondition("session %s lost its host: resume it", rec.ID)
	}
	return client, err
}

// toProto is r as the API shows it, by the id shown.
func (s *Service) toProto(r *sessiondb.Record, shown string) *appv1.Session {
	p := &appv1.Session{
		Id: shown, Status: string(r.Status), Image: r.ImageURI, Mode: r.Mode,
		CreatedAt: clock.Format(r.CreatedAt), LastActiveAt: clock.Format(r.LastActiveAt),
		LastEventAt: clock.FormatPtr(r.LastEventAt),
	}
	if u := r.Usage; u != (sessiondb.Usage{}) {
		p.Usage = &appv1.Usage{
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
			CacheWriteTokens: u.CacheWriteTokens, CostUsd: u.CostUSD,
		}
	}
	if r.HostID != "" {
		p.HostId = &r.HostID
	}
	if r.SandboxID != "" {
		p.SandboxId = &r.SandboxID
	}
	if r.SuggestedTitle != "" {
		p.SuggestedTitle = &r.SuggestedTitle
	}
	for _, a := range r.Apps {
		p.Apps = append(p.Apps, s.endpoint(r, shown, a.Name, a.Port))
	}
	return p
}

// Records reads sessions by id for another service (a task shows its sessions), each as the
// API shows it. Ids not found are left out; no ownership check, as the caller checked who may
// see the task that names them.
func (s *Service) Records(ctx context.Context, ids []string) (map[string]*appv1.Session, error) {
	recs, err := s.store.GetMany(ctx, ids)
	if err != nil {
		return nil, err
	}
	sessions := make(map[string]*appv1.Session, len(recs))
	for id, r := range recs {
		sessions[id] = s.toProto(r, r.ID)
	}
	return sessions, nil
}

// SyncTask moves the task of session id to where the session is now (sessiondb.Store.SyncTask):
// a task stored after its session started missed the moves the session made before.
func (s *Service) SyncTask(ctx context.Context, id string) error {
	return s.store.SyncTask(ctx, id)
}
