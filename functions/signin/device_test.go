package signin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// deviceCode asks for a device code as `hangar login` does.
func (e *env) deviceCode(t *testing.T) deviceAuthorization {
	t.Helper()
	resp, body := e.form(t, http.DefaultClient, httpapi.DeviceCodePath, url.Values{"client_id": {httpapi.CLIClientID}, "machine": {"laptop"}}, nil)
	var da deviceAuthorization
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &da) != nil || da.DeviceCode == "" {
		t.Fatalf("device code: %s %s", resp.Status, body)
	}
	return da
}

// poll makes one token request for deviceCode and answers its RFC 8628 error ("" on success)
// and access token.
func (e *env) poll(t *testing.T, deviceCode string) (errCode, token string) {
	t.Helper()
	_, body := e.form(t, http.DefaultClient, httpapi.DeviceTokenPath, url.Values{
		"grant_type": {deviceGrantType}, "device_code": {deviceCode}, "client_id": {httpapi.CLIClientID},
	}, nil)
	var out struct {
		Error       string `json:"error"`
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("token answer %q: %v", body, err)
	}
	return out.Error, out.AccessToken
}

// decide answers a user code on the approval page with browser b; it returns the POST's status.
func (e *env) decide(t *testing.T, b *http.Client, userCode, action string) int {
	t.Helper()
	resp, page := e.get(t, b, httpapi.DevicePath+"?user_code="+url.QueryEscape(userCode))
	m := csrfField.FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("approval page: %s %s", resp.Status, page)
	}
	if !strings.Contains(page, "<strong>laptop</strong> (from 127.0.0.1)") {
		t.Errorf("the approval page does not say which machine asked, from where:\n%s", page)
	}
	resp, _ = e.form(t, b, httpapi.DevicePath, url.Values{"user_code": {userCode}, "action": {action}, "csrf": {m[1]}}, http.Header{"Origin": {e.url}})
	return resp.StatusCode
}

func TestDeviceLoginWaitsSlowsDownThenIssuesAKeyOnce(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	e.signIn(t, b, ada)
	da := e.deviceCode(t)
	if da.Interval != 5 || da.ExpiresIn != 600 || da.VerificationURI != e.url+httpapi.DevicePath || !strings.HasSuffix(da.VerificationURIComplete, "?user_code="+da.UserCode) {
		t.Errorf("device authorization: %+v", da)
	}
	steps := []struct {
		name    string
		advance time.Duration
		want    string
	}{
		{"the first poll", 0, "authorization_pending"},
		{"a poll within the interval", time.Second, "slow_down"},
		{"a poll after the old interval, within the slowed one", 5 * time.Second, "slow_down"},
		{"a poll after the slowed interval", 15 * time.Second, "authorization_pending"},
	}
	for _, s := range steps {
		e.clock.Advance(s.advance)
		if got, _ := e.poll(t, da.DeviceCode); got != s.want {
			t.Fatalf("%s: %q, want %q", s.name, got, s.want)
		}
	}
	if status := e.decide(t, b, strings.ToLower(da.UserCode), "approve"); status != http.StatusOK {
		t.Fatalf("approve: %d", status)
	}
	e.clock.Advance(time.Minute)
	errCode, key := e.poll(t, da.DeviceCode)
	if errCode != "" || !strings.HasPrefix(key, "hgr_") {
		t.Fatalf("after approval: error %q, token %q", errCode, key)
	}
	p, err := e.d.Authn.Authenticate(t.Context(), key, "")
	if err != nil || p.Kind != auth.KindPersonal || !p.Admin || p.UserID != mustUserID(t, e, adminEmail) {
		t.Fatalf("the key: %+v, %v", p, err)
	}
	k, err := e.d.Keys.Get(t.Context(), p.KeyID)
	if err != nil || k.Name != "hangar login on laptop" {
		t.Errorf("the key's record: %+v, %v", k, err)
	}
	e.clock.Advance(time.Minute)
	if got, _ := e.poll(t, da.DeviceCode); got != "invalid_grant" {
		t.Errorf("a reused device code: %q", got)
	}
}

