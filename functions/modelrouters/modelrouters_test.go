package modelrouters

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/records/secrets"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// upstream is a loopback router serving an OpenRouter-shaped catalog that tests change.
type upstream struct {
	*httptest.Server
	mu     sync.Mutex
	status int
	body   []byte
	auth   string
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	body, err := os.ReadFile("testdata/openrouter_models.json")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{status: http.StatusOK, body: body}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		defer u.mu.Unlock()
		if r.URL.Path != "/api/v1/models" {
			http.NotFound(w, r)
			return
		}
		u.auth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(u.status)
		_, _ = w.Write(u.body)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) serve(status int, body []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.status, u.body = status, body
}

// edit rewrites the catalog's models (as generic JSON objects).
func (u *upstream) edit(t *testing.T, f func([]map[string]any) []map[string]any) {
	t.Helper()
	u.mu.Lock()
	var cat struct {
		Data []map[string]any `json:"data"`
	}
	err := json.Unmarshal(u.body, &cat)
	u.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	cat.Data = f(cat.Data)
	b, err := json.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	u.serve(http.StatusOK, b)
}

type fixture struct {
	svc   *Service
	up    *upstream
	clock *clock.Fake
	creds *secrets.Store
}

const routerID = "openrouter"

func newFixture(t *testing.T) fixture {
	t.Helper()
	db, _ := testenv.Firestore(t)
	up := newUpstream(t)
	cfg := config.Default()
	cfg.ModelRouters = []config.ModelRouter{{
		ID: routerID, Label: "OpenRouter", BaseURL: up.URL + "/api/v1", Protocols: []string{"openai-chat"},
		CredentialSecret: "org/openrouter-key", EgressHosts: []string{"openrouter.ai"}, DefaultModel: "anthropic/claude-sonnet-4",
	}}
	c := clock.NewFake(t0)
	_, sealer := testenv.Keyset(t)
	lim := config.Default().Limits
	creds := secrets.New(db, sealer, c.Now, secrets.Limits{MaxValueBytes: lim.MaxSecretBytes, MaxSecrets: lim.MaxOrgSecrets})
	if _, _, err := creds.Put(t.Context(), secrets.Put{Name: "org/openrouter-key", Value: "sk-or-test"}); err != nil {
		t.Fatal(err)
	}
	return fixture{svc: New(db, c, cfg, creds), up: up, clock: c, creds: creds}
}

// Without its secret a router is called with no key and says so; once an admin puts it, the
// next refresh sends it.
func TestRouterCredentialFollowsTheOrgSecret(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, err := f.creds.Delete(t.Context(), "org/openrouter-key", nil); err != nil {
		t.Fatal(err)
	}
	f.refresh(t)
	if f.up.auth != "" || f.router(t).GetCredentialConfigured() {
		t.Fatalf("without the secret: upstream saw %q, router %v", f.up.auth, f.router(t))
	}
	if _, _, err := f.creds.Put(t.Context(), secrets.Put{Name: "org/openrouter-key", Value: "sk-or-rotated"}); err != nil {
		t.Fatal(err)
	}
	f.refresh(t)
	if f.up.auth != "Bearer sk-or-rotated" || !f.router(t).GetCredentialConfigured() {
		t.Fatalf("with the secret: upstream saw %q, router %v", f.up.auth, f.router(t))
	}
}

func admin(t *testing.T) context.Context {
	return auth.WithPrincipal(t.Context(), auth.Principal{UserID: "user_root", Admin: true})
}

func user(t *testing.T) context.Context {
	return auth.WithPrincipal(t.Context(), auth.Principal{UserID: "user_alice"})
}

func (f fixture) refresh(t *testing.T) *appv1.RefreshRouterModelsResponse {
	t.Helper()
	res, err := f.svc.RefreshRouterModels(admin(t), connect.NewRequest(&appv1.RefreshRouterModelsRequest{RouterId: routerID}))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg
}

func (f fixture) list(t *testing.T, ctx context.Context, a appv1.RouterModelAudience, search string) []*appv1.RouterModel {
	t.Helper()
	res, err := f.svc.ListRouterModels(ctx, connect.NewRequest(&appv1.ListRouterModelsRequest{RouterId: routerID, Audience: a, Search: search}))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg.GetModels()
}

