package e2e

import (
	"context"
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

// The attacks of docs/security.md "Org secrets and who may use them", each replayed over the
// wire by a non-admin key.

// userID is the id of the person with email (made on first sight, as mintKey does).
func (s *stack) userID(t testing.TB, email string) string {
	t.Helper()
	u, err := s.api.Users().EnsureHuman(context.Background(), email, "", time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

// setAccess sets an org secret's access policy as the stack's admin.
func (s *stack) setAccess(t testing.TB, name string, access *appv1.OrgSecretAccess) {
	t.Helper()
	c := appv1connect.NewOrgSecretServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	if _, err := c.SetOrgSecretAccess(context.Background(), connect.NewRequest(&appv1.SetOrgSecretAccessRequest{Name: name, Access: access})); err != nil {
		t.Fatal(err)
	}
}

// wantDenied fails unless err is permission_denied naming the secret.
func wantDenied(t testing.TB, err error, secret string) {
	t.Helper()
	testenv.WantCode(t, err, connect.CodePermissionDenied)
	if !strings.Contains(err.Error(), `"`+secret+`"`) {
		t.Fatalf("the refusal does not name the secret %q: %v", secret, err)
	}
}

func selected(userIDs ...string) *appv1.OrgSecretAccess {
	return &appv1.OrgSecretAccess{Visibility: appv1.OrgSecretVisibility_ORG_SECRET_VISIBILITY_SELECTED, UserIds: userIDs}
}

var adminsOnly = &appv1.OrgSecretAccess{Visibility: appv1.OrgSecretVisibility_ORG_SECRET_VISIBILITY_ADMINS_ONLY}

// The attack: a non-admin's profile names an admin-only org secret, and `env` in a session of
// a task started from it prints the value. Now the save is refused; so is a task from an
// admin's profile naming it; and a profile saved while the policy allowed it stops working
// when the policy narrows.
func TestSecurityProfileSecretsAreCheckedAtSaveAndAtResolve(t *testing.T) {
	testenv.RequirePlugins(t)
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	s.putOrgSecret(t, "org/deploy", "deploy-key-admins-only")
	aliceKey := s.mintKey(t, "alice@example.com", false)
	profiles := func(key string) appv1connect.ProfileServiceClient {
		return appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), auth.WithKey(key))
	}
	tasks := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(aliceKey))
	profile := &appv1.CreateProfileRequest{Name: "leak", ImageId: s.sb.Image, Harness: ptr("bash"),
		Secrets: []*appv1.ProfileSecret{{Ref: "org/deploy", EnvVar: "DEPLOY"}}}

	_, err := profiles(aliceKey).CreateProfile(ctx, connect.NewRequest(profile))
	wantDenied(t, err, "org/deploy")

	// An admin's profile may name it; a non-admin starting a task from it is refused.
	adminProfile, err := profiles(s.admin).CreateProfile(ctx, connect.NewRequest(profile))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{ProfileId: adminProfile.Msg.GetProfile().GetId(), Prompt: ptr("env")}))
	wantDenied(t, err, "org/deploy")

	// Shared with alice: her profile saves and her task's session has the value.
	s.setAccess(t, "org/deploy", selected(s.userID(t, "alice@example.com")))
	profile.Name = "alice's"
	mine, err := profiles(aliceKey).CreateProfile(ctx, connect.NewRequest(profile))
	if err != nil {
		t.Fatalf("a selected user's profile: %v", err)
	}
	created, err := tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{ProfileId: mine.Msg.GetProfile().GetId(), Prompt: ptr(`echo "deploy=$DEPLOY"`)}))
	if err != nil {
		t.Fatal(err)
	}
	sid := created.Msg.GetTask().GetSessions()[0].GetSessionId()
	if events := s.waitEvent(t, sid, "turn.done", promptOf(t, s, sid)); !strings.Contains(kindsOf(events), "assistant.message") || events[2].Text != "deploy=deploy-key-admins-only" {
		t.Fatalf("a selected user's task did not get the secret: %+v", events)
	}

	// Narrowed after the save: the next task is refused when the secret is resolved.
	s.setAccess(t, "org/deploy", adminsOnly)
	_, err = tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{ProfileId: mine.Msg.GetProfile().GetId(), Prompt: ptr("env")}))
	wantDenied(t, err, "org/deploy")
}