func TestDeviceLoginAnswersRFC8628Errors(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	e.signIn(t, b, ada)

	denied := e.deviceCode(t)
	if status := e.decide(t, b, denied.UserCode, "deny"); status != http.StatusOK {
		t.Fatalf("deny: %d", status)
	}
	if got, _ := e.poll(t, denied.DeviceCode); got != "access_denied" {
		t.Errorf("a denied code: %q", got)
	}

	expired := e.deviceCode(t)
	e.clock.Advance(11 * time.Minute)
	if got, _ := e.poll(t, expired.DeviceCode); got != "expired_token" {
		t.Errorf("an expired code: %q", got)
	}
	if resp, _ := e.get(t, b, httpapi.DevicePath+"?user_code="+expired.UserCode); resp.StatusCode != http.StatusNotFound {
		t.Errorf("approving an expired code: %s", resp.Status)
	}

	for _, tc := range []struct {
		name   string
		values url.Values
		want   string
	}{
		{"an unknown device code", url.Values{"grant_type": {deviceGrantType}, "client_id": {httpapi.CLIClientID}, "device_code": {"hgd_made_up"}}, "invalid_grant"},
		{"another grant type", url.Values{"grant_type": {"authorization_code"}, "client_id": {httpapi.CLIClientID}, "device_code": {"x"}}, "unsupported_grant_type"},
		{"another client", url.Values{"grant_type": {deviceGrantType}, "client_id": {"evil"}, "device_code": {"x"}}, "invalid_client"},
		{"no device code", url.Values{"grant_type": {deviceGrantType}, "client_id": {httpapi.CLIClientID}}, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, body := e.form(t, http.DefaultClient, httpapi.DeviceTokenPath, tc.values, nil)
			if !strings.Contains(body, `"error":"`+tc.want+`"`) {
				t.Errorf("answered %s", body)
			}
		})
	}
}

func TestDeviceApprovalRefusesForgedForms(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	e.signIn(t, b, ada)
	da := e.deviceCode(t)
	_, page := e.get(t, b, httpapi.DevicePath+"?user_code="+da.UserCode)
	csrf := csrfField.FindStringSubmatch(page)[1]
	cookie := http.Header{"Cookie": {auth.SessionCookie + "=" + e.sessionCookie(b)}}
	for _, tc := range []struct {
		name   string
		values url.Values
		origin string
		cookie bool
		want   int
	}{
		{"from another site", url.Values{"csrf": {csrf}}, "https://evil.example", true, http.StatusForbidden},
		{"without an Origin", url.Values{"csrf": {csrf}}, "", true, http.StatusForbidden},
		{"without the form's token", url.Values{}, e.url, true, http.StatusForbidden},
		{"with another session's token", url.Values{"csrf": {csrfToken("hgs_other")}}, e.url, true, http.StatusForbidden},
		{"signed out", url.Values{"csrf": {csrf}}, e.url, false, http.StatusSeeOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.values.Set("user_code", da.UserCode)
			tc.values.Set("action", "approve")
			h := http.Header{}
			if tc.origin != "" {
				h.Set("Origin", tc.origin)
			}
			if tc.cookie {
				h.Set("Cookie", cookie.Get("Cookie"))
			}
			noFollow := testkit.NoRedirects(nil)
			if resp, _ := e.form(t, noFollow, httpapi.DevicePath, tc.values, h); resp.StatusCode != tc.want {
				t.Errorf("answered %s, want %d", resp.Status, tc.want)
			}
		})
	}
	if got, _ := e.poll(t, da.DeviceCode); got != "authorization_pending" {
		t.Errorf("after the forged forms the code is %q, want still pending", got)
	}
}

func TestUserCodeGuessesAreRateLimited(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	e.signIn(t, b, ada)
	da := e.deviceCode(t)
	for i := range userCodeFailureBurst {
		guess := fmt.Sprintf("BBBB-BB%c%c", userCodeAlphabet[i%20], userCodeAlphabet[(i+1)%20])
		if resp, _ := e.get(t, b, httpapi.DevicePath+"?user_code="+guess); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("guess %d: %s", i, resp.Status)
		}
	}
	if resp, _ := e.get(t, b, httpapi.DevicePath+"?user_code="+da.UserCode); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("after %d wrong guesses the right code answered %s", userCodeFailureBurst, resp.Status)
	}
	other := e.browser(t)
	e.signIn(t, other, ada)
	if resp, _ := e.get(t, other, httpapi.DevicePath+"?user_code="+da.UserCode); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a new session from the same address answered %s", resp.Status)
	}
	e.clock.Advance(time.Minute)
	if status := e.decide(t, b, da.UserCode, "approve"); status != http.StatusOK {
		t.Fatalf("a minute later: %d", status)
	}
}

