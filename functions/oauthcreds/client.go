package oauthcreds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"golang.org/x/oauth2"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/records/credentials"
)

// providerTimeout bounds one request to a provider.
const providerTimeout = 30 * time.Second

// checkURL reads a provider URL named field as egress.Policy.CheckEndpoint does (https only;
// http on loopback only when Deps.LoopbackHTTP says so). The dialer checks again what the name
// resolves to on every connection, and every redirect comes back here.
func (s *Service) checkURL(field, raw string) (*url.URL, error) {
	u, err := s.d.Egress.CheckEndpoint(raw, s.d.LoopbackHTTP)
	if err != nil {
		return nil, apierr.InvalidArgument(field, err.Error())
	}
	return u, nil
}

// client is the HTTP client of every provider request: the egress policy's guarded dialer, and
// redirects checked as URLs are.
func (s *Service) client() *http.Client {
	c := s.d.Egress.Client(egress.MaxRedirects, func(u *url.URL) error {
		_, err := s.checkURL("redirect", u.String())
		return err
	})
	c.Timeout = providerTimeout
	return c
}

// withClient is ctx carrying client for golang.org/x/oauth2.
func (s *Service) withClient(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, s.client())
}

// endpoints are the URLs of one flow, checked.
type endpoints struct {
	deviceAuth, authorize, token string
}

// config is the oauth2.Config of a provider's flow: its checked endpoints, scopes and client,
// whose id and secret come from the provider (a public id) or the org secret store, used as
// sub (the secret's access policy decides).
func (s *Service) config(ctx context.Context, sub credentials.Subject, p Provider, spec *appv1.RedirectOauthSpec, e endpoints, redirectURI string) (*oauth2.Config, error) {
	clientID, idRef, secretRef := p.ClientID, p.ClientIDRef, p.ClientSecretRef
	if spec != nil {
		// A spec names its own client; the registry's public id serves only its own token URL.
		idRef, secretRef = spec.GetClientIdRef(), spec.GetClientSecretRef()
		if spec.GetTokenUrl() != p.TokenURL {
			clientID = ""
		}
	}
	user := secretSubject(ctx, sub)
	if idRef != "" {
		v, err := s.d.Secrets.Use(ctx, user, idRef)
		if err != nil {
			return nil, fmt.Errorf("client_id_ref: %w", err)
		}
		clientID = strings.TrimSpace(v)
	}
	if clientID == "" {
		return nil, apierr.InvalidArgument("spec.client_id_ref", "is required: provider "+p.ID+" has no public client id")
	}
	var secret string
	if secretRef != "" {
		v, err := s.d.Secrets.Use(ctx, user, secretRef)
		if err != nil {
			return nil, fmt.Errorf("client_secret_ref: %w", err)
		}
		secret = strings.TrimSpace(v)
	}
	style := oauth2.AuthStyleInParams
	if p.AuthInHeader {
		style = oauth2.AuthStyleInHeader
	}
	return &oauth2.Config{
		ClientID: clientID, ClientSecret: secret, RedirectURL: redirectURI,
		Endpoint: oauth2.Endpoint{DeviceAuthURL: e.deviceAuth, AuthURL: e.authorize, TokenURL: e.token, AuthStyle: style},
	}, nil
}

// oauthCode is how a provider's OAuth error code is kept and shown: the RFC's codes are
// lowercase words; anything else becomes invalid_token_response, so nothing the provider wrote
// beyond a code reaches a record, a log or a caller.
var oauthCode = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// providerError classifies an error of a token or device endpoint: code is the OAuth error code
// (RFC 6749 5.2, RFC 8628 3.5) when the provider answered one, and transient says the request did
// not reach an answer (network, timeout, 5xx) and may be retried. The error returned instead of
// err says only that: a RetrieveError's text holds the provider's whole answer.
func providerError(what string, err error) (code string, transient bool, safe error) {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		code = re.ErrorCode
		if !oauthCode.MatchString(code) {
			code = "invalid_token_response"
		}
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		transient = status >= 500 && re.ErrorCode == ""
		return code, transient, fmt.Errorf("%s: the provider answered %d %s", what, status, code)
	}
	var refused *egress.RefusedError
	if errors.As(err, &refused) {
		return "endpoint_refused", false, fmt.Errorf("%s: %w", what, refused)
	}
	if _, bad := apierr.Violation(err, "redirect"); bad {
		return "endpoint_refused", false, fmt.Errorf("%s: the provider redirected where Hangar does not follow", what)
	}
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue) || errors.Is(err, context.DeadlineExceeded) {
		return "", true, fmt.Errorf("%s: the provider could not be reached", what)
	}
	return "invalid_token_response", false, fmt.Errorf("%s: the provider's answer is not a token", what)
}
