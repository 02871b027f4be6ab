package signin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// The OIDC provider is reached through the egress policy's guarded client: an issuer that names
// a metadata server, a private or loopback address (without the tests' explicit loopback
// option), or plain http is refused before any request, and the sign-in page says why.
func TestSignInRefusesAnIssuerTheEgressPolicyRefuses(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name, issuer string
		loopback     bool
		want         string
	}{
		{name: "a metadata server by address", issuer: "http://169.254.169.254/", loopback: true, want: "must be an https URL"},
		{name: "a metadata server over https", issuer: "https://169.254.169.254/", want: "metadata server"},
		{name: "a metadata server by name", issuer: "https://metadata.google.internal/", want: "metadata server"},
		{name: "a private address", issuer: "https://10.1.2.3/", want: "a private address"},
		{name: "loopback without the explicit option", issuer: e.idp.Issuer, want: "must be an https URL"},
		{name: "loopback over https without an allow entry", issuer: strings.Replace(e.idp.Issuer, "http:", "https:", 1), want: "a loopback address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := e.d
			d.Config.OIDCIssuer, d.LoopbackHTTP, d.Egress = tc.issuer, tc.loopback, egress.Policy{}
			rec := httptest.NewRecorder()
			New(d).Routes()["GET "+httpapi.LoginPath].ServeHTTP(rec, httptest.NewRequest(http.MethodGet, httpapi.LoginPath, nil))
			if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("login with issuer %s: %d %s", tc.issuer, rec.Code, rec.Body.String())
			}
		})
	}
}
