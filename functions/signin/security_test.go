package signin

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// TestSecurityNoSecretLeaksFromSignIn runs a sign-in, a device login, whoami and both
// sign-outs, then looks for every secret they handled where it must not be: the provider's
// client secret, code verifiers, access and ID tokens in no response and no log line; the
// session cookie only in its own Set-Cookie; the device code only in the answer that gives it;
// the API key only in the token answer; none of them in a log line or a stored record.
func TestSecurityNoSecretLeaksFromSignIn(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	e.signIn(t, b, ada)
	cookie := e.sessionCookie(b)
	da := e.deviceCode(t)
	e.poll(t, da.DeviceCode)
	e.decide(t, b, da.UserCode, "approve")
	_, key := e.poll(t, da.DeviceCode)
	if key == "" {
		t.Fatal("no key issued")
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+httpapi.WhoamiPath, nil)
	req.Header.Set(httpapi.APIKeyHeader, key)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("whoami: %v %v", resp, err)
	}
	e.form(t, http.DefaultClient, httpapi.LogoutPath, nil, http.Header{httpapi.APIKeyHeader: {key}})
	e.form(t, b, httpapi.LogoutPath, nil, http.Header{"Origin": {e.url}, auth.CSRFHeader: {"1"}})

	type secret struct {
		name, value string
		allowedAt   string // the one path whose response body may hold it
	}
	secrets := []secret{{"session cookie", cookie, ""}, {"device code", da.DeviceCode, httpapi.DeviceCodePath}, {"API key", key, httpapi.DeviceTokenPath}}
	for i, s := range e.idp.Secrets() {
		secrets = append(secrets, secret{name: fmt.Sprintf("provider secret %d", i), value: s})
	}
	if len(secrets) < 7 { // cookie, device code, key, client secret, a verifier, access and ID tokens
		t.Fatalf("only %d secrets to look for", len(secrets))
	}
	logs := e.logs.String()
	e.rec.mu.Lock()
	defer e.rec.mu.Unlock()
	for _, s := range secrets {
		if strings.Contains(logs, s.value) {
			t.Errorf("the log holds the %s", s.name)
		}
		for _, r := range e.rec.all {
			if r.path != s.allowedAt && strings.Contains(r.body.String(), s.value) {
				t.Errorf("the answer to %s holds the %s", r.path, s.name)
			}
			for name, vals := range r.header {
				for _, v := range vals {
					if strings.Contains(v, s.value) && !(name == "Set-Cookie" && strings.HasPrefix(v, auth.SessionCookie+"=") && s.name == "session cookie") {
						t.Errorf("the answer to %s holds the %s in %s", r.path, s.name, name)
					}
				}
			}
		}
	}
	for _, coll := range []string{"webSessions", flowsCollection, grantsCollection, userCodesCollection, "apiKeys", "users"} {
		docs, err := e.d.DB.Collection(coll).Documents(t.Context()).GetAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			stored := d.Ref.ID + fmt.Sprint(d.Data())
			for _, s := range secrets {
				if strings.Contains(stored, s.value) {
					t.Errorf("%s/%s holds the %s", coll, d.Ref.ID, s.name)
				}
			}
		}
	}
}
