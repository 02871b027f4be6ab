package sessions

import (
	"context"
	"net/http"

	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// authenticate is who a plain HTTP route's request is, by auth.Authenticator.Identify, the one
// decision the RPCs' interceptor makes too: the routes of the API's origin accept
// auth.APICredentials (an API key in the header or the api_key parameter, else the dashboard's
// cookie) and declare their use, whose rule says what a cookie-signed request must show
// (docs/security.md, "Cross-site requests"). It returns the request's context carrying the
// caller.
func authenticate(authn *auth.Authenticator, r *http.Request, use auth.Use) (context.Context, error) {
	p, err := authn.Identify(r, auth.Route{Use: use, Accepts: auth.APICredentials})
	if err != nil {
		return nil, err
	}
	return auth.WithPrincipal(r.Context(), p), nil
}

// routeSession is the first step of every per-session route: it authenticates r for use and
// loads the session its path names (another user's is not_found). When it answers false it has
// written the error.
func (s *Service) routeSession(authn *auth.Authenticator, w http.ResponseWriter, r *http.Request, use auth.Use) (context.Context, *sessiondb.Record, bool) {
	ctx, err := authenticate(authn, r, use)
	if err == nil {
		var rec *sessiondb.Record
		if rec, err = s.load(ctx, r.PathValue("id")); err == nil {
			return ctx, rec, true
		}
	}
	writeErr(w, r, err)
	return nil, nil, false
}
