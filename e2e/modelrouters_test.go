package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/hangar-dev/hangar/composition"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
)

// TestModelRouterOverTheWire drives ModelRouterService through Connect JSON with real keys,
// against a loopback upstream serving an OpenRouter-shaped catalog that checks the router's key,
// put by an admin in the org secret store.
func TestModelRouterOverTheWire(t *testing.T) {
	catalog, err := os.ReadFile("../functions/modelrouters/testdata/openrouter_models.json")
	if err != nil {
		t.Fatal(err)
	}
	const key = "sk-or-e2e"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, `{"error":{"message":"No auth credentials found"}}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(catalog)
	}))
	t.Cleanup(up.Close)

	cfg := config.Default()
	cfg.ModelRouters, err = config.ParseModelRouters([]byte(`[{"id":"openrouter","label":"OpenRouter","base_url":"` + up.URL + `/api/v1","protocols":["openai-chat"],"credential_secret":"org/openrouter-key"}]`))
	if err != nil {
		t.Fatal(err)
	}
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	s := serve(t, composition.New(composition.Deps{DB: db, Config: cfg, Sealer: sealer}))
	adminKey := s.admin
	userKey := s.mintKey(t, "alice@example.com", false)
	client := func(key string) appv1connect.ModelRouterServiceClient {
		return appv1connect.NewModelRouterServiceClient(httpClient, s.rpcURL(), connect.WithProtoJSON(), auth.WithKey(key))
	}
	ctx := context.Background()

	_, err = client(userKey).RefreshRouterModels(ctx, connect.NewRequest(&appv1.RefreshRouterModelsRequest{RouterId: "openrouter"}))
	testenv.WantCode(t, err, connect.CodePermissionDenied)
	_, err = client("").ListModelRouters(ctx, connect.NewRequest(&emptypb.Empty{}))
	testenv.WantCode(t, err, connect.CodeUnauthenticated)

	// Without its key the upstream refuses the router.
	_, err = client(adminKey).RefreshRouterModels(ctx, connect.NewRequest(&appv1.RefreshRouterModelsRequest{RouterId: "openrouter"}))
	testenv.WantCode(t, err, connect.CodeUnavailable)
	secrets := appv1connect.NewOrgSecretServiceClient(httpClient, s.rpcURL(), auth.WithKey(adminKey))
	if _, err := secrets.PutOrgSecret(ctx, connect.NewRequest(&appv1.PutOrgSecretRequest{Name: "org/openrouter-key", Value: key})); err != nil {
		t.Fatal(err)
	}
	res, err := client(adminKey).RefreshRouterModels(ctx, connect.NewRequest(&appv1.RefreshRouterModelsRequest{RouterId: "openrouter"}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Msg.GetDiscovered() != 4 || res.Msg.GetAvailable() != 4 {
		t.Fatalf("refresh: %v", res.Msg)
	}
	if _, err := client(adminKey).UpdateRouterModelPolicy(ctx, connect.NewRequest(&appv1.UpdateRouterModelPolicyRequest{
		RouterId: "openrouter", ModelId: "deepseek/deepseek-r1", Enabled: true, UserEnabled: true,
	})); err != nil {
		t.Fatal(err)
	}
	models, err := client(userKey).ListRouterModels(ctx, connect.NewRequest(&appv1.ListRouterModelsRequest{RouterId: "openrouter", Audience: appv1.RouterModelAudience_ROUTER_MODEL_AUDIENCE_USER}))
	if err != nil {
		t.Fatal(err)
	}
	if got := models.Msg.GetModels(); len(got) != 1 || got[0].GetId() != "deepseek/deepseek-r1" || !got[0].GetSupportsReasoning() || got[0].GetModelHubId() != "deepseek-ai/DeepSeek-R1" {
		t.Fatalf("user models: %v", got)
	}
	routers, err := client(userKey).ListModelRouters(ctx, connect.NewRequest(&emptypb.Empty{}))
	if err != nil {
		t.Fatal(err)
	}
	if rs := routers.Msg.GetRouters(); len(rs) != 1 || rs[0].GetModelCount() != 4 || rs[0].GetEnabledModelCount() != 1 ||
		!rs[0].GetCredentialConfigured() || rs[0].GetLastSuccessfulSyncAt() == "" || rs[0].GetCredentialSecret() != "org/openrouter-key" {
		t.Fatalf("routers: %v", rs)
	}
}