func (f fixture) router(t *testing.T) *appv1.ModelRouter {
	t.Helper()
	res, err := f.svc.ListModelRouters(user(t), connect.NewRequest(&emptypb.Empty{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Msg.GetRouters()) != 1 {
		t.Fatalf("routers: %v", res.Msg.GetRouters())
	}
	return res.Msg.GetRouters()[0]
}

func (f fixture) setPolicy(t *testing.T, model string, enabled, userEnabled bool) *appv1.RouterModel {
	t.Helper()
	res, err := f.svc.UpdateRouterModelPolicy(admin(t), connect.NewRequest(&appv1.UpdateRouterModelPolicyRequest{
		RouterId: routerID, ModelId: model, Enabled: enabled, UserEnabled: userEnabled,
	}))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg.GetModel()
}

func modelIDs(ms []*appv1.RouterModel) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.GetId()
	}
	return out
}

const (
	sonnet   = "anthropic/claude-sonnet-4"
	mini     = "openai/gpt-4o-mini"
	llama    = "meta-llama/llama-3.1-8b-instruct:free"
	deepseek = "deepseek/deepseek-r1"
)

func TestRouterFirstRefreshStoresTheCatalogDisabled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	got := f.refresh(t)
	if got.GetDiscovered() != 4 || got.GetAvailable() != 4 || got.GetMarkedUnavailable() != 0 {
		t.Fatalf("counts: %v", got)
	}
	if f.up.auth != "Bearer sk-or-test" {
		t.Errorf("upstream saw Authorization %q", f.up.auth)
	}
	all := f.list(t, admin(t), appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_ADMIN_CATALOG, "")
	if want := []string{sonnet, deepseek, llama, mini}; !slices.Equal(modelIDs(all), want) {
		t.Fatalf("catalog %v, want %v", modelIDs(all), want)
	}
	byID := map[string]*appv1.RouterModel{}
	for _, m := range all {
		if m.GetEnabled() || m.GetUserEnabled() || !m.GetAvailable() {
			t.Errorf("%s: new models should be available and disabled: %v", m.GetId(), m)
		}
		byID[m.GetId()] = m
	}
	s := byID[sonnet]
	if s.GetCanonicalSlug() != "anthropic/claude-4-sonnet-20250522" || s.GetName() != "Anthropic: Claude Sonnet 4" ||
		s.GetAuthor() != "anthropic" || s.GetContextLength() != 1000000 || s.GetPromptPrice() != "0.000003" ||
		s.GetCompletionPrice() != "0.000015" || !slices.Equal(s.GetInputModalities(), []string{"image", "text", "file"}) ||
		!s.GetSupportsReasoning() || s.ModelHubId != nil || s.GetUpstreamUrl() != f.up.URL+"/api/v1/models" ||
		s.GetRouterId() != routerID || s.GetUpdatedAt() != clock.Format(t0) ||
		s.GetMaxCompletionTokens() != 64000 || s.GetInputCacheReadPrice() != "0.0000003" || s.GetInputCacheWritePrice() != "0.00000375" {
		t.Errorf("sonnet stored as %v", s)
	}
	// gpt-4o-mini's pricing has no cache write price, which stays unset rather than "".
	if m := byID[mini]; m.GetMaxCompletionTokens() != 16384 || m.GetInputCacheReadPrice() != "0.000000075" || m.InputCacheWritePrice != nil {
		t.Errorf("gpt-4o-mini stored as %v", m)
	}
	if l := byID[llama]; l.GetModelHubId() != "meta-llama/Meta-Llama-3.1-8B-Instruct" || l.GetSupportsReasoning() || l.GetPromptPrice() != "0" ||
		l.MaxCompletionTokens != nil { // OpenRouter says null for some models' top provider
		t.Errorf("llama stored as %v", l)
	}
	r := f.router(t)
	if r.GetModelCount() != 4 || r.GetAvailableModelCount() != 4 || r.GetEnabledModelCount() != 0 ||
		r.GetLastSuccessfulSyncAt() != clock.Format(t0) || r.LastSyncError != nil || !r.GetCredentialConfigured() ||
		r.GetDefaultModel() != sonnet || r.GetCredentialSecret() != "org/openrouter-key" {
		t.Errorf("router: %v", r)
	}
}

