package oauthcreds

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/records/credentials"
	"github.com/hangar-dev/hangar/records/secrets"
)

// A device flow moves as RFC 8628 3.5 says the token endpoint answers: authorization_pending
// waits, slow_down adds 5 s to the interval, a token completes it (the credential stored with
// its account), access_denied denies it and expired_token expires it. The sweep polls; polls
// before the interval has passed do nothing.
func TestDeviceFlowFollowsTheTokenEndpointsAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		answers   []string
		status    string
		errorCode string
		interval  int64
	}{
		{"approved after pending", []string{"authorization_pending", "authorization_pending", "token"}, credentials.FlowCompleted, "", 5},
		{"slow_down slows the polls", []string{"slow_down", "authorization_pending", "token"}, credentials.FlowCompleted, "", 10},
		{"denied", []string{"authorization_pending", "access_denied"}, credentials.FlowDenied, "access_denied", 5},
		{"expired at the provider", []string{"expired_token"}, credentials.FlowExpired, "expired_token", 5},
		{"another error fails it", []string{"invalid_client_metadata"}, credentials.FlowFailed, "invalid_client_metadata", 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			begun, err := h.svc.BeginFlow(h.alice, connect.NewRequest(&appv1.BeginFlowRequest{Subject: userSubject, Provider: "acme"}))
			if err != nil {
				t.Fatal(err)
			}
			if begun.Msg.GetUserCode() != "WDJB-MJHT" || begun.Msg.GetVerificationUrl() != h.provider.URL("/activate") || begun.Msg.GetFlow().GetStatus() != credentials.FlowPending {
				t.Fatalf("begin answered %v", begun.Msg)
			}
			h.provider.Script(tc.answers...)
			id := begun.Msg.GetFlow().GetId()
			// Not due yet: the sweep does not poll.
			if err := h.svc.Sweep(t.Context()); err != nil {
				t.Fatal(err)
			}
			if polls(h) != 0 {
				t.Fatalf("polled %d times before the interval passed", polls(h))
			}
			var flow *credentials.Flow
			for range tc.answers {
				f, err := h.svc.d.Flows.Get(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				h.clock.Advance(time.Duration(f.Interval) * time.Second)
				if err := h.svc.Sweep(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if flow, err = h.svc.d.Flows.Get(t.Context(), id); err != nil {
				t.Fatal(err)
			}
			if polls(h) != len(tc.answers) || flow.Status != tc.status || flow.ErrorCode != tc.errorCode || flow.Interval != tc.interval {
				t.Fatalf("after %d polls: %s/%s interval %d; want %d polls, %s/%s interval %d",
					polls(h), flow.Status, flow.ErrorCode, flow.Interval, len(tc.answers), tc.status, tc.errorCode, tc.interval)
			}
			got, err := h.svc.GetFlow(h.alice, connect.NewRequest(&appv1.GetFlowRequest{Subject: userSubject, FlowId: id}))
			if err != nil || got.Msg.GetFlow().GetStatus() != tc.status || got.Msg.GetFlow().GetErrorCode() != tc.errorCode {
				t.Fatalf("GetFlow: %v, %v", got, err)
			}
			list, err := h.svc.ListCredentials(h.alice, connect.NewRequest(&appv1.ListCredentialsRequest{Subject: userSubject}))
			if err != nil {
				t.Fatal(err)
			}
			if tc.status != credentials.FlowCompleted {
				if len(list.Msg.GetCredentials()) != 0 {
					t.Fatalf("a %s flow stored a credential", tc.status)
				}
				return
			}
			c := list.Msg.GetCredentials()[0]
			if c.GetStatus() != credentials.StatusConnected || c.GetVersion() != 1 || c.GetExpiresAt() == "" ||
				c.GetAccount().GetDisplayName() != "alice@example.com" || c.GetAccount().GetPlanType() != "pro" {
				t.Fatalf("credential %v", c)
			}
			bundle, _, err := h.svc.d.Store.Bundle(t.Context(), credentials.Subject{Kind: credentials.KindUser, ID: alice.UserID}, "acme")
			if err != nil || credentials.DecodeBundle(credentials.BundleClaudeCode, bundle).RefreshToken == "" {
				t.Fatalf("the stored bundle holds no refresh token (%v)", err)
			}
		})
	}
}

// GetFlow polls a due flow itself, so a caller waiting on it needs no tick; another user's flow
// is not_found; CancelFlow ends a pending flow and answers an ended one as it is.
func TestGetFlowPollsAndCancelFlowEnds(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	begun, err := h.svc.BeginFlow(h.alice, connect.NewRequest(&appv1.BeginFlowRequest{Subject: userSubject, Provider: "acme"}))
	if err != nil {
		t.Fatal(err)
	}
	id := begun.Msg.GetFlow().GetId()
	h.provider.Script("authorization_pending")
	h.clock.Advance(5 * time.Second)
	got, err := h.svc.GetFlow(h.alice, connect.NewRequest(&appv1.GetFlowRequest{Subject: userSubject, FlowId: id}))
	if err != nil || got.Msg.GetFlow().GetStatus() != credentials.FlowPending || polls(h) != 1 {
		t.Fatalf("GetFlow: %v, %v after %d polls", got, err, polls(h))
	}
	_, err = h.svc.GetFlow(h.bob, connect.NewRequest(&appv1.GetFlowRequest{Subject: userSubject, FlowId: id}))
	testenv.WantCode(t, err, connect.CodeNotFound)
	_, err = h.svc.CancelFlow(h.bob, connect.NewRequest(&appv1.CancelFlowRequest{Subject: userSubject, FlowId: id}))
	testenv.WantCode(t, err, connect.CodeNotFound)
	for range 2 {
		c, err := h.svc.CancelFlow(h.alice, connect.NewRequest(&appv1.CancelFlowRequest{Subject: userSubject, FlowId: id}))
		if err != nil || c.Msg.GetFlow().GetStatus() != credentials.FlowCancelled || c.Msg.GetFlow().GetErrorCode() != "cancelled" {
			t.Fatalf("CancelFlow: %v, %v", c, err)
		}
	}
	h.clock.Advance(time.Minute)
	if err := h.svc.Sweep(t.Context()); err != nil || polls(h) != 1 {
		t.Fatalf("a cancelled flow was polled (%d polls, %v)", polls(h), err)
	}
	// A flow nobody polls expires at its expires_at.
	begun, err = h.svc.BeginFlow(h.alice, connect.NewRequest(&appv1.BeginFlowRequest{Subject: userSubject, Provider: "acme"}))
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Hour)
	got, err = h.svc.GetFlow(h.alice, connect.NewRequest(&appv1.GetFlowRequest{Subject: userSubject, FlowId: begun.Msg.GetFlow().GetId()}))
	if err != nil || got.Msg.GetFlow().GetStatus() != credentials.FlowExpired || got.Msg.GetFlow().GetErrorCode() != "expired_token" {
		t.Fatalf("GetFlow after expiry: %v, %v", got, err)
	}
}

