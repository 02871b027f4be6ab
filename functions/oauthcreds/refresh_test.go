package oauthcreds

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/records/credentials"
)

var aliceSub = credentials.Subject{Kind: credentials.KindUser, ID: alice.UserID}

// connect signs alice in to acme by a redirect flow and answers the credential.
func connectAlice(t *testing.T, h *harness) *appv1.OAuthCredentialMeta {
	t.Helper()
	id, authorizeURL := beginRedirect(t, h, nil)
	code, _ := h.provider.Authorize(authorizeURL)
	done, err := complete(h, id, code, redirectURI)
	if err != nil {
		t.Fatal(err)
	}
	return done.Msg.GetCredential()
}

func meta(t *testing.T, h *harness) *appv1.OAuthCredentialMeta {
	t.Helper()
	list, err := h.svc.ListCredentials(h.alice, connect.NewRequest(&appv1.ListCredentialsRequest{Subject: userSubject}))
	if err != nil || len(list.Msg.GetCredentials()) != 1 {
		t.Fatalf("list: %v, %v", list, err)
	}
	return list.Msg.GetCredentials()[0]
}

// A credential with a refresh token is refreshed a margin before it expires: a new bundle in the
// same format, a later expires_at, a version one higher. Before the margin nothing happens.
// Failures are retried until the token expires; then a refresh token the provider refuses
// makes it revoked, another refusal refresh_failed; one with nothing to refresh with expires.
func TestRefreshRenewsBeforeExpiryAndMarksWhatCannotBe(t *testing.T) {
	t.Parallel()
	t.Run("renewed", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		first := connectAlice(t, h)
		old, _, _ := h.svc.d.Store.Bundle(t.Context(), aliceSub, "acme")
		h.clock.Advance(50 * time.Minute) // 10 minutes before expiry: not yet due
		if err := h.svc.Sweep(t.Context()); err != nil {
			t.Fatal(err)
		}
		if m := meta(t, h); m.GetVersion() != first.GetVersion() {
			t.Fatalf("refreshed early: version %d", m.GetVersion())
		}
		h.clock.Advance(6 * time.Minute)
		if err := h.svc.Sweep(t.Context()); err != nil {
			t.Fatal(err)
		}
		m := meta(t, h)
		if m.GetVersion() != first.GetVersion()+1 || m.GetStatus() != credentials.StatusConnected || m.GetExpiresAt() <= first.GetExpiresAt() {
			t.Fatalf("after refresh %v (was %v)", m, first)
		}
		now, _, _ := h.svc.d.Store.Bundle(t.Context(), aliceSub, "acme")
		o, n := credentials.DecodeBundle(credentials.BundleClaudeCode, old), credentials.DecodeBundle(credentials.BundleClaudeCode, now)
		if n.AccessToken == o.AccessToken || n.RefreshToken == o.RefreshToken || n.RefreshToken == "" {
			t.Fatal("the refresh kept the old tokens")
		}
	})
	t.Run("revoked", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		connectAlice(t, h)
		h.provider.ForgetRefreshTokens()
		h.clock.Advance(56 * time.Minute)
		_ = h.svc.Sweep(t.Context())
		// Before expiry a refusal is retried: a session may be saving a newer bundle.
		if m := meta(t, h); m.GetStatus() != credentials.StatusConnected {
			t.Fatalf("revoked before expiry: %v", m)
		}
		h.clock.Advance(5 * time.Minute)
		_ = h.svc.Sweep(t.Context())
		if m := meta(t, h); m.GetStatus() != credentials.StatusRevoked || m.GetConnected() {
			t.Fatalf("after invalid_grant past expiry %v", m)
		}
	})
	t.Run("refresh_failed", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		first := connectAlice(t, h)
		h.provider.SetRefreshError("temporarily_unavailable")
		h.clock.Advance(56 * time.Minute)
		_ = h.svc.Sweep(t.Context())
		if m := meta(t, h); m.GetStatus() != credentials.StatusConnected || m.GetVersion() != first.GetVersion() {
			t.Fatalf("a failure before expiry changed the credential: %v", m)
		}
		h.clock.Advance(5 * time.Minute) // past expiry and past the claim's lease
		_ = h.svc.Sweep(t.Context())
		if m := meta(t, h); m.GetStatus() != credentials.StatusRefreshFailed {
			t.Fatalf("after failures past expiry %v", m)
		}
	})
	t.Run("expired", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		_, err := h.svc.d.Store.Save(t.Context(), aliceSub, "acme", credentials.Grant{
			Bundle: `{"claudeAiOauth":{"accessToken":"at"}}`, ExpiresAt: h.clock.Now().Add(time.Hour),
		}, 0, "token")
		if err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(59 * time.Minute)
		_ = h.svc.Sweep(t.Context())
		if m := meta(t, h); m.GetStatus() != credentials.StatusConnected {
			t.Fatalf("expired early: %v", m)
		}
		h.clock.Advance(time.Minute)
		_ = h.svc.Sweep(t.Context())
		if m := meta(t, h); m.GetStatus() != credentials.StatusExpired || m.GetVersion() != 2 {
			t.Fatalf("after expiry %v", m)
		}
	})
}

// Disconnect honours expected_version, which every change grows.
func TestDisconnectHonoursExpectedVersion(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	first := connectAlice(t, h)
	h.clock.Advance(56 * time.Minute)
	if err := h.svc.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err := h.svc.Disconnect(h.alice, connect.NewRequest(&appv1.DisconnectRequest{Subject: userSubject, Provider: "acme", ExpectedVersion: first.GetVersion()}))
	if connect.CodeOf(err) != connect.CodeAborted {
		t.Fatalf("disconnect at a stale version: %v", err)
	}
	d, err := h.svc.Disconnect(h.alice, connect.NewRequest(&appv1.DisconnectRequest{Subject: userSubject, Provider: "acme", ExpectedVersion: first.GetVersion() + 1}))
	if err != nil || d.Msg.GetCredential().GetStatus() != credentials.StatusDisconnected {
		t.Fatalf("disconnect: %v, %v", d, err)
	}
}
