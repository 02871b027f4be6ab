package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
)

// The attack of docs/security.md "Org secrets and who may use them": event samples are kept per
// event key, and GitHub's keys (github.pull_request.opened) are shared by every GitHub
// registration, so any user whose automation listened on one read every delivery's payload
// through ListEventSamples (and ran their automation against it with DryRun's sample_id).
// Now a sample is its registration's: the registration's owner and admins read it; others see
// nothing of it, and another user's automation's samples are not_found.
func TestSecurityEventSamplesAreTheirRegistrationsReaders(t *testing.T) {
	as := newAutomationStack(t)
	ctx := t.Context()
	const event = "github.pull_request.opened"
	def := `{"version":1,"entrypoints":[{"id":"opened","type":"event","event_key":"` + event + `"}],
		"blocks":[{"id":"look","type":"code","source":"return event.number"}]}`
	deliver := func(hooks appv1connect.WebhookRegistrationServiceClient, guid, body string) {
		t.Helper()
		reg, err := hooks.CreateWebhookRegistration(ctx, connect.NewRequest(&appv1.CreateWebhookRegistrationRequest{Name: guid, Provider: "github"}))
		if err != nil {
			t.Fatal(err)
		}
		if code := as.signedDelivery(t, reg.Msg.GetRegistration().GetUrlPath(), reg.Msg.GetSecret(), "pull_request", guid, body); code != http.StatusAccepted {
			t.Fatalf("delivery answered %d", code)
		}
	}
	type user struct {
		automations appv1connect.AutomationServiceClient
		hooks       appv1connect.WebhookRegistrationServiceClient
		automation  string
	}
	newUser := func(email string) *user {
		key := auth.WithKey(as.mintKey(t, email, false))
		u := &user{
			automations: appv1connect.NewAutomationServiceClient(httpClient, as.rpcURL(), key),
			hooks:       appv1connect.NewWebhookRegistrationServiceClient(httpClient, as.rpcURL(), key),
		}
		created, err := u.automations.CreateAutomation(ctx, connect.NewRequest(&appv1.CreateAutomationRequest{Name: "on " + event, DefinitionJson: def}))
		if err != nil {
			t.Fatalf("%s creating an automation on %s: %v", email, event, err)
		}
		u.automation = created.Msg.GetAutomation().GetId()
		return u
	}
	alice, bob := newUser("alice@example.com"), newUser("bob@example.com")
	adminAutomation := as.create(t, def)

	deliver(as.webhooks, "guid-admin", `{"action":"opened","number":1,"secret":"the admin's private payload"}`)
	deliver(alice.hooks, "guid-alice", `{"action":"opened","number":2,"secret":"alice's private payload"}`)

	payloads := func(c appv1connect.AutomationServiceClient, automation string, eventKey *string) ([]*appv1.EventSample, error) {
		resp, err := c.ListEventSamples(ctx, connect.NewRequest(&appv1.ListEventSamplesRequest{AutomationId: automation, EventKey: eventKey}))
		if err != nil {
			return nil, err
		}
		return resp.Msg.GetSamples(), nil
	}
	var adminSamples []*appv1.EventSample
	testkit.Eventually(t, 30*time.Second, "both deliveries kept as samples", func() (bool, string) {
		var err error
		adminSamples, err = payloads(as.automations, adminAutomation, nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(adminSamples) == 2, fmt.Sprintf("%d samples", len(adminSamples))
	})
	var adminSample string
	for _, s := range adminSamples {
		if strings.Contains(s.GetPayloadJson(), "the admin's") {
			adminSample = s.GetId()
		}
	}

	key := event
	for _, tc := range []struct {
		name       string
		c          appv1connect.AutomationServiceClient
		automation string
		eventKey   *string
		want       string // the one payload seen, "" for none
	}{
		{"the registration's owner sees her own delivery only", alice.automations, alice.automation, nil, "alice's"},
		{"a user without a registration sees none", bob.automations, bob.automation, nil, ""},
		{"naming the event key does not widen it", bob.automations, bob.automation, &key, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := payloads(tc.c, tc.automation, tc.eventKey)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" && len(got) != 0 || tc.want != "" && (len(got) != 1 || !strings.Contains(got[0].GetPayloadJson(), tc.want)) {
				t.Fatalf("sees %v", got)
			}
		})
	}
	t.Run("another user's automation's samples are not_found", func(t *testing.T) {
		_, err := payloads(bob.automations, alice.automation, nil)
		testenv.WantCode(t, err, connect.CodeNotFound)
	})
	t.Run("a dry run against another registration's sample is not_found", func(t *testing.T) {
		_, err := bob.automations.DryRun(ctx, connect.NewRequest(&appv1.DryRunRequest{AutomationId: bob.automation, Sample: &appv1.DryRunRequest_SampleId{SampleId: adminSample}}))
		testenv.WantCode(t, err, connect.CodeNotFound)
	})
}
