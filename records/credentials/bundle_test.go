package credentials

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

func jwt(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(payload)) + ".sig"
}

// Every format gives back the token it was made from: what refreshing needs (the refresh
// token) and when it expires; Codex's keeps the id_token and its ChatGPT account.
func TestBundlesRoundTripTheirTokens(t *testing.T) {
	t.Parallel()
	exp := time.Unix(1_900_000_000, 0)
	access := jwt(`{"exp":1900000000}`)
	tok := (&oauth2.Token{AccessToken: access, RefreshToken: "rt", Expiry: exp}).WithExtra(map[string]any{
		"id_token": jwt(`{"https://api.openai.com/auth":{"chatgpt_account_id":"acct-1"}}`),
	})
	for _, format := range BundleFormats {
		t.Run(format, func(t *testing.T) {
			got := DecodeBundle(format, EncodeBundle(format, tok, []string{"s"}, exp))
			if got.AccessToken != access {
				t.Fatalf("access token %q", got.AccessToken)
			}
			if format == BundleAccessToken {
				return
			}
			if got.RefreshToken != "rt" || !got.Expiry.Equal(exp) {
				t.Fatalf("refresh token %q, expiry %v", got.RefreshToken, got.Expiry)
			}
		})
	}
	var f codexFile
	if err := json.Unmarshal([]byte(EncodeBundle(BundleCodexAuthJSON, tok, nil, exp)), &f); err != nil || f.Tokens.AccountID != "acct-1" || f.Tokens.IDToken == "" {
		t.Fatalf("codex auth.json %+v, %v", f, err)
	}
}

// What a sandbox behind the egress proxy reads: each format with the placeholder for its
// access token, no refresh token, and an expiry it will not try to refresh at; what else the
// harness needs (Codex's id_token and account) kept. AccessToken reads the real token back out
// of each, a bare Claude Code token included.
func TestSandboxBundlesHoldOnlyAPlaceholder(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	access := jwt(`{"exp":1800003600}`)
	tok := (&oauth2.Token{AccessToken: access, RefreshToken: "rt-secret", Expiry: now.Add(time.Hour), TokenType: "Bearer"}).WithExtra(map[string]any{
		"id_token": jwt(`{"https://api.openai.com/auth":{"chatgpt_account_id":"acct-1"}}`),
	})
	cases := map[string]string{"bare claude_code token": "sk-ant-oat01-secret"}
	for _, format := range BundleFormats {
		cases[format] = EncodeBundle(format, tok, []string{"s"}, now)
	}
	for name, bundle := range cases {
		format := name
		if name == "bare claude_code token" {
			format = BundleClaudeCode
		}
		t.Run(name, func(t *testing.T) {
			real := AccessToken(format, bundle)
			if real != access && real != "sk-ant-oat01-secret" {
				t.Fatalf("AccessToken = %q", real)
			}
			got, ok := SandboxBundle(format, bundle, "hangar-placeholder-x", now)
			if !ok || strings.Contains(got, real) || strings.Contains(got, "rt-secret") || !strings.Contains(got, "hangar-placeholder-x") {
				t.Fatalf("the sandbox's bundle is %q (%v)", got, ok)
			}
			back := DecodeBundle(format, got)
			if AccessToken(format, got) != "hangar-placeholder-x" || back.RefreshToken != "" || (!back.Expiry.IsZero() && back.Expiry.Before(now.Add(30*24*time.Hour))) {
				t.Fatalf("the sandbox's bundle reads back as %+v", back)
			}
			if format == BundleCodexAuthJSON && !strings.Contains(got, `"account_id":"acct-1"`) {
				t.Fatalf("the codex bundle lost its account: %q", got)
			}
		})
	}
	if _, ok := SandboxBundle(BundleCodexAuthJSON, `{"tokens":{}}`, "p", now); ok {
		t.Fatal("a bundle without an access token made a sandbox bundle")
	}
}