// The attack: a non-admin's automation sends an admin-only secret in an http block's
// secret_headers to a server they read. Now saving it is refused, by definition or by block
// overrides, and a run of one saved while the policy allowed it fails once the policy narrows,
// without sending the secret.
func TestSecurityAutomationSecretHeadersAreCheckedAtSaveAndAtResolve(t *testing.T) {
	as := newAutomationStack(t)
	ctx := t.Context()
	secrets := appv1connect.NewOrgSecretServiceClient(httpClient, as.rpcURL(), auth.WithKey(as.admin))
	if _, err := secrets.PutOrgSecret(ctx, connect.NewRequest(&appv1.PutOrgSecretRequest{Name: "org.api-token", Value: "Bearer admins-only"})); err != nil {
		t.Fatal(err)
	}
	aliceKey := auth.WithKey(as.mintKey(t, "alice@example.com", false))
	alice := appv1connect.NewAutomationServiceClient(httpClient, as.rpcURL(), aliceKey)
	aliceRuns := appv1connect.NewAutomationRunServiceClient(httpClient, as.rpcURL(), aliceKey)
	withHeader := `{"version":1,"entrypoints":[{"id":"manual","type":"manual"}],
		"blocks":[{"id":"send","type":"http","url":"` + as.upstream.URL + `/x","secret_headers":{"Authorization":"org.api-token"}}]}`
	plain := `{"version":1,"entrypoints":[{"id":"manual","type":"manual"}],
		"blocks":[{"id":"send","type":"http","url":"` + as.upstream.URL + `/x"}]}`

	_, err := alice.CreateAutomation(ctx, connect.NewRequest(&appv1.CreateAutomationRequest{Name: "leak", DefinitionJson: withHeader}))
	wantDenied(t, err, "org.api-token")
	own, err := alice.CreateAutomation(ctx, connect.NewRequest(&appv1.CreateAutomationRequest{Name: "plain", Enabled: true, DefinitionJson: plain}))
	if err != nil {
		t.Fatal(err)
	}
	id := own.Msg.GetAutomation().GetId()
	_, err = alice.SaveVersion(ctx, connect.NewRequest(&appv1.SaveVersionRequest{AutomationId: id, DefinitionJson: withHeader}))
	wantDenied(t, err, "org.api-token")
	_, err = alice.SetBlockOverrides(ctx, connect.NewRequest(&appv1.SetBlockOverridesRequest{AutomationId: id, OverridesJson: `{"send":{"secret_headers":{"Authorization":"org.api-token"}}}`}))
	wantDenied(t, err, "org.api-token")

	// Shared with alice: the version saves and the run sends the header.
	as.setAccess(t, "org.api-token", selected(as.userID(t, "alice@example.com")))
	if _, err := alice.SaveVersion(ctx, connect.NewRequest(&appv1.SaveVersionRequest{AutomationId: id, DefinitionJson: withHeader})); err != nil {
		t.Fatalf("a selected user's version: %v", err)
	}
	run := func() *appv1.AutomationRun {
		start, err := alice.RunNow(ctx, connect.NewRequest(&appv1.RunNowRequest{AutomationId: id}))
		if err != nil {
			t.Fatal(err)
		}
		var done *appv1.AutomationRun
		testkit.Eventually(t, 30*time.Second, "the run ending", func() (bool, string) {
			resp, err := aliceRuns.GetRun(ctx, connect.NewRequest(&appv1.GetRunRequest{RunId: start.Msg.GetRunId()}))
			if err != nil {
				t.Fatalf("the owner reads her run: %v", err)
			}
			done = resp.Msg.GetRun()
			st := done.GetBrief().GetStatus()
			return st == "completed" || st == "failed", "run is " + st
		})
		return done
	}
	if r := run(); r.GetBrief().GetStatus() != "completed" || as.lastAuth.Load() != "Bearer admins-only" {
		t.Fatalf("allowed run %s (%s), upstream saw %v", r.GetBrief().GetStatus(), r.GetBrief().GetError(), as.lastAuth.Load())
	}

	// Narrowed after the save: the next run fails at the block, naming the secret, and sends nothing.
	as.setAccess(t, "org.api-token", adminsOnly)
	calls := as.calls.Load()
	r := run()
	if r.GetBrief().GetStatus() != "failed" || !strings.Contains(r.GetBrief().GetError(), `"org.api-token"`) || !strings.Contains(r.GetBrief().GetError(), "permission_denied") {
		t.Fatalf("run after narrowing: %s: %s", r.GetBrief().GetStatus(), r.GetBrief().GetError())
	}
	if as.calls.Load() != calls {
		t.Fatal("the run called the upstream after the policy narrowed")
	}
}

