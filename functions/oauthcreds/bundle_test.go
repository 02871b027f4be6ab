package oauthcreds

import (
	"encoding/base64"
	"encoding/json"
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
	for _, format := range bundleFormats {
		t.Run(format, func(t *testing.T) {
			got := decodeBundle(format, encodeBundle(format, tok, []string{"s"}, exp))
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
	if err := json.Unmarshal([]byte(encodeBundle(BundleCodexAuthJSON, tok, nil, exp)), &f); err != nil || f.Tokens.AccountID != "acct-1" || f.Tokens.IDToken == "" {
		t.Fatalf("codex auth.json %+v, %v", f, err)
	}
}