// The flow table is the one documented: every flow starts pending and ends in one move.
func TestFlowStatesEndInOneMove(t *testing.T) {
	t.Parallel()
	ended := []string{credentials.FlowCompleted, credentials.FlowDenied, credentials.FlowExpired, credentials.FlowCancelled, credentials.FlowFailed}
	for _, to := range ended {
		if !credentials.FlowStates.CanMove(credentials.FlowPending, to) {
			t.Errorf("pending cannot become %s", to)
		}
		for _, again := range append(ended, credentials.FlowPending) {
			if credentials.FlowStates.CanMove(to, again) {
				t.Errorf("%s can become %s", to, again)
			}
		}
	}
}

func polls(h *harness) int {
	n, _ := h.provider.Counts()
	return n
}

// A subject has at most maxPendingFlows pending flows: the next is resource_exhausted until one
// ends (cancelled here) or expires.
func TestPendingFlowsAreBoundedPerSubject(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var first string
	for i := range maxPendingFlows {
		id, _ := beginRedirect(t, h, nil)
		if i == 0 {
			first = id
		}
	}
	_, err := h.svc.BeginFlow(h.alice, connect.NewRequest(&appv1.BeginFlowRequest{Subject: userSubject, Provider: "acme"}))
	testenv.WantCode(t, err, connect.CodeResourceExhausted)
	if _, err := h.svc.BeginFlow(h.bob, connect.NewRequest(&appv1.BeginFlowRequest{Subject: userSubject, Provider: "acme"})); err != nil {
		t.Fatalf("bob is held to alice's flows: %v", err)
	}
	if _, err := h.svc.CancelFlow(h.alice, connect.NewRequest(&appv1.CancelFlowRequest{Subject: userSubject, FlowId: first})); err != nil {
		t.Fatal(err)
	}
	beginRedirect(t, h, nil)
	h.clock.Advance(redirectFlowTTL)
	beginRedirect(t, h, nil)
}

// A device flow's polls use the client secret as the principal that began the flow, so a
// secret shared with one service key serves the sweep's polls of that key's flow.
func TestDevicePollsUseSecretsAsTheFlowsStarter(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	only := secrets.Access{Visibility: secrets.Selected, ServiceKeyIDs: []string{alice.KeyID}}
	if _, err := h.svc.d.Secrets.SetAccess(t.Context(), "ACME_CLIENT_SECRET", only, "user_root"); err != nil {
		t.Fatal(err)
	}
	begun, err := h.svc.BeginFlow(h.alice, connect.NewRequest(&appv1.BeginFlowRequest{Subject: userSubject, Provider: "acme"}))
	if err != nil {
		t.Fatal(err)
	}
	h.provider.Script("token")
	h.clock.Advance(5 * time.Second)
	if err := h.svc.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	f, err := h.svc.d.Flows.Get(t.Context(), begun.Msg.GetFlow().GetId())
	if err != nil || f.Status != credentials.FlowCompleted {
		t.Fatalf("flow %+v, %v", f, err)
	}
}
