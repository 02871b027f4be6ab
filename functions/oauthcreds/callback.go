package oauthcreds

import (
	"errors"
	"html/template"
	"net/http"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/records/credentials"
)

// Authenticate says who a plain HTTP request comes from (an API key; the dashboard's session
// cookie once sign-in sets one).
type Authenticate func(*http.Request) (auth.Principal, error)

// Callback serves httpapi.OAuthCallbackPath: it completes the flow its state names, as the
// signed-in caller, who must be allowed the flow's subject (so a code from someone else's browser
// cannot land in another's flow), and shows a small page saying what happened. Everything shown is
// escaped; no page holds a code, a token or the provider's words beyond its OAuth error code.
func (s *Service) Callback(authn Authenticate) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		q := r.URL.Query()
		state, code, oauthErr := q.Get("state"), q.Get("code"), q.Get("error")
		if state == "" {
			page(w, http.StatusBadRequest, "Sign-in failed", "The provider sent no state, so this page cannot tell which sign-in it ends.")
			return
		}
		caller, err := authn(r)
		if err != nil {
			page(w, http.StatusUnauthorized, "Sign in to Hangar first", "Sign in to Hangar in this browser, then open this link again (the sign-in waits up to 10 minutes).")
			return
		}
		ctx := auth.WithPrincipal(r.Context(), caller)
		f, err := s.flowOf(ctx, nil, state)
		if err != nil {
			page(w, http.StatusNotFound, "Sign-in not found", "No sign-in of yours matches this link's state. Start the sign-in again from Hangar.")
			return
		}
		if oauthErr != "" {
			status, code := credentials.FlowFailed, "invalid_token_response"
			if oauthCode.MatchString(oauthErr) {
				code = oauthErr
			}
			if code == "access_denied" {
				status = credentials.FlowDenied
			}
			if _, err := s.d.Flows.End(ctx, f.ID, status, code); err != nil {
				s.d.Log.Warn("oauth callback: end flow", "flow", f.ID, "err", err)
			}
			page(w, http.StatusOK, "Sign-in "+status, "The provider "+f.Provider+" ended the sign-in: "+code+".")
			return
		}
		meta, err := s.complete(ctx, f.Subject(), &appv1.CompleteRedirectFlowRequest{
			FlowId: f.ID, Provider: f.Provider, Code: code, RedirectUri: f.RedirectURI,
		})
		if err != nil {
			page(w, httpStatus(err), "Sign-in failed", "Connecting "+f.Provider+" failed: "+connect.CodeOf(err).String()+". "+errMessage(err))
			return
		}
		who := ""
		if n := meta.Account["display_name"]; n != "" {
			who = " as " + n
		}
		page(w, http.StatusOK, "Connected", "Hangar is connected to "+f.Provider+who+". You can close this page.")
	})
}

// errMessage is what a Connect error says; other errors (a database's) say nothing to a page.
func errMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return ""
}

func httpStatus(err error) int {
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition:
		return http.StatusBadRequest
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	}
	return http.StatusBadGateway
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} · Hangar</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 36rem; margin: 4rem auto">
<h1>{{.Title}}</h1><p>{{.Text}}</p></body></html>
`))

// page writes the callback's answer: text and title are escaped by html/template.
func page(w http.ResponseWriter, status int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.WriteHeader(status)
	_ = pageTmpl.Execute(w, struct{ Title, Text string }{title, text})
}
