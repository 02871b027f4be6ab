package webhooks

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/ids"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

const (
	alice = "user_alice"
	bob   = "user_bob"
	root  = "user_root"
)

// as is a request context for a caller; root is the admin.
func as(t testing.TB, userID string) context.Context {
	return auth.WithPrincipal(t.Context(), auth.Principal{UserID: userID, Admin: userID == root})
}

func limits() config.WebhookLimits { return config.Default().Limits.Webhooks }

// newService is a service on its own Firestore and Pub/Sub projects (topics provisioned).
func newService(t testing.TB, lim config.WebhookLimits) (*Service, *clock.Fake) {
	t.Helper()
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	c := clock.NewFake(t0)
	return New(Deps{DB: db, Sealer: sealer, PubSub: testenv.PubSub(t), Clock: c, Limits: lim, Log: testLog(t)}), c
}

func create(t testing.TB, s *Service, userID, provider string, secret *string) *appv1.CreateWebhookRegistrationResponse {
	t.Helper()
	resp, err := s.CreateWebhookRegistration(as(t, userID), connect.NewRequest(&appv1.CreateWebhookRegistrationRequest{
		Name: "CI events", Provider: provider, Secret: secret,
	}))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Msg
}

func list(t testing.TB, s *Service, userID string) []*appv1.WebhookRegistration {
	t.Helper()
	resp, err := s.ListWebhookRegistrations(as(t, userID), connect.NewRequest(&appv1.ListWebhookRegistrationsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Msg.GetRegistrations()
}

var generatedSecret = regexp.MustCompile(`^[0-9a-f]{64}$`)

func TestRegistrationLifecycle(t *testing.T) {
	t.Parallel()
	s, c := newService(t, limits())
	created := create(t, s, alice, "github", nil)
	reg := created.GetRegistration()
	if !generatedSecret.MatchString(created.GetSecret()) {
		t.Errorf("generated secret %q, want 32 random bytes in hex", created.GetSecret())
	}
	if !ids.Valid(idPrefix, reg.GetId()) {
		t.Errorf("id %q is not a %s id", reg.GetId(), idPrefix)
	}
	want := &appv1.WebhookRegistration{
		Id: reg.GetId(), Name: "CI events", Provider: "github", UrlPath: "/api/v1/webhooks/" + reg.GetId(),
		CreatedByUserId: alice, CreatedAt: clock.Format(t0), UpdatedAt: clock.Format(t0), SecretRotatedAt: clock.Format(t0),
	}
	if !proto.Equal(reg, want) {
		t.Errorf("created %v, want %v", reg, want)
	}

	listed := list(t, s, alice)
	if len(listed) != 1 || !proto.Equal(listed[0], want) {
		t.Errorf("listed %v, want just %v", listed, want)
	}
	if js, _ := protojson.Marshal(&appv1.ListWebhookRegistrationsResponse{Registrations: listed}); strings.Contains(string(js), created.GetSecret()) {
		t.Errorf("the list shows the secret: %s", js)
	}

	c.Advance(time.Hour)
	rotated, err := s.RotateWebhookSecret(as(t, alice), connect.NewRequest(&appv1.RotateWebhookSecretRequest{Id: reg.GetId(), Secret: proto.String("a-chosen-secret-of-some-length")}))
	if err != nil {
		t.Fatal(err)
	}
	want.UpdatedAt, want.SecretRotatedAt = clock.Format(t0.Add(time.Hour)), clock.Format(t0.Add(time.Hour))
	if rotated.Msg.GetSecret() != "a-chosen-secret-of-some-length" || !proto.Equal(rotated.Msg.GetRegistration(), want) {
		t.Errorf("rotated to %q, %v; want the chosen secret and %v", rotated.Msg.GetSecret(), rotated.Msg.GetRegistration(), want)
	}

	del := func() error {
		_, err := s.DeleteWebhookRegistration(as(t, alice), connect.NewRequest(&appv1.DeleteWebhookRegistrationRequest{Id: reg.GetId()}))
		return err
	}
	if err := del(); err != nil {
		t.Fatal(err)
	}
	if got := list(t, s, alice); len(got) != 0 {
		t.Errorf("listed %v after delete", got)
	}
	testenv.WantCode(t, del(), connect.CodeNotFound)
}

func TestOwnersAndAdminsOnly(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, limits())
	a := create(t, s, alice, "webhook", nil).GetRegistration()
	b := create(t, s, bob, "github", nil).GetRegistration()

	for _, tc := range []struct {
		caller string
		want   []string
	}{
		{alice, []string{a.GetId()}},
		{bob, []string{b.GetId()}},
		{root, []string{b.GetId(), a.GetId()}}, // newest first
		{"user_nobody", nil},
	} {
		var got []string
		for _, r := range list(t, s, tc.caller) {
			got = append(got, r.GetId())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s lists %v, want %v", tc.caller, got, tc.want)
		}
	}

	_, err := s.RotateWebhookSecret(as(t, bob), connect.NewRequest(&appv1.RotateWebhookSecretRequest{Id: a.GetId()}))
	testenv.WantCode(t, err, connect.CodeNotFound)
	_, err = s.DeleteWebhookRegistration(as(t, bob), connect.NewRequest(&appv1.DeleteWebhookRegistrationRequest{Id: a.GetId()}))
	testenv.WantCode(t, err, connect.CodeNotFound)

	if _, err := s.RotateWebhookSecret(as(t, root), connect.NewRequest(&appv1.RotateWebhookSecretRequest{Id: a.GetId()})); err != nil {
		t.Errorf("admin rotating alice's secret: %v", err)
	}
	if _, err := s.DeleteWebhookRegistration(as(t, root), connect.NewRequest(&appv1.DeleteWebhookRegistrationRequest{Id: a.GetId()})); err != nil {
		t.Errorf("admin deleting alice's registration: %v", err)
	}
}

func TestInvalidRequestsNameTheirFields(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, limits())
	for _, tc := range []struct {
		name string
		req  *appv1.CreateWebhookRegistrationRequest
		want []string
	}{
		{"nothing", &appv1.CreateWebhookRegistrationRequest{}, []string{"name", "provider"}},
		{"unknown provider", &appv1.CreateWebhookRegistrationRequest{Name: "x", Provider: "gitlab"}, []string{"provider"}},
		{"long name", &appv1.CreateWebhookRegistrationRequest{Name: strings.Repeat("n", maxNameLen+1), Provider: "github"}, []string{"name"}},
		{"control in name", &appv1.CreateWebhookRegistrationRequest{Name: "a\nb", Provider: "github"}, []string{"name"}},
		{"short secret", &appv1.CreateWebhookRegistrationRequest{Name: "x", Provider: "github", Secret: proto.String("hunter2")}, []string{"secret"}},
		{"long secret", &appv1.CreateWebhookRegistrationRequest{Name: "x", Provider: "github", Secret: proto.String(strings.Repeat("s", maxSecretLen+1))}, []string{"secret"}},
		{"secret ending in a space", &appv1.CreateWebhookRegistrationRequest{Name: "x", Provider: "webhook", Secret: proto.String("sixteen chars or more ")}, []string{"secret"}},
		{"secret with a tab", &appv1.CreateWebhookRegistrationRequest{Name: "x", Provider: "webhook", Secret: proto.String("sixteen\tchars or more")}, []string{"secret"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.CreateWebhookRegistration(as(t, alice), connect.NewRequest(tc.req))
			if got := testenv.ViolatedFields(t, err); !slices.Equal(got, tc.want) {
				t.Errorf("violated %v, want %v", got, tc.want)
			}
		})
	}
	_, err := s.RotateWebhookSecret(as(t, alice), connect.NewRequest(&appv1.RotateWebhookSecretRequest{Secret: proto.String("short")}))
	if got := testenv.ViolatedFields(t, err); !slices.Equal(got, []string{"id", "secret"}) {
		t.Errorf("rotate violated %v, want id and secret", got)
	}
	_, err = s.RotateWebhookSecret(as(t, alice), connect.NewRequest(&appv1.RotateWebhookSecretRequest{Id: "hook_nope"}))
	testenv.WantCode(t, err, connect.CodeNotFound)
}

func TestCreatePastTheCapIsRefused(t *testing.T) {
	t.Parallel()
	lim := limits()
	lim.Max = 2
	s, _ := newService(t, lim)
	create(t, s, alice, "github", nil)
	create(t, s, bob, "github", nil)
	_, err := s.CreateWebhookRegistration(as(t, root), connect.NewRequest(&appv1.CreateWebhookRegistrationRequest{Name: "third", Provider: "webhook"}))
	testenv.WantCode(t, err, connect.CodeResourceExhausted)
}
