package oauthcreds

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/records/credentials"
)

// No answer (but the broker's, which exists to hand a session its bundle), no error, no
// callback page, no log line and no stored record in the clear holds a token, a device or
// authorization code, the client secret, a PKCE verifier or the provider's error descriptions,
// through every flow: device (pending, denied), redirect (completed, replayed, refused by the
// provider), the callback, refresh (renewed, revoked) and the broker's refusals.
func TestSecurityNoTokenSecretOrVerifierLeaks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var seen []string
	answer := func(m proto.Message, err error) {
		if err != nil {
			seen = append(seen, err.Error())
			return
		}
		b, _ := protojson.Marshal(m)
		seen = append(seen, string(b))
	}
	msg := func(r interface{ Any() any }, err error) {
		if err != nil {
			answer(nil, err)
			return
		}
		answer(r.Any().(proto.Message), nil)
	}
	sweep := func(d time.Duration) {
		h.clock.Advance(d)
		if err := h.svc.Sweep(t.Context()); err != nil {
			seen = append(seen, err.Error())
		}
	}

	// Device flows: one approved after pending, one denied.
	for _, answers := range [][]string{{"authorization_pending", "token"}, {"access_denied"}} {
		r, err := h.svc.BeginFlow(h.alice, connect.NewRequest(&appv1.BeginFlowRequest{Subject: userSubject, Provider: "acme"}))
		msg(r, err)
		h.provider.Script(answers...)
		for range answers {
			sweep(5 * time.Second)
		}
		g, err := h.svc.GetFlow(h.alice, connect.NewRequest(&appv1.GetFlowRequest{Subject: userSubject, FlowId: r.Msg.GetFlow().GetId()}))
		msg(g, err)
	}
	// Redirect flows: completed through the callback page, replayed, and refused by the provider.
	var verifiers []string
	page := func(q url.Values) {
		rec := httptest.NewRecorder()
		h.svc.Callback(func(*http.Request) (auth.Principal, error) { return alice, nil }).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, httpapi.OAuthCallbackPath+"?"+q.Encode(), nil))
		body, _ := io.ReadAll(rec.Body)
		seen = append(seen, string(body))
	}
	b, err := h.svc.BeginRedirectFlow(h.alice, connect.NewRequest(&appv1.BeginRedirectFlowRequest{Subject: userSubject, Provider: "acme", RedirectUri: redirectURI}))
	msg(b, err)
	code, state := h.provider.Authorize(b.Msg.GetAuthorizeUrl())
	f, _ := h.svc.d.Flows.Get(t.Context(), state)
	v, _ := h.svc.d.Sealer.Open(f.Sealed, credentials.FlowOwner(state))
	verifiers = append(verifiers, string(v))
	page(url.Values{"state": {state}, "code": {code}})
	page(url.Values{"state": {state}, "code": {code}})
	other, _ := beginRedirect(t, h, nil)
	c, err := complete(h, other, code, redirectURI)
	msg(c, err)
	l, err := h.svc.ListCredentials(h.alice, connect.NewRequest(&appv1.ListCredentialsRequest{Subject: userSubject}))
	msg(l, err)
	// Refresh: renewed, then refused (revoked).
	sweep(56 * time.Minute)
	h.provider.ForgetRefreshTokens()
	sweep(56 * time.Minute)
	l, err = h.svc.ListCredentials(h.alice, connect.NewRequest(&appv1.ListCredentialsRequest{Subject: userSubject}))
	msg(l, err)
	// The broker's refusals.
	tok := brokeredSession(t, h, "sess_sec")
	_, err = h.svc.FetchSessionCredential(h.alice, connect.NewRequest(&appv1.FetchSessionCredentialRequest{SessionId: "sess_other", BrokerToken: tok}))
	answer(nil, err)
	_, err = update(h, "sess_sec", tok, 99, `{"claudeAiOauth":{"accessToken":"accesstoken-from-session-SECRET"}}`)
	answer(nil, err)

	// What is stored in the clear: every flow and credential document, without its sealed field.
	for _, coll := range []string{credentials.FlowCollection, credentials.Collection} {
		snaps, err := h.db.Collection(coll).Documents(t.Context()).GetAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, snap := range snaps {
			data := snap.Data()
			delete(data, "sealed")
			seen = append(seen, fmt.Sprint(data))
		}
	}
	seen = append(seen, h.logs.String())

	secret := regexp.MustCompile(`(accesstoken|refreshtoken|devicecode|authcode)-\d+-SECRET|from-session-SECRET|descriptions-are-not-echoed`)
	forbidden := append([]string{h.provider.ClientSecret}, verifiers...)
	for _, s := range seen {
		if m := secret.FindString(s); m != "" {
			t.Errorf("%q leaks in: %s", m, s)
		}
		for _, f := range forbidden {
			if f != "" && strings.Contains(s, f) {
				t.Errorf("a client secret or verifier leaks in: %s", s)
			}
		}
	}
	// The detector finds a token where one is meant to be: in the broker's answer.
	connectAlice(t, h)
	fetched, err := h.svc.FetchSessionCredential(h.alice, connect.NewRequest(&appv1.FetchSessionCredentialRequest{SessionId: "sess_sec", BrokerToken: tok}))
	if err != nil || !secret.Match(fetched.Msg.GetOpaqueBundle()) {
		t.Fatalf("the broker's answer holds no token the test recognises (%v)", err)
	}
	if !strings.Contains(h.logs.String(), "oauth credential revoked") || !strings.Contains(h.logs.String(), "oauth device flow completed") {
		t.Fatalf("the flows did not run as the test means them to; logs:\n%s", h.logs.String())
	}
}
