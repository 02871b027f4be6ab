package credentials

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// Bundle formats: how a token becomes the opaque bundle a session's harness reads, and back
// (the refresh sweep reads the refresh token out of it; a session's UpdateSessionCredential
// gives a bundle whose expiry Hangar reads to schedule the next refresh). SandboxBundle is what
// a sandbox behind the egress proxy reads instead, and AccessToken what the proxy injects.
const (
	// BundleTokenJSON is golang.org/x/oauth2's Token as JSON: access_token, token_type,
	// refresh_token, expiry.
	BundleTokenJSON = "token_json"
	// BundleAccessToken is the bare access token: nothing to refresh with.
	BundleAccessToken = "access_token"
	// BundleClaudeCode is Claude Code's credentials file: {"claudeAiOauth": {"accessToken",
	// "refreshToken", "expiresAt" (Unix ms), "scopes"}}.
	BundleClaudeCode = "claude_code"
	// BundleCodexAuthJSON is Codex's auth.json: {"tokens": {"id_token", "access_token",
	// "refresh_token", "account_id"}, "last_refresh"}; its expiry is the access token's JWT exp.
	BundleCodexAuthJSON = "codex_auth_json"
)

// BundleFormats lists the formats, "" (the default, token_json) first.
var BundleFormats = []string{"", BundleTokenJSON, BundleAccessToken, BundleClaudeCode, BundleCodexAuthJSON}

type claudeFile struct {
	ClaudeAiOauth struct {
		AccessToken  string   `json:"accessToken"`
		RefreshToken string   `json:"refreshToken,omitempty"`
		ExpiresAt    int64    `json:"expiresAt,omitempty"`
		Scopes       []string `json:"scopes,omitempty"`
	} `json:"claudeAiOauth"`
}

type codexFile struct {
	APIKey *string `json:"OPENAI_API_KEY"`
	Tokens struct {
		IDToken      string `json:"id_token,omitempty"`
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token,omitempty"`
		AccountID    string `json:"account_id,omitempty"`
	} `json:"tokens"`
	LastRefresh time.Time `json:"last_refresh"`
}

