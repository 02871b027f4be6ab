package reviews

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v88/github"
)

// Org secrets the GitHub integration reads: a GitHub App (its id and PEM private key, with the
// installation id each delivery names) or, failing that, a token. An App is preferred: its
// installation tokens last an hour and reach only the repositories it is installed on.
const (
	SecretAppID      = "GITHUB_APP_ID"
	SecretPrivateKey = "GITHUB_APP_PRIVATE_KEY"
	SecretToken      = "GITHUB_TOKEN"
)

// Secrets reads the organisation's secrets for the operator's own use.
type Secrets interface {
	Lookup(ctx context.Context, name string) (string, bool, error)
}

// GitHub makes go-github clients authenticated as the org secret store says.
type GitHub struct {
	secrets Secrets
	baseURL string
	http    *http.Client
}

// NewGitHub returns the integration over secrets, calling the REST API at baseURL
// (https://api.github.com/ or a GitHub Enterprise Server's /api/v3/) through client (nil: a
// default client with a timeout).
func NewGitHub(secrets Secrets, baseURL string, client *http.Client) *GitHub {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	if !strings.HasSuffix(baseURL, "/") {
		baseURL += "/"
	}
	return &GitHub{secrets: secrets, baseURL: baseURL, http: client}
}

// errNoCredentials is a GitHub integration that is not configured: a pass fails with it.
var errNoCredentials = errors.New("no GitHub credentials: set the org secrets " + SecretAppID + " and " + SecretPrivateKey + " (a GitHub App) or " + SecretToken)

// Client is a client for an installation (0: none, a token is then required).
func (g *GitHub) Client(ctx context.Context, installationID int64) (*github.Client, error) {
	itr, token, err := g.credentials(ctx, installationID)
	if err != nil {
		return nil, err
	}
	if itr != nil {
		return g.client(&http.Client{Transport: itr, Timeout: g.http.Timeout})
	}
	return g.client(g.http, github.WithAuthToken(token))
}

// Token is a token git can fetch repo with (and push to it, with push): for a GitHub App a fresh
// installation token (an hour's) that reaches repo only, with contents read (or write)
// permission, so an agent that reads the code under review cannot write with it; else the
// configured token, whatever it may do.
func (g *GitHub) Token(ctx context.Context, installationID int64, repo string, push bool) (string, error) {
	itr, token, err := g.credentials(ctx, installationID)
	if err != nil || itr == nil {
		return token, err
	}
	access := "read"
	if push {
		access = "write"
	}
	_, name := splitRepo(repo)
	itr.InstallationTokenOptions = &github.InstallationTokenOptions{Repositories: []string{name}, Permissions: &github.InstallationPermissions{Contents: &access}}
	token, err = itr.Token(ctx)
	if err != nil {
		return "", fmt.Errorf("mint an installation token for %d: %w", installationID, err)
	}
	return token, nil
}

// credentials are the App's installation transport, or (without an App or an installation)
// the token.
func (g *GitHub) credentials(ctx context.Context, installationID int64) (*ghinstallation.Transport, string, error) {
	if g == nil || g.secrets == nil {
		return nil, "", errNoCredentials
	}
	appID, hasApp, err := g.secrets.Lookup(ctx, SecretAppID)
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", SecretAppID, err)
	}
	tr := g.http.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	if hasApp && installationID != 0 {
		key, ok, err := g.secrets.Lookup(ctx, SecretPrivateKey)
		if err != nil || !ok {
			return nil, "", fmt.Errorf("%s is set but %s cannot be read: %w", SecretAppID, SecretPrivateKey, errors.Join(err, errNoCredentials))
		}
		id, err := strconv.ParseInt(strings.TrimSpace(appID), 10, 64)
		if err != nil {
			return nil, "", fmt.Errorf("%s must be the App's numeric id: %w", SecretAppID, err)
		}
		itr, err := ghinstallation.New(tr, id, installationID, []byte(key))
		if err != nil {
			return nil, "", fmt.Errorf("GitHub App installation %d: %w", installationID, err)
		}
		itr.BaseURL = strings.TrimSuffix(g.baseURL, "/")
		return itr, "", nil
	}
	token, ok, err := g.secrets.Lookup(ctx, SecretToken)
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", SecretToken, err)
	}
	if !ok {
		return nil, "", errNoCredentials
	}
	return nil, strings.TrimSpace(token), nil
}

func (g *GitHub) client(hc *http.Client, opts ...github.ClientOptionsFunc) (*github.Client, error) {
	opts = append([]github.ClientOptionsFunc{github.WithHTTPClient(hc), github.WithURLs(&g.baseURL, &g.baseURL), github.WithUserAgent("hangar-reviews")}, opts...)
	c, err := github.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("GitHub client for %s: %w", g.baseURL, err)
	}
	return c, nil
}

// gitHubFault classifies a GitHub error for the step machine: a rate limit waits until it
// resets (wait > 0); a 5xx or a lost connection is transient; 401, 403, 404 and 422 are final,
// since trying again gets the same answer.
func gitHubFault(err error, now time.Time) (wait time.Duration, transient bool) {
	var rl *github.RateLimitError
	if errors.As(err, &rl) {
		return max(rl.Rate.Reset.Sub(now), time.Second), true
	}
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &abuse) {
		if abuse.RetryAfter != nil {
			return max(*abuse.RetryAfter, time.Second), true
		}
		return time.Minute, true
	}
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		switch code := er.Response.StatusCode; {
		case code == http.StatusTooManyRequests:
			return time.Minute, true
		case code >= 500:
			return 0, true
		}
		return 0, false
	}
	if errors.Is(err, errNoCredentials) {
		return 0, false
	}
	// A transport error (connection refused, timeout): GitHub may answer next time.
	return 0, true
}

func splitRepo(repo string) (owner, name string) {
	owner, name, _ = strings.Cut(repo, "/")
	return owner, name
}
