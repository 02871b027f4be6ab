package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

const hookSecret = "0123456789abcdef0123456789abcdef"

func hookReg(provider string) *appv1.WebhookRegistration {
	return &appv1.WebhookRegistration{
		Id: "hook_1", Name: "CI", Provider: provider, UrlPath: "/api/v1/webhooks/hook_1",
		CreatedAt: "2026-01-02T03:04:05.000Z", SecretRotatedAt: "2026-01-02T03:04:05.000Z",
	}
}

func TestWebhooksCreate(t *testing.T) {
	file := writeTemp(t, "secret", "from-a-file-secret-value\n")
	for _, tc := range []struct {
		name     string
		stdin    string
		args     []string
		want     *appv1.CreateWebhookRegistrationRequest
		wantHint string
	}{
		{"GitHub, secret generated", "", []string{"CI", "--provider", "github"},
			&appv1.CreateWebhookRegistrationRequest{Name: "CI", Provider: "github"}, "content type application/json"},
		{"generic, secret from a file", "", []string{"CI", "--provider", "webhook", "--secret-file", file},
			&appv1.CreateWebhookRegistrationRequest{Name: "CI", Provider: "webhook", Secret: proto.String("from-a-file-secret-value")}, "X-Hangar-Signature: t=<unix seconds>,v1=<hex of HMAC of \"<t>.<raw body>\">"},
		{"generic, secret typed", "typed-secret-of-length\n", []string{"CI", "--provider", "webhook", "--secret-file", "-"},
			&appv1.CreateWebhookRegistrationRequest{Name: "CI", Provider: "webhook", Secret: proto.String("typed-secret-of-length")}, "X-Hangar-Signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			reply(f, appv1connect.WebhookRegistrationServiceCreateWebhookRegistrationProcedure, &appv1.CreateWebhookRegistrationResponse{
				Registration: hookReg(tc.want.GetProvider()), Secret: hookSecret,
			})
			r := f.runWithInput(t, tc.stdin, append([]string{"webhooks", "create"}, tc.args...)...)
			if r.err != nil {
				t.Fatalf("exit %d: %v", r.code, r.err)
			}
			f.assertRequest(t, appv1connect.WebhookRegistrationServiceCreateWebhookRegistrationProcedure, tc.want)
			assertContains(t, r.out, "id: hook_1\n", "\n "+f.url+"/api/v1/webhooks/hook_1\n", tc.wantHint)
			if tail := "\n    " + hookSecret + "\n\nStore it now: it will not be shown again.\n"; !strings.HasSuffix(r.out, tail) {
				t.Errorf("output does not end with the secret and its warning:\n%s", r.out)
			}
		})
	}
}

func TestWebhooksCreateUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"CI"},                         // no --provider
		{"CI", "--provider", "gitlab"}, // unknown provider
		{"--provider", "github"},       // no name
		{"CI", "extra", "--provider", "github"},
	} {
		f := newFakeAPI(t)
		if r := f.run(t, append([]string{"webhooks", "create"}, args...)...); r.code != exitInvalidArgument {
			t.Errorf("webhooks create %v: exit %d (%v), want %d", args, r.code, r.err, exitInvalidArgument)
		}
	}
}

func TestWebhooksListRotateDelete(t *testing.T) {
	f := newFakeAPI(t)
	seen := hookReg("github")
	seen.LastDeliveryAt = proto.String("2026-01-03T00:00:00.000Z")
	reply(f, appv1connect.WebhookRegistrationServiceListWebhookRegistrationsProcedure, &appv1.ListWebhookRegistrationsResponse{
		Registrations: []*appv1.WebhookRegistration{seen, {Id: "hook_2", Name: "Deploys", Provider: "webhook", UrlPath: "/api/v1/webhooks/hook_2", CreatedAt: "2026-01-01T00:00:00.000Z"}},
	})
	out := f.mustRun(t, "webhooks", "list")
	want := "" +
		"ID      NAME     PROVIDER  URL_PATH                 CREATED                   LAST_DELIVERY\n" +
		"hook_1  CI       github    /api/v1/webhooks/hook_1  2026-01-02T03:04:05.000Z  2026-01-03T00:00:00.000Z\n" +
		"hook_2  Deploys  webhook   /api/v1/webhooks/hook_2  2026-01-01T00:00:00.000Z  -\n"
	if out != want {
		t.Errorf("list:\n%s\nwant:\n%s", out, want)
	}

	reply(f, appv1connect.WebhookRegistrationServiceRotateWebhookSecretProcedure, &appv1.RotateWebhookSecretResponse{Registration: hookReg("github"), Secret: hookSecret})
	out = f.mustRun(t, "webhooks", "rotate", "hook_1")
	f.assertRequest(t, appv1connect.WebhookRegistrationServiceRotateWebhookSecretProcedure, &appv1.RotateWebhookSecretRequest{Id: "hook_1"})
	assertContains(t, out, "id: hook_1\n", "\n "+hookSecret+"\n")

	reply(f, appv1connect.WebhookRegistrationServiceDeleteWebhookRegistrationProcedure, &appv1.DeleteWebhookRegistrationResponse{})
	out = f.mustRun(t, "webhooks", "delete", "hook_1")
	f.assertRequest(t, appv1connect.WebhookRegistrationServiceDeleteWebhookRegistrationProcedure, &appv1.DeleteWebhookRegistrationRequest{Id: "hook_1"})
	if out != "Deleted webhook registration hook_1.\n" {
		t.Errorf("delete printed %q", out)
	}
}

func TestWebhooksSignMakesTheHeaderTheServerChecks(t *testing.T) {
	secretFile := writeTemp(t, "secret", hookSecret+"\n")
	body := `{"build":"green"}`
	f := newFakeAPI(t)
	out := f.runWithInput(t, body, "webhooks", "sign", "--secret-file", secretFile, "-")
	if out.err != nil {
		t.Fatalf("exit %d: %v", out.code, out.err)
	}
	value, ok := strings.CutPrefix(strings.TrimSuffix(out.out, "\n"), httpapi.SignatureHeader+": t=")
	ts, _, _ := strings.Cut(value, ",")
	unix, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil {
		t.Fatalf("output %q is not %s: t=<unix>,v1=<hex>", out.out, httpapi.SignatureHeader)
	}
	if want := httpapi.Sign([]byte(hookSecret), time.Unix(unix, 0), []byte(body)); "t="+value != want {
		t.Errorf("signed %q, want %q", "t="+value, want)
	}
	if r := f.run(t, "webhooks", "sign", "-"); r.code != exitInvalidArgument {
		t.Errorf("sign without --secret-file: exit %d (%v), want %d", r.code, r.err, exitInvalidArgument)
	}
}
