package sessions

import (
	"context"
	"net/http"

	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// apiKeyParam carries the API key of the plain HTTP routes for clients that cannot set headers
// (EventSource, a browser's WebSocket); the x-api-key header is preferred.
const apiKeyParam = "api_key"

// authenticate finds who a plain HTTP route's request is, as the RPCs' interceptor does: the
// api_key parameter when no header carries a key, else the header's key, else the dashboard's
// session cookie, checked against cross-site use when the request changes something (with
// requireHeader, it must also carry the CSRF header). It returns the request's context
// carrying the caller.
func authenticate(authn *auth.Authenticator, r *http.Request, requireHeader bool) (context.Context, error) {
	var p auth.Principal
	var err error
	if key := r.URL.Query().Get(apiKeyParam); key != "" && r.Header.Get(auth.HeaderName) == "" {
		p, err = authn.Authenticate(r.Context(), key, authn.ClientAddress(r.RemoteAddr, r.Header))
	} else {
		p, err = authn.AuthenticateRequest(r, requireHeader)
	}
	if err != nil {
		return nil, err
	}
	return auth.WithPrincipal(r.Context(), p), nil
}

// routeSession is the first step of every per-session route: it authenticates r and loads the
// session its path names (another user's is not_found). When it answers false it has written
// the error.
func (s *Service) routeSession(authn *auth.Authenticator, w http.ResponseWriter, r *http.Request) (context.Context, *sessiondb.Record, bool) {
	ctx, err := authenticate(authn, r, false)
	if err == nil {
		var rec *sessiondb.Record
		if rec, err = s.load(ctx, r.PathValue("id")); err == nil {
			return ctx, rec, true
		}
	}
	writeErr(w, r, err)
	return nil, nil, false
}