// The attack: a user reads the outputs of another user's automation runs (what its secrets and
// webhooks fetched). Runs are now their automation's owner's and admins' only; others hear
// not_found.
func TestSecurityRunOutputsAreTheirAutomationsReaders(t *testing.T) {
	as := newAutomationStack(t)
	ctx := t.Context()
	aliceKey := auth.WithKey(as.mintKey(t, "alice@example.com", false))
	alice := appv1connect.NewAutomationServiceClient(httpClient, as.rpcURL(), aliceKey)
	created, err := alice.CreateAutomation(ctx, connect.NewRequest(&appv1.CreateAutomationRequest{Name: "mine", DefinitionJson: `{"version":1,
		"entrypoints":[{"id":"manual","type":"manual"}],
		"blocks":[{"id":"fetch","type":"http","url":"` + as.upstream.URL + `/private"}]}`}))
	if err != nil {
		t.Fatal(err)
	}
	id := created.Msg.GetAutomation().GetId()
	start, err := alice.RunNow(ctx, connect.NewRequest(&appv1.RunNowRequest{AutomationId: id}))
	if err != nil {
		t.Fatal(err)
	}
	runID := start.Msg.GetRunId()
	// The admin reads every run (waitRun uses the admin's key).
	if r := as.waitRun(t, runID); r.GetSteps()[0].GetOutputsJson() == "" {
		t.Fatalf("the admin sees no outputs: %v", r)
	}
	aliceRuns := appv1connect.NewAutomationRunServiceClient(httpClient, as.rpcURL(), aliceKey)
	if r, err := aliceRuns.GetRun(ctx, connect.NewRequest(&appv1.GetRunRequest{RunId: runID})); err != nil || r.Msg.GetRun().GetSteps()[0].GetOutputsJson() == "" {
		t.Fatalf("the owner reads her run: %v", err)
	}

	bob := appv1connect.NewAutomationRunServiceClient(httpClient, as.rpcURL(), auth.WithKey(as.mintKey(t, "bob@example.com", false)))
	for name, call := range map[string]func() error{
		"GetRun": func() error {
			_, err := bob.GetRun(ctx, connect.NewRequest(&appv1.GetRunRequest{RunId: runID}))
			return err
		},
		"ListRuns": func() error {
			_, err := bob.ListRuns(ctx, connect.NewRequest(&appv1.ListRunsRequest{AutomationId: id, IncludeFiltered: true}))
			return err
		},
		"ListInstances": func() error {
			_, err := bob.ListInstances(ctx, connect.NewRequest(&appv1.ListInstancesRequest{AutomationId: id}))
			return err
		},
		"ListRecentDrops": func() error {
			_, err := bob.ListRecentDrops(ctx, connect.NewRequest(&appv1.ListRecentDropsRequest{AutomationId: id}))
			return err
		},
		"RetryRun": func() error {
			_, err := bob.RetryRun(ctx, connect.NewRequest(&appv1.RetryRunRequest{RunId: runID}))
			return err
		},
	} {
		t.Run("another user's "+name, func(t *testing.T) {
			testenv.WantCode(t, call(), connect.CodeNotFound)
		})
	}
}

// The attack: a user's automation subscribes to another user's webhook registration
// ("webhook.<id>") and reads every delivery in its runs. Now an automation may subscribe only
// to registrations its owner can read; another's is not_found, as it is to read.
func TestSecurityAutomationsSubscribeOnlyToWebhooksTheirOwnerReads(t *testing.T) {
	as := newAutomationStack(t)
	ctx := t.Context()
	adminHook, err := as.webhooks.CreateWebhookRegistration(ctx, connect.NewRequest(&appv1.CreateWebhookRegistrationRequest{Name: "ops", Provider: "webhook"}))
	if err != nil {
		t.Fatal(err)
	}
	bobKey := auth.WithKey(as.mintKey(t, "bob@example.com", false))
	bob := appv1connect.NewAutomationServiceClient(httpClient, as.rpcURL(), bobKey)
	bobHook, err := appv1connect.NewWebhookRegistrationServiceClient(httpClient, as.rpcURL(), bobKey).
		CreateWebhookRegistration(ctx, connect.NewRequest(&appv1.CreateWebhookRegistrationRequest{Name: "bob's", Provider: "webhook"}))
	if err != nil {
		t.Fatal(err)
	}
	subscribe := func(c appv1connect.AutomationServiceClient, hook string) error {
		_, err := c.CreateAutomation(ctx, connect.NewRequest(&appv1.CreateAutomationRequest{Name: "on " + hook, DefinitionJson: `{"version":1,
			"entrypoints":[{"id":"hook","type":"event","event_key":"webhook.` + hook + `"}],
			"blocks":[{"id":"look","type":"code","source":"return event"}]}`}))
		return err
	}
	adminID, bobID := adminHook.Msg.GetRegistration().GetId(), bobHook.Msg.GetRegistration().GetId()
	err = subscribe(bob, adminID)
	testenv.WantCode(t, err, connect.CodeNotFound)
	if !strings.Contains(err.Error(), adminID) {
		t.Fatalf("the refusal does not name the registration: %v", err)
	}
	testenv.WantCode(t, subscribe(bob, "hook_unknown0000000000000000"), connect.CodeNotFound)
	if err := subscribe(bob, bobID); err != nil {
		t.Fatalf("bob subscribing to his own registration: %v", err)
	}
	if err := subscribe(as.automations, bobID); err != nil {
		t.Fatalf("an admin subscribing to any registration: %v", err)
	}
}
