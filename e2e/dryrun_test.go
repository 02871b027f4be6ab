package e2e

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// A dry run of a kept generic delivery sees the event its delivered run saw (body, headers,
// delivery key), is labelled a dry run, and is not the automation's last run; the delivery
// its entrypoint filter rejected is listed with the drops.
func TestADryRunOfASampleSeesTheEventItsDeliveredRunSaw(t *testing.T) {
	as := newAutomationStack(t)
	reg, err := as.webhooks.CreateWebhookRegistration(t.Context(), connect.NewRequest(&appv1.CreateWebhookRegistrationRequest{Name: "deploys", Provider: "webhook"}))
	if err != nil {
		t.Fatal(err)
	}
	path, secret := reg.Msg.GetRegistration().GetUrlPath(), reg.Msg.GetSecret()
	id := as.create(t, `{"version":1,
		"entrypoints":[{"id":"on","type":"event","event_key":"webhook.`+reg.Msg.GetRegistration().GetId()+`","filter":"event.body.service != 'skip'"}],
		"blocks":[{"id":"shape","type":"code","source":"return {service: event.body.service, agent: event.headers['user-agent'], delivery: event.delivery_id}"}]}`)

	deliver := func(body string) {
		t.Helper()
		if code := as.genericDelivery(t, path, body, httpapi.SignatureHeader, httpapi.Sign([]byte(secret), time.Now(), []byte(body)), "User-Agent", "deployer/1"); code != http.StatusAccepted {
			t.Fatalf("delivery of %s answered %d", body, code)
		}
	}
	deliver(`{"service":"api"}`)
	var real *appv1.AutomationRunBrief
	testkit.Eventually(t, 30*time.Second, "the delivery starting a run", func() (bool, string) {
		list, err := as.runs.ListRuns(t.Context(), connect.NewRequest(&appv1.ListRunsRequest{AutomationId: id}))
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Msg.GetRuns()) == 0 {
			return false, "no run yet"
		}
		real = list.Msg.GetRuns()[0]
		return true, ""
	})
	realRun := as.waitRun(t, real.GetId())
	if realRun.GetBrief().GetStatus() != "completed" {
		t.Fatalf("delivered run %s: %s", realRun.GetBrief().GetStatus(), realRun.GetBrief().GetError())
	}
	deliver(`{"service":"skip"}`)

	var sampleID string
	var drops []*appv1.AutomationDropBrief
	testkit.Eventually(t, 30*time.Second, "the filtered delivery listed with the drops", func() (bool, string) {
		resp, err := as.runs.ListRecentDrops(t.Context(), connect.NewRequest(&appv1.ListRecentDropsRequest{AutomationId: id}))
		if err != nil {
			t.Fatal(err)
		}
		drops = resp.Msg.GetDrops()
		return len(drops) > 0, "no drops"
	})
	if len(drops) != 1 || drops[0].GetReason() != "filtered" || drops[0].GetEntrypointId() != "on" || drops[0].GetEventKey() == "" {
		t.Fatalf("drops %v, want the filtered delivery", drops)
	}
	samples, err := as.automations.ListEventSamples(t.Context(), connect.NewRequest(&appv1.ListEventSamplesRequest{AutomationId: id}))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples.Msg.GetSamples() {
		if s.GetPayloadJson() == `{"service":"api"}` {
			sampleID = s.GetId()
		}
	}
	if sampleID == "" {
		t.Fatalf("samples %v lack the delivered one", samples.Msg.GetSamples())
	}

	resp, err := as.automations.DryRun(t.Context(), connect.NewRequest(&appv1.DryRunRequest{AutomationId: id, Sample: &appv1.DryRunRequest_SampleId{SampleId: sampleID}}))
	if err != nil {
		t.Fatal(err)
	}
	dry := as.waitRun(t, resp.Msg.GetRunId())
	if dry.GetBrief().GetStatus() != "completed" || !dry.GetBrief().GetDryRun() {
		t.Fatalf("dry run %s (dry %v): %s", dry.GetBrief().GetStatus(), dry.GetBrief().GetDryRun(), dry.GetBrief().GetError())
	}
	if got, want := triggerEvent(t, dry), triggerEvent(t, realRun); !reflect.DeepEqual(got, want) {
		t.Fatalf("the dry run's event\n%v\nis not the delivered run's\n%v", got, want)
	}
	if got, want := dry.GetSteps()[0].GetOutputsJson(), realRun.GetSteps()[0].GetOutputsJson(); got != want {
		t.Fatalf("the dry run's code answered %s, the delivered run's %s", got, want)
	}
	if dry.GetBrief().GetDeliveryKey() != real.GetDeliveryKey() || dry.GetBrief().GetEventKey() != real.GetEventKey() {
		t.Fatalf("dry run of delivery %q (%q), want %q (%q)", dry.GetBrief().GetDeliveryKey(), dry.GetBrief().GetEventKey(), real.GetDeliveryKey(), real.GetEventKey())
	}

	list, err := as.automations.ListAutomations(t.Context(), connect.NewRequest(&appv1.ListAutomationsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Msg.GetAutomations() {
		if s.GetAutomation().GetId() == id && s.GetLastRun().GetId() != real.GetId() {
			t.Fatalf("last run %v, want the delivered run %s, not the dry run", s.GetLastRun(), real.GetId())
		}
	}
}

// triggerEvent is the event of a run's trigger.
func triggerEvent(t *testing.T, run *appv1.AutomationRun) any {
	t.Helper()
	var trigger struct {
		Event any `json:"event"`
	}
	if err := json.Unmarshal([]byte(run.GetTriggerJson()), &trigger); err != nil {
		t.Fatalf("trigger of run %s: %v", run.GetBrief().GetId(), err)
	}
	return trigger.Event
}

// The nouns the documented example definition's inputs use, "profile" and "repo", have
// options: the profiles and the repositories they check out.
func TestInputKeyOptionsOfProfilesAndRepos(t *testing.T) {
	as := newAutomationStack(t)
	profiles := appv1connect.NewProfileServiceClient(http.DefaultClient, as.rpcURL(), auth.WithKey(as.admin))
	p, err := profiles.CreateProfile(t.Context(), connect.NewRequest(&appv1.CreateProfileRequest{
		Name: "reviewer", ImageId: "img_reviewer", Repos: []*appv1.ProfileRepo{{Path: "/work/widgets", RemoteUrl: "https://github.com/acme/widgets.git"}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		noun string
		want *appv1.InputKeyOption
	}{
		{"profile", &appv1.InputKeyOption{Key: p.Msg.GetProfile().GetId(), Label: "reviewer"}},
		{"repo", &appv1.InputKeyOption{Key: "acme/widgets", Label: "github.com/acme/widgets (reviewer)"}},
	} {
		resp, err := as.automations.ListInputKeyOptions(t.Context(), connect.NewRequest(&appv1.ListInputKeyOptionsRequest{Noun: tc.noun}))
		if err != nil {
			t.Fatalf("%s: %v", tc.noun, err)
		}
		if got := resp.Msg.GetOptions(); len(got) != 1 || !proto.Equal(got[0], tc.want) {
			t.Fatalf("%s options %v, want %v", tc.noun, got, tc.want)
		}
	}
	_, err = as.automations.ListInputKeyOptions(t.Context(), connect.NewRequest(&appv1.ListInputKeyOptionsRequest{Noun: "planet"}))
	testenv.WantCode(t, err, connect.CodeInvalidArgument)
}
