package auth

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/hangar-dev/hangar/platform/apierr"
)

// A browser sends the dashboard's cookie (SameSite=Lax) with every request to Hangar's host
// that a page of the same site makes, and with every top-level GET navigation from anywhere: a
// link, a redirect or `location = ...` on any web page. So the cookie alone proves only that
// the browser is signed in, not that Hangar's own page asked. What more a cookie-signed request
// must show depends on what its route does with the caller's authority, which each route
// declares as a Use; API keys need nothing more (a page of another site cannot know one).
// Allow is the one rule (docs/security.md, "Cross-site requests", has its table).

// Use is what a route does with the authority of the caller it signs in.
type Use int

const (
	// Read answers with the caller's data and changes nothing (events, a file's download,
	// network usage): any page can make the browser send one, by a link, but none can read the
	// answer, as the API grants no CORS. By cookie a read must be a GET or HEAD; an Origin, when
	// the browser sends one, must be Hangar's own; and a request the browser marks same-site
	// or cross-site must be a navigation, so that no other page's script, WebSocket or
	// no-cors load gets the answer into its process.
	Read Use = iota + 1
	// Act changes or runs something (a file's upload, a request to an app, signing out). By
	// cookie it must come from Hangar's own Origin, not be marked cross-site, and carry
	// Connect-Protocol-Version or CSRFHeader: a form or a navigation can send neither, a page
	// of another origin cannot without a CORS preflight, which the API never grants.
	Act
	// WebSocket opens a WebSocket that acts (a shell, an app's socket): the request must be a
	// valid WebSocket upgrade (IsWebSocketUpgrade) whatever signs it in, and by cookie come
	// from Hangar's own Origin, not marked cross-site. A browser cannot set headers on a
	// WebSocket, but always sends its page's Origin, which no page can forge.
	WebSocket
	// Form is a form of Hangar's own pages posted back: by cookie a POST from Hangar's own
	// Origin, not marked cross-site; the page's form carries a token of its own as well.
	Form
	// Callback is a navigation that another site sends the browser on by design, an OAuth
	// provider's redirect back: by cookie a GET or HEAD, without an Origin rule, so the route
	// must bind the request to its caller itself (the flow's state).
	Callback
)

func (u Use) String() string {
	switch u {
	case Read:
		return "read"
	case Act:
		return "act"
	case WebSocket:
		return "websocket"
	case Form:
		return "form"
	case Callback:
		return "callback"
	}
	return fmt.Sprintf("Use(%d)", int(u))
}

// Credential is what a request signs in with.
type Credential int

const (
	// NoCredential is a request with neither key nor a session cookie the authenticator takes.
	NoCredential Credential = iota
	// KeyCredential is an API key, in httpapi.APIKeyHeader or (plain HTTP routes) KeyParam.
	KeyCredential
	// CookieCredential is the dashboard's session cookie (SessionCookie).
	CookieCredential
)

// KeyParam carries the API key of a plain HTTP route for clients that cannot set headers
// (EventSource, a browser's WebSocket, a download link); httpapi.APIKeyHeader is preferred.
const KeyParam = "api_key"