// EncodeBundle makes the bundle of tok in format; scopes are what the flow asked for, now the
// time of the refresh.
func EncodeBundle(format string, tok *oauth2.Token, scopes []string, now time.Time) string {
	var out any
	switch format {
	case BundleAccessToken:
		return tok.AccessToken
	case BundleClaudeCode:
		var f claudeFile
		f.ClaudeAiOauth.AccessToken, f.ClaudeAiOauth.RefreshToken, f.ClaudeAiOauth.Scopes = tok.AccessToken, tok.RefreshToken, scopes
		if !tok.Expiry.IsZero() {
			f.ClaudeAiOauth.ExpiresAt = tok.Expiry.UnixMilli()
		}
		out = f
	case BundleCodexAuthJSON:
		var f codexFile
		f.Tokens.AccessToken, f.Tokens.RefreshToken, f.LastRefresh = tok.AccessToken, tok.RefreshToken, now.UTC()
		if id, ok := tok.Extra("id_token").(string); ok {
			f.Tokens.IDToken = id
		}
		if acct, ok := tok.Extra("account_id").(string); ok {
			f.Tokens.AccountID = acct
		} else {
			f.Tokens.AccountID = chatGPTAccountID(f.Tokens.IDToken)
		}
		out = f
	default:
		out = oauth2.Token{AccessToken: tok.AccessToken, TokenType: tok.TokenType, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// DecodeBundle reads the token back out of a bundle in format: what refreshing needs and when
// it expires. A bundle it cannot read is a token with neither (nothing to schedule); a session
// may hand back whatever its harness wrote.
func DecodeBundle(format, bundle string) oauth2.Token {
	switch format {
	case BundleAccessToken:
		return oauth2.Token{AccessToken: bundle}
	case BundleClaudeCode:
		var f claudeFile
		if json.Unmarshal([]byte(bundle), &f) != nil {
			return oauth2.Token{}
		}
		t := oauth2.Token{AccessToken: f.ClaudeAiOauth.AccessToken, RefreshToken: f.ClaudeAiOauth.RefreshToken}
		if f.ClaudeAiOauth.ExpiresAt > 0 {
			t.Expiry = time.UnixMilli(f.ClaudeAiOauth.ExpiresAt)
		}
		return t
	case BundleCodexAuthJSON:
		var f codexFile
		if json.Unmarshal([]byte(bundle), &f) != nil {
			return oauth2.Token{}
		}
		return oauth2.Token{AccessToken: f.Tokens.AccessToken, RefreshToken: f.Tokens.RefreshToken, Expiry: jwtExpiry(f.Tokens.AccessToken)}
	default:
		var t oauth2.Token
		if json.Unmarshal([]byte(bundle), &t) != nil {
			return oauth2.Token{}
		}
		return t
	}
}

// RewrapBundle replaces the token in a bundle of format, keeping what else the harness wrote
// there (Codex's id_token and account_id when the refresh answer has none).
func RewrapBundle(format, old string, tok *oauth2.Token, scopes []string, now time.Time) string {
	if format == BundleCodexAuthJSON {
		var f codexFile
		if json.Unmarshal([]byte(old), &f) == nil {
			if _, ok := tok.Extra("id_token").(string); !ok && f.Tokens.IDToken != "" {
				tok = tok.WithExtra(map[string]any{"id_token": f.Tokens.IDToken, "account_id": f.Tokens.AccountID})
			}
		}
	}
	if format == BundleClaudeCode {
		var f claudeFile
		if json.Unmarshal([]byte(old), &f) == nil && len(f.ClaudeAiOauth.Scopes) > 0 {
			scopes = f.ClaudeAiOauth.Scopes
		}
	}
	return EncodeBundle(format, tok, scopes, now)
}

// jwtExpiry is the exp claim of a JWT, unverified: only to schedule a refresh (zero when the
// token is not a JWT).
func jwtExpiry(token string) time.Time {
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if !jwtClaims(token, &claims) || claims.Exp <= 0 {
		return time.Time{}
	}
	return time.Unix(claims.Exp, 0)
}

// chatGPTAccountID is the ChatGPT account an OpenAI id_token names (its
// "https://api.openai.com/auth" claim), which Codex's auth.json keeps as account_id; "" when
// the token does not say.
func chatGPTAccountID(idToken string) string {
	var claims struct {
		Auth struct {
			AccountID string `json:"chatgpt_account_id"`
		} `json:"https://api.openai.com/auth"`
	}
	if !jwtClaims(idToken, &claims) {
		return ""
	}
	return claims.Auth.AccountID
}

// jwtClaims decodes a JWT's payload into claims without verifying it: Hangar only reads what
// the provider just sent it over TLS, to schedule and label, never to authorize.
func jwtClaims(token string, claims any) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	return err == nil && json.Unmarshal(payload, claims) == nil
}

// AccessToken is the access token a bundle of format holds, "" when it holds none Hangar can
// read. A claude_code bundle may be the bare token (what a pasted credential often is).
func AccessToken(format, bundle string) string {
	if format == BundleClaudeCode && !strings.HasPrefix(strings.TrimSpace(bundle), "{") {
		return strings.TrimSpace(bundle)
	}
	return DecodeBundle(format, bundle).AccessToken
}

// SandboxBundle is bundle, of format, as a sandbox behind the egress proxy receives it: its
// access token replaced by placeholder, its refresh token dropped (Hangar refreshes, the
// sandbox never can) and its expiry removed or put far ahead, so the harness never tries to
// refresh it itself; what else the harness wrote (Codex's id_token and account, Claude Code's
// scopes) is kept. It reports false when the bundle holds no access token it can read.
func SandboxBundle(format, bundle, placeholder string, now time.Time) (string, bool) {
	if AccessToken(format, bundle) == "" {
		return "", false
	}
	var out any
	switch format {
	case BundleAccessToken:
		return placeholder, true
	case BundleClaudeCode:
		var f claudeFile
		if json.Unmarshal([]byte(bundle), &f) != nil {
			return placeholder, true // the bare token
		}
		f.ClaudeAiOauth.AccessToken, f.ClaudeAiOauth.RefreshToken = placeholder, ""
		f.ClaudeAiOauth.ExpiresAt = now.Add(sandboxBundleLife).UnixMilli()
		out = f
	case BundleCodexAuthJSON:
		var f codexFile
		_ = json.Unmarshal([]byte(bundle), &f)
		f.Tokens.AccessToken, f.Tokens.RefreshToken, f.LastRefresh = placeholder, "", now.UTC()
		out = f
	default:
		out = oauth2.Token{AccessToken: placeholder, TokenType: DecodeBundle(format, bundle).TokenType}
	}
	b, _ := json.Marshal(out)
	return string(b), true
}

// sandboxBundleLife is how far ahead a sandbox's bundle says its token expires: past any
// session's life, so that the harness never refreshes (it has nothing to refresh with).
const sandboxBundleLife = 365 * 24 * time.Hour
