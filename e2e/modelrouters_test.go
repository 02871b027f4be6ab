package e2e

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/hangar-dev/hangar/functions/api"
	"github.com/hangar-dev/hangar/functions/modelrouters"
	"github.com/hangar-dev/hangar/functions/platform/apierr"
	"github.com/hangar-dev/hangar/functions/platform/auth"
	"github.com/hangar-dev/hangar/functions/platform/clock"
	"github.com/hangar-dev/hangar/functions/platform/codec"
	"github.com/hangar-dev/hangar/functions/platform/config"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
)

// TestModelRouterOverTheWire drives ModelRouterService through Connect JSON with real keys,
// against a loopback upstream serving an OpenRouter-shaped catalog.
func TestModelRouterOverTheWire(t *testing.T) {
	catalog, err := os.ReadFile("../functions/modelrouters/testdata/openrouter_models.json")
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	a := api.New(api.Deps{DB: db, Config: cfg})
	// Served beside the API with the same interceptors until api.New wires the service.
	mux := http.NewServeMux()
	path, h := appv1connect.NewModelRouterServiceHandler(modelrouters.New(db, clock.Real{}, cfg, nil),
		connect.WithInterceptors(apierr.Interceptor(slog.Default()), auth.Interceptor(a.Authenticator())), codec.JSON())
	mux.Handle(api.RPCPrefix+path, http.StripPrefix(api.RPCPrefix, h))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(mux)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	s := &stack{url: "http://" + ln.Addr().String(), api: a}
	adminKey := s.mintKey(t, "admin@example.com", true)
	userKey := s.mintKey(t, "alice@example.com", false)
	client := func(key string) appv1connect.ModelRouterServiceClient {
		return appv1connect.NewModelRouterServiceClient(httpClient, s.rpcURL(), connect.WithProtoJSON(), withKey(key))
	}
	ctx := context.Background()

	_, err = client(userKey).RefreshRouterModels(ctx, connect.NewRequest(&appv1.RefreshRouterModelsRequest{RouterId: "openrouter"}))
	testenv.WantCode(t, err, connect.CodePermissionDenied)
	_, err = client("").ListModelRouters(ctx, connect.NewRequest(&emptypb.Empty{}))
	testenv.WantCode(t, err, connect.CodeUnauthenticated)

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
		rs[0].GetCredentialConfigured() || rs[0].GetLastSuccessfulSyncAt() == "" {
		t.Fatalf("routers: %v", rs)
	}
}
