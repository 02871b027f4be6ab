package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"golang.org/x/oauth2"

	"github.com/hangar-dev/hangar/platform/httpapi"
)

// `hangar login` signs this machine in by RFC 8628's device authorization grant against Hangar
// itself (functions/signin): it asks for a code, a signed-in person approves it in a browser,
// and the key Hangar mints is kept in the user's config dir, where the client commands find it
// when neither --api-key nor HANGAR_API_KEY is given.

// storedLogin is what `hangar login` keeps: the server and the key it minted.
type storedLogin struct {
	URL    string `json:"url"`
	APIKey string `json:"api_key"`
	KeyID  string `json:"key_id,omitempty"`
}

// loginPath is where the login is kept: <user config dir>/hangar/login.json.
func loginPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the user config dir: %w", err)
	}
	return filepath.Join(dir, "hangar", "login.json"), nil
}

// loadLogin reads the stored login; none is (nil, nil).
func loadLogin() (*storedLogin, error) {
	path, err := loginPath()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the login: %w", err)
	}
	var l storedLogin
	if err := json.Unmarshal(b, &l); err != nil || l.APIKey == "" {
		return nil, fmt.Errorf("the login in %s is damaged: run hangar login again", path)
	}
	return &l, nil
}

// saveLogin writes l readable by its owner only (the directory too), replacing any other.
func saveLogin(l storedLogin) (string, error) {
	path, err := loginPath()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	b, _ := json.MarshalIndent(l, "", "  ")
	tmp, err := os.CreateTemp(filepath.Dir(path), ".login-*")
	if err != nil {
		return "", fmt.Errorf("save the login: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", fmt.Errorf("save the login: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return "", fmt.Errorf("save the login: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("save the login: %w", err)
	}
	return path, os.Rename(tmp.Name(), path)
}

// credentials are the server and key a client command uses: --api-key, else HANGAR_API_KEY,
// else the stored login, whose server is also the default when neither --url nor HANGAR_URL
// names one. source says where the key came from.
func credentials(cmd *cobra.Command, url, flagKey string) (server, key, source string, err error) {
	server = strings.TrimRight(url, "/")
	switch {
	case flagKey != "":
		return server, flagKey, "--api-key", nil
	case os.Getenv("HANGAR_API_KEY") != "":
		return server, os.Getenv("HANGAR_API_KEY"), "HANGAR_API_KEY", nil
	}
	l, err := loadLogin()
	if err != nil || l == nil {
		return server, "", "", err
	}
	if f := cmd.Flags().Lookup("url"); (f == nil || !f.Changed) && os.Getenv("HANGAR_URL") == "" {
		server = strings.TrimRight(l.URL, "/")
	}
	if server != strings.TrimRight(l.URL, "/") {
		return server, "", "", nil
	}
	path, _ := loginPath()
	return server, l.APIKey, path, nil
}

func newLoginCmd() *cobra.Command {
	var url string
	var noBrowser bool
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Sign this machine in: approve a code in the browser, get a personal API key",
		Long: `login asks Hangar for a one-time code (RFC 8628 device authorization), prints the page to
approve it on and the code (opening a browser when there is one), and waits while you approve it
there, signed in to Hangar. Hangar then mints a personal API key named after this machine, which
login keeps in <user config dir>/hangar/login.json (mode 0600). Client commands use it when
neither --api-key nor HANGAR_API_KEY is given; hangar logout revokes it.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLogin(cmd.Context(), strings.TrimRight(url, "/"), !noBrowser, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&url, "url", envOr("HANGAR_URL", defaultURL), "Hangar server URL (env HANGAR_URL)")
	cmd.Flags().BoolVar(&noBrowser, "no-browser", false, "only print the page to open, never open a browser")
	return cmd
}

func runLogin(ctx context.Context, url string, browser bool, out io.Writer) error {
	conf := &oauth2.Config{
		ClientID: httpapi.CLIClientID,
		Endpoint: oauth2.Endpoint{DeviceAuthURL: url + httpapi.DeviceCodePath, TokenURL: url + httpapi.DeviceTokenPath, AuthStyle: oauth2.AuthStyleInParams},
	}
	machine, _ := os.Hostname()
	da, err := conf.DeviceAuth(ctx, oauth2.SetAuthURLParam("machine", machine))
	if err != nil {
		return fmt.Errorf("ask %s for a login code: %w", url, oauthErr(err))
	}
	fmt.Fprintf(out, "Open %s and enter the code\n\n    %s\n\n(or open %s)\nWaiting for approval…\n", da.VerificationURI, da.UserCode, da.VerificationURIComplete)
	if browser {
		openBrowser(da.VerificationURIComplete)
	}
	tok, err := conf.DeviceAccessToken(ctx, da)
	// temporarily_unavailable: Hangar issued nothing (the key and the grant's end commit
	// together), so the approval still stands and the next poll may get the key.
	for err != nil && isOAuthError(err, "temporarily_unavailable") && time.Now().Before(da.Expiry) {
		tok, err = conf.DeviceAccessToken(ctx, da)
	}
	if err != nil {
		return &exitStatus{code: exitUnauthenticated, err: fmt.Errorf("login: %w", oauthErr(err))}
	}
	keyID, _ := tok.Extra("key_id").(string)
	path, err := saveLogin(storedLogin{URL: url, APIKey: tok.AccessToken, KeyID: keyID})
	if err != nil {
		return err
	}
	w, err := fetchWhoami(ctx, url, tok.AccessToken)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Signed in to %s as %s with the key %s (%q), kept in %s.\n", url, w.who(), "hgr_"+w.KeyID, w.KeyName, path)
	return nil
}

// isOAuthError reports whether err is a token endpoint's answer of the RFC error code.
func isOAuthError(err error, code string) bool {
	var re *oauth2.RetrieveError
	return errors.As(err, &re) && re.ErrorCode == code
}

// oauthErr is a device grant failure as the RFC code and its description.
func oauthErr(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.ErrorCode != "" {
		return fmt.Errorf("%s: %s", re.ErrorCode, re.ErrorDescription)
	}
	return err
}

// openBrowser opens url where there is a desktop to open it on; failing is no error, the URL is
// printed.
func openBrowser(url string) {
	var c *exec.Cmd
	switch {
	case runtime.GOOS == "darwin":
		c = exec.Command("open", url)
	case os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != "":
		c = exec.Command("xdg-open", url)
	default:
		return
	}
	if c.Start() == nil {
		go func() { _ = c.Wait() }()
	}
}

func newLogoutCmd() *cobra.Command {
	var everywhere bool
	var user, url, apiKey string
	cmd := &cobra.Command{
		Use:   "logout [--everywhere [--user USER_ID]]",
		Short: "Revoke the key hangar login stored and forget it; --everywhere signs every browser out instead",
		Long: `logout revokes the key hangar login stored and removes it.

logout --everywhere instead revokes every dashboard session (browser cookie) of yours, or, as
an admin, of --user: every browser signed in as that person is signed out at once on this
instance and within HANGAR_AUTH_CACHE_TTL on others. API keys are left alone (hangar keys
revoke ends those).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if everywhere {
				return logoutEverywhere(cmd, url, apiKey, user)
			}
			if user != "" {
				return usageError("--user goes with --everywhere")
			}
			l, err := loadLogin()
			if err != nil {
				return err
			}
			if l == nil {
				return &exitStatus{code: exitUnauthenticated, err: errors.New("not logged in: there is no stored login")}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			err = authRequest(ctx, http.MethodPost, l.URL+httpapi.LogoutPath, l.APIKey, nil)
			// A key revoked already (by an admin, or another logout) is as good as revoked now.
			if err != nil && connect.CodeOf(err) != connect.CodeUnauthenticated {
				return cliError(err, l.URL)
			}
			path, _ := loginPath()
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("forget the login: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Revoked the key hgr_%s and removed %s.\n", l.KeyID, path)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&everywhere, "everywhere", false, "revoke every dashboard session of yours (or --user's) instead of the stored key")
	fl.StringVar(&user, "user", "", "with --everywhere: the `USER_ID` to sign out (admins only)")
	fl.StringVar(&url, "url", envOr("HANGAR_URL", defaultURL), "with --everywhere: Hangar server URL (env HANGAR_URL)")
	fl.StringVar(&apiKey, "api-key", "", "with --everywhere: API key (default: env HANGAR_API_KEY, else hangar login's)")
	return cmd
}

// logoutEverywhere revokes every dashboard session of user ("": the caller's own).
func logoutEverywhere(cmd *cobra.Command, url, apiKey, user string) error {
	server, key, _, err := credentials(cmd, url, apiKey)
	if err != nil {
		return err
	}
	if key == "" {
		return &exitStatus{code: exitUnauthenticated, err: errors.New("not logged in: run hangar login, or set HANGAR_API_KEY")}
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
	defer cancel()
	target := server + httpapi.RevokeSessionsPath
	if user != "" {
		target += "?user_id=" + neturl.QueryEscape(user)
	}
	var out httpapi.RevokedSessions
	if err := authRequest(ctx, http.MethodPost, target, key, &out); err != nil {
		return cliError(err, server)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Signed %s out everywhere: %d browser sessions revoked.\n", out.UserID, out.Revoked)
	return nil
}

// whoami is GET /api/auth/whoami's answer.
type whoami httpapi.Whoami

func (w whoami) who() string {
	if w.Email != "" {
		return w.Email
	}
	return cmp.Or(w.Name, w.UserID)
}

func fetchWhoami(ctx context.Context, url, key string) (whoami, error) {
	var w whoami
	err := authRequest(ctx, http.MethodGet, url+httpapi.WhoamiPath, key, &w)
	return w, err
}

func newWhoamiCmd() *cobra.Command {
	var url, apiKey string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show who the API key in use belongs to, and which key it is",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			server, key, source, err := credentials(cmd, url, apiKey)
			if err != nil {
				return err
			}
			if key == "" {
				return &exitStatus{code: exitUnauthenticated, err: errors.New("not logged in: run hangar login, or set HANGAR_API_KEY")}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			w, err := fetchWhoami(ctx, server, key)
			if err != nil {
				return cliError(err, server)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				b, _ := json.MarshalIndent(w, "", "  ")
				_, err := fmt.Fprintf(out, "%s\n", b)
				return err
			}
			role := "user"
			if w.Admin {
				role = "admin"
			}
			fmt.Fprintf(out, "user: %s (%s, %s)\nkey: hgr_%s %q (%s)\nkey from: %s\nserver: %s\n", w.who(), w.UserID, role, w.KeyID, w.KeyName, w.Kind, source, server)
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", envOr("HANGAR_URL", defaultURL), "Hangar server URL (env HANGAR_URL)")
	cmd.Flags().StringVar(&apiKey, "api-key", "", "API key (default: env HANGAR_API_KEY, else hangar login's)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the answer as JSON")
	return cmd
}

// authRequest sends a request to an /api/auth route with key, decoding a JSON answer into out
// (nil: none); an error answer is the Connect error it carries.
func authRequest(ctx context.Context, method, url, key string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set(httpapi.APIKeyHeader, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		var code connect.Code
		if json.Unmarshal(body, &e) != nil || code.UnmarshalText([]byte(e.Code)) != nil {
			return fmt.Errorf("%s %s: %s", method, url, resp.Status)
		}
		return connect.NewError(code, errors.New(e.Message))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(body, out)
}
