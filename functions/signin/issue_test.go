package signin

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A key is minted in the transaction that marks the grant issued: when issuing fails (here an
// injected failure after the key's write), no key exists, the poll answers
// temporarily_unavailable, and the approval stands, so the next poll gets the one key.
func TestDeviceLoginKeepsTheApprovalWhenIssuingFails(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	e.signIn(t, b, ada)
	da := e.deviceCode(t)
	if status := e.decide(t, b, da.UserCode, "approve"); status != http.StatusOK {
		t.Fatalf("approve: %d", status)
	}
	keys := func() int {
		all, err := e.d.Keys.List(t.Context(), true, 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(all)
	}
	before := keys()
	e.svc.beforeIssue = func() error { return errors.New("injected: the commit fails") }
	e.clock.Advance(time.Minute)
	if got, token := e.poll(t, da.DeviceCode); got != "temporarily_unavailable" || token != "" {
		t.Fatalf("a poll whose issue failed: %q %q", got, token)
	}
	if n := keys(); n != before {
		t.Fatalf("a failed issue left %d keys, want %d", n, before)
	}
	e.svc.beforeIssue = nil
	e.clock.Advance(time.Minute)
	got, token := e.poll(t, da.DeviceCode)
	if got != "" || !strings.HasPrefix(token, "hgr_") {
		t.Fatalf("the poll after the failure: %q %q", got, token)
	}
	if p, err := e.d.Authn.Authenticate(t.Context(), token, ""); err != nil || p.UserID != mustUserID(t, e, adminEmail) {
		t.Fatalf("the issued key: %+v %v", p, err)
	}
	if n := keys(); n != before+1 {
		t.Fatalf("%d keys after the issue, want %d", n, before+1)
	}
	e.clock.Advance(time.Minute)
	if got, _ := e.poll(t, da.DeviceCode); got != "invalid_grant" {
		t.Fatalf("a reused device code: %q", got)
	}
}
