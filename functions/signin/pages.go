package signin

import (
	"crypto/subtle"
	"errors"
	"html/template"
	"net/http"
	"net/url"

	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// The pages of /api/auth are plain HTML forms, so they work without the dashboard's scripts.
// A form cannot carry the CSRF header the RPCs ask for, so its POSTs pass the Origin check and
// carry a token derived from the session cookie's value, which another site cannot read.
var pages = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Hangar · {{.Title}}</title>
<meta name="viewport" content="width=device-width">
<style>body{font:16px system-ui,sans-serif;max-width:34em;margin:4em auto;padding:0 1em}
code,input{font:1.2em ui-monospace,monospace}button{font-size:1em;margin-right:.5em}</style>
</head><body><h1>{{.Title}}</h1>
{{if .Message}}<p>{{.Message}}</p>{{end}}
{{if .EnterCode}}<form method="get" action="{{.DevicePath}}">
<p><label>The code <code>hangar login</code> shows: <input name="user_code" autocomplete="off" autofocus size="9"></label></p>
<p><button>Continue</button></p></form>{{end}}
{{if .Grant}}<form method="post" action="{{.DevicePath}}">
<p>A <code>hangar login</code> on <strong>{{.Grant.Machine}}</strong> (from {{.Grant.From}}) asks for a personal API key
{{- if .Admin}} with <strong>admin</strong> rights{{end}}, acting as you. Approve it only if you
started it yourself and the code it shows is <code>{{.Code}}</code>.</p>
<input type="hidden" name="user_code" value="{{.Code}}"><input type="hidden" name="csrf" value="{{.CSRF}}">
<p><button name="action" value="approve">Approve</button><button name="action" value="deny">Deny</button></p></form>{{end}}
{{if .Dev}}<form method="post" action="{{.DevPath}}"><input type="hidden" name="return_to" value="{{.ReturnTo}}">
<p><button>Sign in as the local admin</button></p></form>{{end}}
</body></html>`))

// pageData fills the page template.
type pageData struct {
	Title, Message        string
	DevicePath, DevPath   string
	EnterCode, Dev, Admin bool
	Grant                 *grant
	Code, CSRF, ReturnTo  string
}

func (s *Service) render(w http.ResponseWriter, status int, d pageData) {
	d.DevicePath, d.DevPath = httpapi.DevicePath, httpapi.DevSignInPath
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	// same-origin, not no-referrer: under no-referrer Chromium sends these pages' form posts
	// with "Origin: null", which CheckCSRF rightly refuses. Other sites still get no referrer.
	h.Set("Referrer-Policy", "same-origin")
	w.WriteHeader(status)
	if err := pages.Execute(w, d); err != nil {
		s.d.Log.Warn("render page", "err", err)
	}
}

// page is a page that only says what happened.
func (s *Service) page(w http.ResponseWriter, status int, title, message string) {
	s.render(w, status, pageData{Title: title, Message: message})
}

// signedIn is the browser's session principal for a page or form served as use, or a
// redirect to sign in that returns here. Its pages are signed in by the dashboard's cookie
// only; another site may link to them (the device grant's verification URL).
func (s *Service) signedIn(w http.ResponseWriter, r *http.Request, use auth.Use) (auth.Principal, bool) {
	if p, err := s.d.Authn.Identify(r, auth.Route{Use: use, Accepts: auth.SignInCookie}); err == nil {
		return p, true
	}
	http.Redirect(w, r, httpapi.LoginPath+"?return_to="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
	return auth.Principal{}, false
}

// devicePage is GET /api/auth/device[?user_code=…]: enter a code, then approve or deny it.
func (s *Service) devicePage(w http.ResponseWriter, r *http.Request) {
	p, ok := s.signedIn(w, r, auth.Read)
	if !ok {
		return
	}
	typed := r.URL.Query().Get("user_code")
	if typed == "" {
		s.render(w, http.StatusOK, pageData{Title: "Sign in hangar on a machine", EnterCode: true})
		return
	}
	_, g, limited, err := s.findGrant(r.Context(), typed, p.UserID, s.d.Authn.ClientAddress(r.RemoteAddr, r.Header))
	switch {
	case err != nil:
		s.d.Log.Error("device page", "err", err)
		s.page(w, http.StatusServiceUnavailable, "Try again", "Hangar could not look the code up.")
	case limited:
		s.page(w, http.StatusTooManyRequests, "Too many wrong codes", "Wait a minute before entering another code.")
	case g == nil:
		s.render(w, http.StatusNotFound, pageData{Title: "Unknown code", Message: "No login is waiting for that code: it may have expired. Check it and try again.", EnterCode: true})
	default:
		s.render(w, http.StatusOK, pageData{
			Title: "Approve this login?", Grant: g, Code: displayCode(g.UserCode), Admin: p.Admin,
			CSRF: csrfToken(s.d.Authn.SessionToken(r.Header)),
		})
	}
}

// deviceDecide is POST /api/auth/device: user_code, action=approve|deny and the form's csrf.
func (s *Service) deviceDecide(w http.ResponseWriter, r *http.Request) {
	if err := s.d.Authn.CheckCSRF(r.Header, false); err != nil {
		s.page(w, http.StatusForbidden, "Refused", "This form must be sent from Hangar's own page.")
		return
	}
	p, ok := s.signedIn(w, r, auth.Form)
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil || !s.formTokenOK(r) {
		s.page(w, http.StatusForbidden, "Refused", "This form must be sent from Hangar's own page.")
		return
	}
	action := r.PostForm.Get("action")
	if action != "approve" && action != "deny" {
		s.page(w, http.StatusBadRequest, "Refused", "Choose approve or deny.")
		return
	}
	ref, g, limited, err := s.findGrant(r.Context(), r.PostForm.Get("user_code"), p.UserID, s.d.Authn.ClientAddress(r.RemoteAddr, r.Header))
	switch {
	case err != nil:
		s.d.Log.Error("device decide", "err", err)
		s.page(w, http.StatusServiceUnavailable, "Try again", "Hangar could not look the code up.")
		return
	case limited:
		s.page(w, http.StatusTooManyRequests, "Too many wrong codes", "Wait a minute before entering another code.")
		return
	case g == nil:
		s.page(w, http.StatusNotFound, "Unknown code", "No login is waiting for that code: it may have expired.")
		return
	}
	err = s.decide(r.Context(), ref, p, action == "approve")
	if errors.Is(err, errGrantGone) {
		s.page(w, http.StatusConflict, "Too late", "That login is no longer waiting for approval.")
		return
	}
	if err != nil {
		s.d.Log.Error("device decide", "err", err)
		s.page(w, http.StatusServiceUnavailable, "Try again", "Hangar could not save your answer.")
		return
	}
	s.d.Log.Info("device login "+action+"d", "user", p.UserID, "machine", g.Machine)
	if action == "approve" {
		s.page(w, http.StatusOK, "Approved", "hangar on "+g.Machine+" is signed in. You can close this page.")
		return
	}
	s.page(w, http.StatusOK, "Denied", "The login on "+g.Machine+" was refused.")
}

// devPage is GET /api/auth/dev: a button that signs the local admin in.
func (s *Service) devPage(w http.ResponseWriter, r *http.Request) {
	if !s.devAllowed(r) {
		http.NotFound(w, r)
		return
	}
	s.render(w, http.StatusOK, pageData{Title: "hangar dev", Message: "This Hangar runs locally without an identity provider.", Dev: true, ReturnTo: safeReturn(r.URL.Query().Get("return_to"))})
}

// devSignIn is POST /api/auth/dev: signs in `hangar dev`'s local admin, from loopback only and
// from Hangar's own page (Origin), so no other site can sign a browser in (login CSRF).
func (s *Service) devSignIn(w http.ResponseWriter, r *http.Request) {
	if !s.devAllowed(r) {
		http.NotFound(w, r)
		return
	}
	if err := s.d.Authn.CheckCSRF(r.Header, false); err != nil {
		s.page(w, http.StatusForbidden, "Refused", "This form must be sent from Hangar's own page.")
		return
	}
	if err := s.signInPerson(w, r, s.d.Config.DevAdminEmail, "Local admin", true); err != nil {
		s.d.Log.Error("dev sign-in", "err", err)
		s.page(w, http.StatusServiceUnavailable, "Sign-in failed", "Hangar could not record the sign-in; try again.")
		return
	}
	_ = r.ParseForm()
	http.Redirect(w, r, safeReturn(r.PostForm.Get("return_to")), http.StatusSeeOther)
}

// devAllowed is the dev route's gate: enabled by `hangar dev`'s config, and asked from loopback.
func (s *Service) devAllowed(r *http.Request) bool {
	if !s.d.Config.DevSignIn || s.d.Config.DevAdminEmail == "" {
		return false
	}
	return isLoopbackHost(s.d.Authn.ClientAddress(r.RemoteAddr, r.Header))
}

// csrfToken is the form token of a session: a hash of its cookie's value, which only a page
// Hangar served to that browser knows.
func csrfToken(sessionToken string) string { return hashOf("csrf\x00" + sessionToken) }

func (s *Service) formTokenOK(r *http.Request) bool {
	want := csrfToken(s.d.Authn.SessionToken(r.Header))
	return subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(want)) == 1
}
