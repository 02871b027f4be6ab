package e2e

import (
	"net/http"
	"testing"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/automation/records"
	"github.com/hangar-dev/hangar/composition"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
)

// The attack: a user drafts automations from a profile TaskService refuses them. Each call
// used to store a draft, then fail to start its agent with a 500, leaving the draft behind.
// Now the refusal is TaskService's own answer and nothing is stored.
func TestSecurityARefusedDraftIsItsRefusalAndStoresNoDraft(t *testing.T) {
	db, _ := testenv.Firestore(t)
	s := serve(t, composition.New(composition.Deps{DB: db, Config: config.Default()}))
	key := auth.WithKey(s.mintKey(t, "drafter@example.com", false))
	automations := appv1connect.NewAutomationServiceClient(http.DefaultClient, s.rpcURL(), key)
	profiles := appv1connect.NewProfileServiceClient(http.DefaultClient, s.rpcURL(), key)
	archived, err := profiles.CreateProfile(t.Context(), connect.NewRequest(&appv1.CreateProfileRequest{Name: "gone", ImageId: "busybox", Harness: ptr("bash")}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := profiles.DeleteProfile(t.Context(), connect.NewRequest(&appv1.DeleteProfileRequest{Id: archived.Msg.GetProfile().GetId()})); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, profile string
		want          connect.Code
	}{
		{"an unknown profile", "prof_01jd3zzzzzzzzzzzzzzzzzzzzz", connect.CodeNotFound},
		{"an archived profile", archived.Msg.GetProfile().GetId(), connect.CodeFailedPrecondition},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, idempotencyKey := range []string{"", "k-" + c.name} {
				_, err := automations.DraftAutomation(t.Context(), connect.NewRequest(&appv1.DraftAutomationRequest{
					Prompt: "label bugs", ProfileId: c.profile, IdempotencyKey: idempotencyKey,
				}))
				if got := connect.CodeOf(err); got != c.want {
					t.Errorf("key %q: got %v (%v), want %v", idempotencyKey, got, err, c.want)
				}
			}
		})
	}
	drafts, err := db.Collection(records.Collection).Where("kind", "==", records.KindDraft).Documents(t.Context()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range drafts {
		t.Errorf("a refused draft was stored: %v", d.Data())
	}
}