func TestRouterRefreshMarksVanishedModelsUnavailableAndKeepsPolicy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.refresh(t)
	f.setPolicy(t, mini, true, true)
	f.setPolicy(t, llama, true, false)
	f.up.edit(t, func(ms []map[string]any) []map[string]any {
		ms = slices.DeleteFunc(ms, func(m map[string]any) bool { return m["id"] == llama })
		for _, m := range ms {
			if m["id"] == mini {
				m["name"] = "OpenAI: GPT-4o mini (2024-07-18)"
				m["pricing"] = map[string]any{"prompt": "0.0000001", "completion": "0.0000004"}
			}
		}
		return append(ms, map[string]any{"id": "qwen/qwen3-coder", "name": "Qwen: Qwen3 Coder", "context_length": 262144})
	})
	f.clock.Advance(time.Hour)
	got := f.refresh(t)
	if got.GetDiscovered() != 1 || got.GetAvailable() != 4 || got.GetMarkedUnavailable() != 1 {
		t.Fatalf("counts: %v", got)
	}
	byID := map[string]*appv1.RouterModel{}
	for _, m := range f.list(t, admin(t), appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_ADMIN_CATALOG, "") {
		byID[m.GetId()] = m
	}
	if m := byID[llama]; m.GetAvailable() || !m.GetEnabled() || m.GetUserEnabled() || m.GetUpdatedAt() != clock.Format(t0.Add(time.Hour)) {
		t.Errorf("vanished model: %v", m)
	}
	if m := byID[mini]; !m.GetAvailable() || !m.GetEnabled() || !m.GetUserEnabled() || m.GetName() != "OpenAI: GPT-4o mini (2024-07-18)" || m.GetPromptPrice() != "0.0000001" {
		t.Errorf("changed model: %v", m)
	}
	if m := byID[sonnet]; m.GetUpdatedAt() != clock.Format(t0) {
		t.Errorf("unchanged model rewritten: %v", m)
	}
	if m := byID["qwen/qwen3-coder"]; !m.GetAvailable() || m.GetEnabled() || m.Author == nil || m.PromptPrice != nil {
		t.Errorf("new model: %v", m)
	}
	r := f.router(t)
	if r.GetModelCount() != 5 || r.GetAvailableModelCount() != 4 || r.GetEnabledModelCount() != 2 {
		t.Errorf("router counts: %v", r)
	}

	// The model coming back is available again, its policy as it was.
	f.up.edit(t, func(ms []map[string]any) []map[string]any {
		return append(ms, map[string]any{"id": llama, "name": "Meta: Llama 3.1 8B Instruct (free)"})
	})
	if got := f.refresh(t); got.GetDiscovered() != 0 || got.GetMarkedUnavailable() != 0 || got.GetAvailable() != 5 {
		t.Fatalf("counts on return: %v", got)
	}
	if got := modelIDs(f.list(t, admin(t), appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_PROGRAMMATIC, "")); !slices.Equal(got, []string{llama, mini}) {
		t.Errorf("programmatic after return: %v", got)
	}
}

