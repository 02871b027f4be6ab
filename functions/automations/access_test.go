package automations

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/records/secrets"
)

// Saves check the automation's owner, not the caller: an admin editing alice's automation may
// not hand it a secret alice may not use, and bob duplicating an admin's automation becomes its
// owner, with his own rights.
func TestSavesCheckTheOwnersRightToSecretsAndWebhooks(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	c := clock.NewFake(t0)
	store := secrets.New(db, sealer, c.Now, secrets.Limits{MaxValueBytes: 64, MaxSecrets: 10})
	if _, _, err := store.Put(t.Context(), secrets.Put{Name: "org.token", Value: "v"}); err != nil {
		t.Fatal(err)
	}
	svc := New(Deps{DB: db, Clock: c, Limits: config.Default().Limits, Validator: testValidator(t), Access: Access{
		Secrets: store,
		Owner:   func(_ context.Context, user string) (auth.Principal, error) { return auth.Principal{UserID: user}, nil },
		Webhook: func(_ context.Context, p auth.Principal, id string) error {
			if p.Admin || id == "hook_alices" && p.UserID == alice {
				return nil
			}
			return apierr.NotFound("webhook registration", id)
		},
	}})
	const withSecret = `{"version":1,"entrypoints":[{"id":"go","type":"manual"}],
		"blocks":[{"id":"send","type":"http","url":"https://api.example.com","secret_headers":{"Authorization":"org.token"}}]}`
	const plain = `{"version":1,"entrypoints":[{"id":"go","type":"manual"}],"blocks":[{"id":"send","type":"http","url":"https://api.example.com"}]}`
	hooked := func(id string) string {
		return `{"version":1,"entrypoints":[{"id":"hook","type":"event","event_key":"webhook.` + id + `"}],"blocks":[{"id":"ok","type":"code","source":"return 1"}]}`
	}
	create := func(user, def string) (string, error) {
		resp, err := svc.CreateAutomation(as(t, user), connect.NewRequest(&appv1.CreateAutomationRequest{Name: "a", DefinitionJson: def}))
		if err != nil {
			return "", err
		}
		return resp.Msg.GetAutomation().GetId(), nil
	}
	alicesID, err := create(alice, plain)
	if err != nil {
		t.Fatal(err)
	}
	adminsID, err := create(admin, withSecret)
	if err != nil {
		t.Fatalf("an admin's own automation: %v", err)
	}
	cases := []struct {
		name string
		call func() error
		want connect.Code // 0: saved
	}{
		{"an admin giving alice's automation a secret alice may not use", func() error {
			_, err := svc.SaveVersion(as(t, admin), connect.NewRequest(&appv1.SaveVersionRequest{AutomationId: alicesID, DefinitionJson: withSecret}))
			return err
		}, connect.CodePermissionDenied},
		{"bob duplicating an admin's automation that sends an admins-only secret", func() error {
			_, err := svc.DuplicateAutomation(as(t, bob), connect.NewRequest(&appv1.DuplicateAutomationRequest{AutomationId: adminsID}))
			return err
		}, connect.CodePermissionDenied},
		{"bob subscribing to alice's webhook registration", func() error { _, err := create(bob, hooked("hook_alices")); return err }, connect.CodeNotFound},
		{"alice subscribing to her own", func() error { _, err := create(alice, hooked("hook_alices")); return err }, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if tc.want == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			testenv.WantCode(t, err, tc.want)
		})
	}
}