func TestUserCodesAreNormalizedAsTyped(t *testing.T) {
	for typed, want := range map[string]string{
		"bcdf-ghjk": "BCDFGHJK", " BCDF GHJK ": "BCDFGHJK", "BCDFGHJK": "BCDFGHJK", "BCDA-GHJK": "", "BCDF_GHJK": "",
	} {
		if got := normalizeCode(typed); got != want {
			t.Errorf("normalizeCode(%q) = %q, want %q", typed, got, want)
		}
	}
}

// Each sign-in and device code writes a record before anyone is authenticated: an address
// starts a burst of each, then one every few seconds.
func TestStartingFlowsIsRateLimitedPerAddress(t *testing.T) {
	e := newEnv(t)
	noFollow := testkit.NoRedirects(nil)
	for i := range startBurst {
		e.deviceCode(t)
		if resp, _ := e.get(t, noFollow, httpapi.LoginPath); resp.StatusCode != http.StatusFound {
			t.Fatalf("sign-in %d: %s", i, resp.Status)
		}
	}
	if resp, body := e.form(t, http.DefaultClient, httpapi.DeviceCodePath, url.Values{"client_id": {httpapi.CLIClientID}}, nil); resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "slow_down") {
		t.Errorf("device code %d: %s %s", startBurst+1, resp.Status, body)
	}
	if resp, _ := e.get(t, noFollow, httpapi.LoginPath); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("sign-in %d: %s", startBurst+1, resp.Status)
	}
	e.clock.Advance(6 * time.Second)
	e.deviceCode(t)
	if resp, _ := e.get(t, noFollow, httpapi.LoginPath); resp.StatusCode != http.StatusFound {
		t.Errorf("a sign-in 6 s later: %s", resp.Status)
	}
}

func TestUnknownDeviceCodesAreRateLimitedPerAddress(t *testing.T) {
	e := newEnv(t)
	da := e.deviceCode(t)
	for i := range userCodeFailureBurst {
		if got, _ := e.poll(t, fmt.Sprintf("hgd_guess_%d", i)); got != "invalid_grant" {
			t.Fatalf("guess %d: %q", i, got)
		}
	}
	if got, _ := e.poll(t, da.DeviceCode); got != "slow_down" {
		t.Errorf("after %d unknown codes a real poll answered %q, want slow_down", userCodeFailureBurst, got)
	}
	e.clock.Advance(time.Minute)
	if got, _ := e.poll(t, da.DeviceCode); got != "authorization_pending" {
		t.Errorf("a minute later: %q", got)
	}
}

// Cloud Run runs many instances: a client spreading its requests over two gets the address's
// device codes once between them, not once each; and wrong user codes entered on one refuse
// the person on the other once it has counted one more (the failure is what spends).
func TestRateLimitsAreSharedAcrossInstances(t *testing.T) {
	e := newEnv(t)
	other := New(e.d) // a second instance over the same database
	post := func(svc *Service) int {
		r := httptest.NewRequest(http.MethodPost, httpapi.DeviceCodePath, strings.NewReader(url.Values{"client_id": {httpapi.CLIClientID}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.RemoteAddr = "192.0.2.7:5555"
		w := httptest.NewRecorder()
		svc.deviceCode(w, r)
		return w.Code
	}
	var issued int
	for i := range 2 * startBurst {
		svc := e.svc
		if i%2 == 1 {
			svc = other
		}
		if post(svc) == http.StatusOK {
			issued++
		}
	}
	if issued != startBurst {
		t.Fatalf("two instances issued %d device codes to one address, want %d between them", issued, startBurst)
	}

	for i := range userCodeFailureBurst {
		if _, _, limited, err := e.svc.findGrant(t.Context(), fmt.Sprintf("WRONG%03d", i), "user_mallory", "192.0.2.8"); err != nil || limited {
			t.Fatalf("guess %d: limited %v, %v", i, limited, err)
		}
	}
	// The other instance learns at its first wrong guess, and refuses from then on.
	if _, _, limited, err := other.findGrant(t.Context(), "WRONGXXX", "user_mallory", "192.0.2.8"); err != nil || limited {
		t.Fatalf("the other instance's first guess: limited %v, %v", limited, err)
	}
	if _, _, limited, _ := other.findGrant(t.Context(), "WRONGYYY", "user_mallory", "192.0.2.8"); !limited {
		t.Fatal("the other instance still lets the person guess")
	}
}
