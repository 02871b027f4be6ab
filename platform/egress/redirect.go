package egress

import (
	"fmt"
	"net/http"
	"net/url"
)

// MaxRedirects is how many redirects an outbound request follows by default.
const MaxRedirects = 5

// keptOnCrossHost are the request headers a redirect to another host keeps: none of them carries
// a credential. Everything else a caller set (Authorization, cookies, API keys, an automation's
// custom and secret headers) stays with the host it was meant for.
var keptOnCrossHost = map[string]bool{
	"Accept": true, "Accept-Encoding": true, "Accept-Language": true,
	"Content-Type": true, "User-Agent": true, "Referer": true,
}

// Redirects is an http.Client CheckRedirect function: it follows at most maxHops redirects,
// refuses a hop from https to http and, when allow is not nil, any hop whose URL allow refuses;
// on a hop to another host (or port, or scheme) it drops every header but a few harmless ones.
// The dialer still checks the address each hop connects to.
func Redirects(maxHops int, allow func(*url.URL) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) > maxHops {
			return fmt.Errorf("redirect to %s: more than %d redirects", req.URL.Redacted(), maxHops)
		}
		prev := via[len(via)-1].URL
		if prev.Scheme == "https" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirect to %s: refused, it leaves https", req.URL.Redacted())
		}
		if allow != nil {
			if err := allow(req.URL); err != nil {
				return fmt.Errorf("redirect to %s: %w", req.URL.Redacted(), err)
			}
		}
		if first := via[0].URL; req.URL.Host != first.Host || req.URL.Scheme != first.Scheme {
			for k := range req.Header {
				if !keptOnCrossHost[k] {
					delete(req.Header, k)
				}
			}
		}
		return nil
	}
}

// Client is an http.Client that dials through the policy and follows redirects as Redirects
// says. Callers bound a request with its context.
func (p Policy) Client(maxHops int, allow func(*url.URL) error) *http.Client {
	return &http.Client{Transport: p.Transport(), CheckRedirect: Redirects(maxHops, allow)}
}
