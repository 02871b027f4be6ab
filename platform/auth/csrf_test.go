package auth

import (
	"net/http"
	"testing"

	"connectrpc.com/connect"
)

const own = "https://hangar.example.com"

func ownAuthenticator() *Authenticator {
	a := &Authenticator{}
	a.AcceptSessions(nil, []string{own + "/"})
	return a
}

// header builds a request's headers from name, value pairs.
func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// upgrade is a browser's WebSocket handshake from origin ("" for none), with kv's headers set
// over it.
func upgrade(origin string, kv ...string) http.Header {
	h := header("Upgrade", "websocket", "Connection", "keep-alive, Upgrade",
		"Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	if origin != "" {
		h.Set("Origin", origin)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// TestSecurityAllowDecidesWhatACookieMayDo is the decision's table: method × upgrade × Origin ×
// header × credential, for each use a route declares. The attack it replays first: a
// top-level navigation of another site to the shell route (a GET with the cookie, no Origin,
// no upgrade).
func TestSecurityAllowDecidesWhatACookieMayDo(t *testing.T) {
	a := ownAuthenticator()
	const (
		cookie = CookieCredential
		key    = KeyCredential
		none   = NoCredential
	)
	navigation := header("Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate")
	for _, tc := range []struct {
		name   string
		use    Use
		cred   Credential
		method string
		h      http.Header
		want   connect.Code // 0: allowed
	}{
		// The shell's attack and its variants.
		{"websocket: a cross-site navigation by cookie", WebSocket, cookie, "GET", navigation, connect.CodeFailedPrecondition},
		{"websocket: a navigation by key", WebSocket, key, "GET", header(), connect.CodeFailedPrecondition},
		{"websocket: a fetch from Hangar's page with the CSRF header, not an upgrade", WebSocket, cookie, "GET", header("Origin", own, CSRFHeader, "1"), connect.CodeFailedPrecondition},
		{"websocket: an upgrade by cookie without Origin", WebSocket, cookie, "GET", upgrade(""), connect.CodePermissionDenied},
		{"websocket: an upgrade by cookie from another origin", WebSocket, cookie, "GET", upgrade("https://evil.example"), connect.CodePermissionDenied},
		{"websocket: an upgrade by cookie from another port", WebSocket, cookie, "GET", upgrade(own + ":8443"), connect.CodePermissionDenied},
		{"websocket: an upgrade by cookie from a sibling subdomain", WebSocket, cookie, "GET", upgrade("https://web-x.hangar.example.com"), connect.CodePermissionDenied},
		{"websocket: an upgrade by cookie from null", WebSocket, cookie, "GET", upgrade("null"), connect.CodePermissionDenied},
		{"websocket: an upgrade by cookie the browser says is cross-site", WebSocket, cookie, "GET", upgrade(own, "Sec-Fetch-Site", "cross-site"), connect.CodePermissionDenied},
		{"websocket: an upgrade by cookie from Hangar's page", WebSocket, cookie, "GET", upgrade(own), 0},
		{"websocket: an upgrade by key from anywhere", WebSocket, key, "GET", upgrade("https://evil.example"), 0},
		{"websocket: an upgrade by key without Origin (the CLI)", WebSocket, key, "GET", upgrade(""), 0},
		{"websocket: an upgrade without credentials", WebSocket, none, "GET", upgrade(own), connect.CodeUnauthenticated},
		{"websocket: a POST with upgrade headers", WebSocket, key, "POST", upgrade(own), connect.CodeFailedPrecondition},
		{"websocket: version 8", WebSocket, key, "GET", upgrade(own, "Sec-WebSocket-Version", "8"), connect.CodeFailedPrecondition},
		{"websocket: no key header", WebSocket, key, "GET", header("Upgrade", "websocket", "Connection", "Upgrade", "Sec-WebSocket-Version", "13"), connect.CodeFailedPrecondition},
		{"websocket: a short key", WebSocket, key, "GET", header("Upgrade", "websocket", "Connection", "Upgrade", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "c2hvcnQ="), connect.CodeFailedPrecondition},
		{"websocket: Connection without upgrade", WebSocket, key, "GET", header("Upgrade", "websocket", "Connection", "close", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), connect.CodeFailedPrecondition},
		{"websocket: Upgrade h2c", WebSocket, key, "GET", header("Upgrade", "h2c", "Connection", "Upgrade", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), connect.CodeFailedPrecondition},

		// Acting: an upload, a request into an app, signing out.
		{"act: by cookie from Hangar's page with the CSRF header", Act, cookie, "PUT", header("Origin", own, CSRFHeader, "1"), 0},
		{"act: by cookie with Connect's header", Act, cookie, "POST", header("Origin", own, "Connect-Protocol-Version", "1"), 0},
		{"act: by cookie without a header (a form)", Act, cookie, "POST", header("Origin", own), connect.CodePermissionDenied},
		{"act: by cookie without Origin", Act, cookie, "PUT", header(CSRFHeader, "1"), connect.CodePermissionDenied},
		{"act: by cookie from another origin", Act, cookie, "PUT", header("Origin", "https://evil.example", CSRFHeader, "1"), connect.CodePermissionDenied},
		{"act: by cookie, a cross-site navigation", Act, cookie, "GET", navigation, connect.CodePermissionDenied},
		{"act: by cookie, cross-site per the browser", Act, cookie, "PUT", header("Origin", own, CSRFHeader, "1", "Sec-Fetch-Site", "cross-site"), connect.CodePermissionDenied},
		{"act: by key without Origin", Act, key, "PUT", header(), 0},
		{"act: by key from another origin", Act, key, "PUT", header("Origin", "https://evil.example"), 0},
		{"act: without credentials", Act, none, "PUT", header("Origin", own, CSRFHeader, "1"), connect.CodeUnauthenticated},

		// Reading: events, a download, network usage.
		{"read: by cookie, a navigation from anywhere", Read, cookie, "GET", navigation, 0},
		{"read: by cookie, Hangar's own fetch", Read, cookie, "GET", header("Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "cors"), 0},
		{"read: by cookie, no fetch metadata (not a browser)", Read, cookie, "HEAD", header(), 0},
		{"read: by cookie, a fetch from another origin", Read, cookie, "GET", header("Origin", "https://evil.example", "Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "cors"), connect.CodePermissionDenied},
		{"read: by cookie, a no-cors load from a sibling", Read, cookie, "GET", header("Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "no-cors"), connect.CodePermissionDenied},
		{"read: by cookie, a WebSocket from another origin", Read, cookie, "GET", upgrade("https://evil.example"), connect.CodePermissionDenied},
		{"read: by cookie, a POST", Read, cookie, "POST", header("Origin", own, CSRFHeader, "1"), connect.CodePermissionDenied},
		{"read: by key, from anywhere", Read, key, "GET", header("Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"), 0},
		{"read: without credentials", Read, none, "GET", header(), connect.CodeUnauthenticated},

		// Forms of Hangar's own pages.
		{"form: posted from Hangar's page", Form, cookie, "POST", header("Origin", own), 0},
		{"form: posted from another site", Form, cookie, "POST", header("Origin", "https://evil.example"), connect.CodePermissionDenied},
		{"form: posted without Origin", Form, cookie, "POST", header(), connect.CodePermissionDenied},
		{"form: a navigation", Form, cookie, "GET", header("Origin", own), connect.CodePermissionDenied},

		// The OAuth provider's redirect back.
		{"callback: a cross-site navigation", Callback, cookie, "GET", navigation, 0},
		{"callback: a POST", Callback, cookie, "POST", header("Origin", own), connect.CodePermissionDenied},

		// A route that declares no use is refused.
		{"no use declared, by key", Use(0), key, "GET", header(), connect.CodeUnknown},
		{"an unknown use, by cookie", Use(99), cookie, "GET", upgrade(own), connect.CodeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := a.Allow(tc.use, tc.cred, tc.method, tc.h)
			if tc.want == 0 {
				if err != nil {
					t.Fatalf("Allow(%v) = %v, want allowed", tc.use, err)
				}
				return
			}
			if err == nil || connect.CodeOf(err) != tc.want {
				t.Fatalf("Allow(%v) = %v, want %v", tc.use, err, tc.want)
			}
		})
	}
}

// FuzzCSRFDecision holds Allow's invariants over any method, headers and use: a cookie never
// acts (Act, WebSocket, Form) without Hangar's own Origin, nor with the browser saying
// cross-site; a cookie never acts by Act without the CSRF header; nothing opens a WebSocket
// that is not an upgrade; a cookie's read has no foreign Origin; no credential is allowed
// nothing; an unknown use allows nothing.
func FuzzCSRFDecision(f *testing.F) {
	f.Add(int(WebSocket), int(CookieCredential), "GET", "", "cross-site", "navigate", "", "", "", "", "")
	f.Add(int(WebSocket), int(CookieCredential), "GET", own, "same-origin", "websocket", "websocket", "Upgrade", "13", "dGhlIHNhbXBsZSBub25jZQ==", "")
	f.Add(int(Act), int(CookieCredential), "PUT", own, "same-origin", "cors", "", "", "", "", "1")
	f.Add(int(Read), int(CookieCredential), "GET", "https://evil.example", "same-site", "cors", "", "", "", "", "")
	f.Add(int(Form), int(KeyCredential), "POST", "null", "", "", "", "", "", "", "")
	a := ownAuthenticator()
	f.Fuzz(func(t *testing.T, useN, credN int, method, origin, site, mode, up, conn, version, wsKey, csrf string) {
		h := http.Header{}
		for name, v := range map[string]string{"Origin": origin, "Sec-Fetch-Site": site, "Sec-Fetch-Mode": mode,
			"Upgrade": up, "Connection": conn, "Sec-WebSocket-Version": version, "Sec-WebSocket-Key": wsKey, CSRFHeader: csrf} {
			if v != "" {
				h.Set(name, v)
			}
		}
		use, cred := Use(useN), Credential(credN)
		if a.Allow(use, cred, method, h) != nil {
			return
		}
		// Allowed: every invariant must hold.
		if use < Read || use > Callback {
			t.Fatalf("unknown use %v allowed", use)
		}
		if cred != KeyCredential && cred != CookieCredential {
			t.Fatalf("credential %d allowed as %v", cred, use)
		}
		if use == WebSocket && IsWebSocketUpgrade(method, h) != nil {
			t.Fatalf("a request that is not a WebSocket upgrade allowed as one: %s %v", method, h)
		}
		if cred != CookieCredential {
			return
		}
		acts := use == Act || use == WebSocket || use == Form
		if acts && !a.ownOrigin(origin) {
			t.Fatalf("a cookie acted (%v) from Origin %q", use, origin)
		}
		if acts && site == "cross-site" {
			t.Fatalf("a cookie acted (%v) on a cross-site request", use)
		}
		if use == Act && csrf == "" {
			t.Fatalf("a cookie acted without the CSRF header: %v", h)
		}
		if use == Read && origin != "" && !a.ownOrigin(origin) {
			t.Fatalf("a cookie read for Origin %q", origin)
		}
		if (use == Read || use == Callback) && method != http.MethodGet && method != http.MethodHead {
			t.Fatalf("a cookie %v by %s", use, method)
		}
	})
}