// Allow is the one rule of whether a request signed in by cred, with method and headers h,
// may be served as use; its refusals are permission_denied (unauthenticated without a
// credential), and an unknown use is refused whatever comes.
func (a *Authenticator) Allow(use Use, cred Credential, method string, h http.Header) error {
	if use < Read || use > Callback {
		return fmt.Errorf("route declares an unknown use %v", use)
	}
	if use == WebSocket {
		if err := IsWebSocketUpgrade(method, h); err != nil {
			return err
		}
	}
	switch cred {
	case KeyCredential:
		return nil
	case CookieCredential:
	default:
		return apierr.Unauthenticated()
	}
	getOrHead := method == http.MethodGet || method == http.MethodHead
	switch use {
	case Read:
		if !getOrHead {
			return apierr.PermissionDenied("a read signed in by cookie is a GET or HEAD, not %s", method)
		}
		if origin := h.Get("Origin"); origin != "" && !a.ownOrigin(origin) {
			return apierr.PermissionDenied("a request signed in by cookie must come from Hangar's own origin, not %q", origin)
		}
		if site := h.Get("Sec-Fetch-Site"); (site == "cross-site" || site == "same-site") && h.Get("Sec-Fetch-Mode") != "navigate" {
			return apierr.PermissionDenied("a %s request signed in by cookie must be a navigation", site)
		}
		return nil
	case Act:
		return a.CheckCSRF(h, true)
	case WebSocket:
		return a.CheckCSRF(h, false)
	case Form:
		if method != http.MethodPost {
			return apierr.PermissionDenied("a form signed in by cookie is posted, not sent by %s", method)
		}
		return a.CheckCSRF(h, false)
	}
	// Callback
	if !getOrHead {
		return apierr.PermissionDenied("a callback signed in by cookie is a GET or HEAD, not %s", method)
	}
	return nil
}

// CheckCSRF is the cookie's half of Allow for what acts: the request's Origin must be one
// AcceptSessions named (a missing one is refused), a browser that says the request is
// cross-site (Sec-Fetch-Site) is refused whatever its Origin, and with requireHeader it must
// carry a header an HTML form cannot send (Connect-Protocol-Version or CSRFHeader).
func (a *Authenticator) CheckCSRF(h http.Header, requireHeader bool) error {
	origin := h.Get("Origin")
	if origin == "" {
		return apierr.PermissionDenied("a request signed in by cookie must carry an Origin header")
	}
	if !a.ownOrigin(origin) {
		return apierr.PermissionDenied("a request signed in by cookie must come from Hangar's own origin, not %q", origin)
	}
	if h.Get("Sec-Fetch-Site") == "cross-site" {
		return apierr.PermissionDenied("a request signed in by cookie must not be cross-site")
	}
	if requireHeader && h.Get("Connect-Protocol-Version") == "" && h.Get(CSRFHeader) == "" {
		return apierr.PermissionDenied("a request signed in by cookie must carry Connect-Protocol-Version or %s", CSRFHeader)
	}
	return nil
}

// ownOrigin reports whether origin (an Origin header's value) is one AcceptSessions named.
func (a *Authenticator) ownOrigin(origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Path == "" && u.RawQuery == "" && a.origins[u.Scheme+"://"+u.Host]
}

// IsWebSocketUpgrade refuses (failed_precondition) a request that is not a WebSocket opening
// handshake by RFC 6455 §4.2.1: a GET with Upgrade: websocket, Connection: upgrade,
// Sec-WebSocket-Version 13 and one Sec-WebSocket-Key of 16 bytes. A browser's navigation, a
// fetch or a form cannot be one: only the WebSocket API sends these headers.
func IsWebSocketUpgrade(method string, h http.Header) error {
	keys := h.Values("Sec-WebSocket-Key")
	var key []byte
	if len(keys) == 1 {
		key, _ = base64.StdEncoding.DecodeString(strings.TrimSpace(keys[0]))
	}
	switch {
	case method != http.MethodGet:
		return apierr.FailedPrecondition("a WebSocket opens with a GET, not %s", method)
	case !hasToken(h, "Upgrade", "websocket") || !hasToken(h, "Connection", "upgrade"):
		return apierr.FailedPrecondition("this route is a WebSocket: send Upgrade: websocket and Connection: Upgrade")
	case h.Get("Sec-WebSocket-Version") != "13":
		return apierr.FailedPrecondition("this route speaks WebSocket version 13 only, not %q", h.Get("Sec-WebSocket-Version"))
	case len(key) != 16:
		return apierr.FailedPrecondition("a WebSocket opening needs one Sec-WebSocket-Key of 16 base64-encoded bytes")
	}
	return nil
}

// hasToken reports whether the comma-separated header name holds token, in any case.
func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
