package auth

import (
	"net/http"
	"testing"

	"connectrpc.com/connect"
)

func TestCheckCSRFAcceptsOnlyHangarsOwnPages(t *testing.T) {
	a := &Authenticator{}
	a.AcceptSessions(nil, []string{"https://hangar.example.com/"})
	for _, tc := range []struct {
		name          string
		h             http.Header
		requireHeader bool
		ok            bool
	}{
		{"own origin with Connect's header", http.Header{"Origin": {"https://hangar.example.com"}, "Connect-Protocol-Version": {"1"}}, true, true},
		{"own origin with the custom header", http.Header{"Origin": {"https://hangar.example.com"}, CSRFHeader: {"1"}}, true, true},
		{"own origin, a form (no header asked)", http.Header{"Origin": {"https://hangar.example.com"}}, false, true},
		{"own origin, a form where a header is asked", http.Header{"Origin": {"https://hangar.example.com"}}, true, false},
		{"no Origin", http.Header{"Connect-Protocol-Version": {"1"}}, true, false},
		{"another scheme", http.Header{"Origin": {"http://hangar.example.com"}, "Connect-Protocol-Version": {"1"}}, true, false},
		{"a sibling subdomain", http.Header{"Origin": {"https://evil.hangar.example.com"}, "Connect-Protocol-Version": {"1"}}, true, false},
		{"a suffix trick", http.Header{"Origin": {"https://hangar.example.com.evil.example"}, "Connect-Protocol-Version": {"1"}}, true, false},
		{"an origin with a path", http.Header{"Origin": {"https://hangar.example.com/x"}, "Connect-Protocol-Version": {"1"}}, true, false},
		{"null", http.Header{"Origin": {"null"}, "Connect-Protocol-Version": {"1"}}, true, false},
		{"the browser says cross-site", http.Header{"Origin": {"https://hangar.example.com"}, "Connect-Protocol-Version": {"1"}, "Sec-Fetch-Site": {"cross-site"}}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := a.CheckCSRF(tc.h, tc.requireHeader)
			if tc.ok != (err == nil) {
				t.Fatalf("CheckCSRF = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Errorf("refused with %v, want permission_denied", connect.CodeOf(err))
			}
		})
	}
}