func TestRouterAudiencesAndSearch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.refresh(t)
	f.setPolicy(t, sonnet, true, true)
	f.setPolicy(t, mini, true, false)
	f.setPolicy(t, deepseek, false, true)
	f.up.edit(t, func(ms []map[string]any) []map[string]any {
		return slices.DeleteFunc(ms, func(m map[string]any) bool { return m["id"] == sonnet })
	})
	f.refresh(t)
	f.setPolicy(t, llama, true, true)

	tests := []struct {
		name     string
		audience appv1.RouterModelAudience
		search   string
		want     []string
	}{
		{"user sees enabled, user-enabled and available", appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_USER, "", []string{llama}},
		{"unspecified is the user audience", appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_UNSPECIFIED, "", []string{llama}},
		{"programmatic sees enabled and available", appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_PROGRAMMATIC, "", []string{llama, mini}},
		{"admin catalog sees everything", appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_ADMIN_CATALOG, "", []string{sonnet, deepseek, llama, mini}},
		{"search matches names case-insensitively", appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_ADMIN_CATALOG, "  claude SONNET ", []string{sonnet}},
		{"search matches ids", appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_ADMIN_CATALOG, "openai/", []string{mini}},
		{"search within an audience", appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_PROGRAMMATIC, "meta", []string{llama}},
		{"search with no match", appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_ADMIN_CATALOG, "mistral", []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := modelIDs(f.list(t, admin(t), tt.audience, tt.search)); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRouterAdminOnlyMethods(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.refresh(t)
	svc := f.svc
	tests := []struct {
		name string
		call func(context.Context) error
	}{
		{"refresh", func(ctx context.Context) error {
			_, err := svc.RefreshRouterModels(ctx, connect.NewRequest(&appv1.RefreshRouterModelsRequest{RouterId: routerID}))
			return err
		}},
		{"update policy", func(ctx context.Context) error {
			_, err := svc.UpdateRouterModelPolicy(ctx, connect.NewRequest(&appv1.UpdateRouterModelPolicyRequest{RouterId: routerID, ModelId: mini, Enabled: true}))
			return err
		}},
		{"admin catalog", func(ctx context.Context) error {
			_, err := svc.ListRouterModels(ctx, connect.NewRequest(&appv1.ListRouterModelsRequest{RouterId: routerID, Audience: appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_ADMIN_CATALOG}))
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			testenv.WantCode(t, tt.call(user(t)), connect.CodePermissionDenied)
			if err := tt.call(admin(t)); err != nil {
				t.Fatalf("admin: %v", err)
			}
		})
	}
	if got := f.list(t, user(t), appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_PROGRAMMATIC, ""); len(got) != 1 {
		t.Errorf("a user lists the programmatic audience: %v", modelIDs(got))
	}
}

func TestRouterUnknownRoutersAndModels(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.refresh(t)
	_, err := f.svc.UpdateRouterModelPolicy(admin(t), connect.NewRequest(&appv1.UpdateRouterModelPolicyRequest{RouterId: routerID, ModelId: "openai/gpt-5", Enabled: true}))
	testenv.WantCode(t, err, connect.CodeNotFound)
	_, err = f.svc.ListRouterModels(user(t), connect.NewRequest(&appv1.ListRouterModelsRequest{RouterId: "nope"}))
	testenv.WantCode(t, err, connect.CodeNotFound)
	_, err = f.svc.RefreshRouterModels(admin(t), connect.NewRequest(&appv1.RefreshRouterModelsRequest{RouterId: "nope"}))
	testenv.WantCode(t, err, connect.CodeNotFound)
	_, err = f.svc.ListRouterModels(user(t), connect.NewRequest(&appv1.ListRouterModelsRequest{}))
	if got := testenv.ViolatedFields(t, err); !slices.Equal(got, []string{"router_id"}) {
		t.Errorf("violations %v", got)
	}
}

func TestRouterFailedRefreshIsReturnedAndRecorded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"upstream error status", http.StatusInternalServerError, `{"error":{"message":"Internal Server Error","code":500}}`, "500 Internal Server Error"},
		{"not json", http.StatusOK, `<html>maintenance</html>`, "not a model catalog"},
		{"no data", http.StatusOK, `{"models":[]}`, "lists no models"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.refresh(t)
			f.up.serve(tt.status, []byte(tt.body))
			f.clock.Advance(time.Minute)
			_, err := f.svc.RefreshRouterModels(admin(t), connect.NewRequest(&appv1.RefreshRouterModelsRequest{RouterId: routerID}))
			testenv.WantCode(t, err, connect.CodeUnavailable)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			r := f.router(t)
			if !strings.Contains(r.GetLastSyncError(), tt.want) || r.GetLastSuccessfulSyncAt() != clock.Format(t0) {
				t.Errorf("router after failure: %v", r)
			}
			if r.GetAvailableModelCount() != 4 {
				t.Errorf("a failed refresh changed availability: %v", r)
			}
			// The next good refresh clears the error.
			f.up.serve(http.StatusOK, mustRead(t, "testdata/openrouter_models.json"))
			f.refresh(t)
			if r := f.router(t); r.LastSyncError != nil || r.GetLastSuccessfulSyncAt() != clock.Format(t0.Add(time.Minute)) {
				t.Errorf("router after recovery: %v", r)
			}
		})
	}
}

func TestRouterRefreshRefusesOversizedCatalogs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.svc.fetch.maxBytes = 1000
	_, err := f.svc.RefreshRouterModels(admin(t), connect.NewRequest(&appv1.RefreshRouterModelsRequest{RouterId: routerID}))
	testenv.WantCode(t, err, connect.CodeUnavailable)
	if !strings.Contains(err.Error(), "larger than 1000 bytes") {
		t.Errorf("error %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
