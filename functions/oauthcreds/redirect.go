package oauthcreds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/oauth2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/records/credentials"
)

// reservedAuthorizeParams are the authorize parameters Hangar sets itself; extra_authorize_params
// may not name them.
var reservedAuthorizeParams = []string{"response_type", "client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method"}

// BeginRedirectFlow starts an authorization code flow: it answers the authorize_url to send the
// user's browser to, bound by state (the flow id) to the subject and redirect_uri. spec, when
// given, says the provider's endpoints and client; without one the registry's provider does.
func (s *Service) BeginRedirectFlow(ctx context.Context, req *connect.Request[appv1.BeginRedirectFlowRequest]) (*connect.Response[appv1.BeginRedirectFlowResponse], error) {
	sub, err := subject(ctx, req.Msg.GetSubject())
	if err != nil {
		return nil, err
	}
	p, spec, err := s.redirectProvider(req.Msg.GetProvider(), req.Msg.GetSpec())
	if err != nil {
		return nil, err
	}
	e, err := s.redirectEndpoints(spec)
	if err != nil {
		return nil, err
	}
	redirectURI, err := s.checkRedirectURI(req.Msg.GetRedirectUri())
	if err != nil {
		return nil, err
	}
	conf, err := s.config(ctx, sub, p, spec, e, redirectURI)
	if err != nil {
		return nil, err
	}
	f := &credentials.Flow{
		ID: credentials.NewFlowID(), Kind: credentials.FlowRedirect, SubjectKind: sub.Kind, SubjectID: sub.ID, Provider: p.ID,
		ExpiresAt: s.d.Clock.Now().Add(redirectFlowTTL).UTC(), RedirectURI: redirectURI, StartedBy: starter(ctx),
	}
	specJSON, err := protojson.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("keep the spec of flow %s: %w", f.ID, err)
	}
	f.Spec = string(specJSON)
	var opts []oauth2.AuthCodeOption
	if len(spec.GetScopes()) > 0 {
		opts = append(opts, oauth2.SetAuthURLParam(cmpOr(spec.GetScopesParam(), "scope"), strings.Join(spec.GetScopes(), cmpOr(spec.GetScopeDelimiter(), " "))))
	}
	for _, k := range slices.Sorted(maps.Keys(spec.GetExtraAuthorizeParams())) {
		opts = append(opts, oauth2.SetAuthURLParam(k, spec.GetExtraAuthorizeParams()[k]))
	}
	if spec.GetPkce() {
		verifier := oauth2.GenerateVerifier()
		if f.Sealed, err = s.d.Sealer.Seal([]byte(verifier), credentials.FlowOwner(f.ID)); err != nil {
			return nil, err
		}
		opts = append(opts, oauth2.S256ChallengeOption(verifier))
	}
	authorizeURL := conf.AuthCodeURL(f.ID, opts...)
	if err := s.createFlow(ctx, f); err != nil {
		return nil, err
	}
	s.d.Log.Info("oauth redirect flow began", "flow", f.ID, "provider", p.ID, "subject", sub.String())
	return connect.NewResponse(&appv1.BeginRedirectFlowResponse{Flow: flowProto(f), AuthorizeUrl: authorizeURL}), nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// redirectProvider is the provider of a redirect flow and the spec it runs by: the request's
// spec, checked, or the registry provider's.
func (s *Service) redirectProvider(name string, spec *appv1.RedirectOauthSpec) (Provider, *appv1.RedirectOauthSpec, error) {
	name = strings.TrimSpace(name)
	if !credentials.ValidProvider(name) {
		return Provider{}, nil, apierr.InvalidArgument("provider", "must be 1 to 64 lowercase letters, digits or _.- (e.g. github)")
	}
	p, known := s.d.Providers[name]
	if spec == nil {
		if !known || p.AuthorizeURL == "" {
			return Provider{}, nil, apierr.InvalidArgument("spec", fmt.Sprintf("is required: %q is not a provider with a redirect flow here", name))
		}
		return p, p.spec(), nil
	}
	if !known {
		p = Provider{ID: name}
	}
	var v apierr.Violations
	for k := range spec.GetExtraAuthorizeParams() {
		if slices.Contains(reservedAuthorizeParams, k) || k == cmpOr(spec.GetScopesParam(), "scope") {
			v.Addf("spec.extra_authorize_params", "may not set %q, which Hangar sets", k)
		}
	}
	if spec.GetGrantPath() != "" {
		for _, part := range strings.Split(spec.GetGrantPath(), ".") {
			if !oauthCode.MatchString(part) {
				v.Add("spec.grant_path", "must be dot-separated lowercase field names of the token response")
				break
			}
		}
	}
	return p, spec, v.Err()
}

func (s *Service) redirectEndpoints(spec *appv1.RedirectOauthSpec) (endpoints, error) {
	a, err := s.checkURL("spec.authorize_url", spec.GetAuthorizeUrl())
	if err != nil {
		return endpoints{}, err
	}
	t, err := s.checkURL("spec.token_url", spec.GetTokenUrl())
	if err != nil {
		return endpoints{}, err
	}
	return endpoints{authorize: a.String(), token: t.String()}, nil
}

// checkRedirectURI reads where the provider sends the browser back: an absolute https URL, or
// http on a loopback address (RFC 8252 7.3's native-app redirect), without a fragment.
func (s *Service) checkRedirectURI(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || !u.IsAbs() || u.Host == "" || u.Fragment != "" || u.User != nil ||
		!(u.Scheme == "https" || u.Scheme == "http" && egress.IsLoopbackHost(u.Hostname())) {
		return "", apierr.InvalidArgument("redirect_uri", "must be an absolute https URL (or http on a loopback address) without a fragment")
	}
	return u.String(), nil
}

// LookupRedirectFlow finds a flow by its id (the state the callback carries), for the caller
// who may act on its subject.
func (s *Service) LookupRedirectFlow(ctx context.Context, req *connect.Request[appv1.LookupRedirectFlowRequest]) (*connect.Response[appv1.LookupRedirectFlowResponse], error) {
	f, err := s.flowOf(ctx, nil, req.Msg.GetFlowId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.LookupRedirectFlowResponse{
		Subject: f.Subject().Proto(), Provider: f.Provider, Status: f.Status,
	}), nil
}

// CompleteRedirectFlow exchanges the code the callback received, once: the flow must be pending,
// the subject's, for the same provider and redirect_uri (and spec, when one is given); the
// exchange is recorded before it is made, so a replayed code is refused without reaching the
// provider.
func (s *Service) CompleteRedirectFlow(ctx context.Context, req *connect.Request[appv1.CompleteRedirectFlowRequest]) (*connect.Response[appv1.CompleteRedirectFlowResponse], error) {
	sub, err := subject(ctx, req.Msg.GetSubject())
	if err != nil {
		return nil, err
	}
	meta, err := s.complete(ctx, sub, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.CompleteRedirectFlowResponse{Credential: toProto(meta)}), nil
}

func (s *Service) complete(ctx context.Context, sub credentials.Subject, m *appv1.CompleteRedirectFlowRequest) (credentials.Meta, error) {
	f, err := s.flowOf(ctx, &sub, m.GetFlowId())
	if err != nil {
		return credentials.Meta{}, err
	}
	var v apierr.Violations
	if f.Kind != credentials.FlowRedirect {
		v.Add("flow_id", "is a device flow, which completes by itself")
	}
	if strings.TrimSpace(m.GetProvider()) != f.Provider {
		v.Addf("provider", "the flow is for %s", f.Provider)
	}
	if strings.TrimSpace(m.GetCode()) == "" {
		v.Add("code", "is required")
	}
	if strings.TrimSpace(m.GetRedirectUri()) != f.RedirectURI {
		v.Add("redirect_uri", "is not the redirect_uri the flow began with")
	}
	var spec appv1.RedirectOauthSpec
	if err := protojson.Unmarshal([]byte(f.Spec), &spec); err != nil {
		return credentials.Meta{}, fmt.Errorf("read the spec of flow %s: %w", f.ID, err)
	}
	if m.GetSpec() != nil && !proto.Equal(m.GetSpec(), &spec) {
		v.Add("spec", "is not the spec the flow began with")
	}
	if err := v.Err(); err != nil {
		return credentials.Meta{}, err
	}
	// The claim: from here the code is spent, whatever the exchange answers.
	f, err = s.d.Flows.Update(ctx, f.ID, func(f *credentials.Flow, now time.Time) (bool, error) {
		switch {
		case f.Ended():
			return false, apierr.FailedPrecondition("flow %s is %s: a code is exchanged once", f.ID, f.Status)
		case f.Exchanged:
			return false, apierr.FailedPrecondition("flow %s is exchanging its code already: a code is exchanged once", f.ID)
		case !now.Before(f.ExpiresAt):
			f.Status, f.ErrorCode = credentials.FlowExpired, "expired_token"
			return true, nil
		}
		f.Exchanged = true
		return true, nil
	})
	if err != nil {
		return credentials.Meta{}, err
	}
	if f.Status == credentials.FlowExpired {
		return credentials.Meta{}, apierr.FailedPrecondition("flow %s expired before its callback: begin another", f.ID)
	}
	p, _, err := s.redirectProvider(f.Provider, &spec)
	if err != nil {
		return credentials.Meta{}, s.fail(ctx, f.ID, "invalid_spec", err)
	}
	e, err := s.redirectEndpoints(&spec)
	if err != nil {
		return credentials.Meta{}, s.fail(ctx, f.ID, "endpoint_refused", err)
	}
	conf, err := s.config(ctx, sub, p, &spec, e, f.RedirectURI)
	if err != nil {
		return credentials.Meta{}, s.fail(ctx, f.ID, "client_unavailable", err)
	}
	var opts []oauth2.AuthCodeOption
	if spec.GetPkce() {
		verifier, err := s.d.Sealer.Open(f.Sealed, credentials.FlowOwner(f.ID))
		if err != nil {
			return credentials.Meta{}, fmt.Errorf("open the verifier of flow %s: %w", f.ID, err)
		}
		opts = append(opts, oauth2.VerifierOption(string(verifier)))
	}
	tok, err := conf.Exchange(s.withClient(ctx), strings.TrimSpace(m.GetCode()), opts...)
	if err != nil {
		code, _, safe := providerError("code exchange", err)
		s.d.Log.Warn("oauth redirect flow failed", "flow", f.ID, "provider", p.ID, "error_code", code)
		return credentials.Meta{}, s.fail(ctx, f.ID, code, apierr.FailedPrecondition("%s refused the code: %v", p.ID, safe))
	}
	if tok, err = grant(tok, spec.GetGrantPath()); err != nil {
		return credentials.Meta{}, s.fail(ctx, f.ID, "invalid_token_response", apierr.FailedPrecondition("%s: %v", p.ID, err))
	}
	meta, err := s.store(ctx, sub, p, spec.GetMetadata(), tok, spec.GetScopes())
	if err != nil {
		return credentials.Meta{}, s.fail(ctx, f.ID, "store_failed", err)
	}
	if _, err := s.d.Flows.End(ctx, f.ID, credentials.FlowCompleted, ""); err != nil {
		return credentials.Meta{}, err
	}
	s.d.Log.Info("oauth redirect flow completed", "flow", f.ID, "provider", p.ID, "subject", sub.String())
	return meta, nil
}

// fail ends flow id as failed with code and answers err.
func (s *Service) fail(ctx context.Context, id, code string, err error) error {
	if _, ferr := s.d.Flows.End(ctx, id, credentials.FlowFailed, code); ferr != nil {
		return errors.Join(err, ferr)
	}
	return err
}

// grant is the token at path (dotted) inside the token response, for providers that nest the
// grant (Slack's authed_user); "" is the response itself.
func grant(tok *oauth2.Token, path string) (*oauth2.Token, error) {
	if path == "" {
		return tok, nil
	}
	obj, ok := lookup(tok.Extra, path).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the token response has no object at grant_path %q", path)
	}
	access, _ := obj["access_token"].(string)
	if access == "" {
		return nil, fmt.Errorf("the object at grant_path %q has no access_token", path)
	}
	out := &oauth2.Token{AccessToken: access}
	out.TokenType, _ = obj["token_type"].(string)
	out.RefreshToken, _ = obj["refresh_token"].(string)
	if secs, ok := obj["expires_in"].(float64); ok && secs > 0 {
		out.Expiry = time.Now().Add(time.Duration(secs) * time.Second)
	}
	return out.WithExtra(obj), nil
}

// lookup is the value at a dotted path, through tok.Extra's first level and nested objects.
func lookup(extra func(string) any, path string) any {
	parts := strings.Split(path, ".")
	cur := extra(parts[0])
	for _, p := range parts[1:] {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = obj[p]
	}
	return cur
}

// store keeps tok as sub's credential for p in p's bundle format, with the account metadata md
// says how to read.
func (s *Service) store(ctx context.Context, sub credentials.Subject, p Provider, md *appv1.RedirectMetadataSpec, tok *oauth2.Token, scopes []string) (credentials.Meta, error) {
	if md == nil {
		md = p.spec().GetMetadata()
	}
	account := s.account(ctx, p, md, tok)
	return s.d.Store.Save(ctx, sub, p.ID, credentials.Grant{
		Bundle: credentials.EncodeBundle(p.Bundle, tok, scopes, s.d.Clock.Now()), ExpiresAt: tok.Expiry,
		Refreshable: tok.RefreshToken != "" && p.Bundle != credentials.BundleAccessToken, Account: account,
	}, 0, "token")
}

// maxProbeBytes bounds a probe's answer.
const maxProbeBytes = 1 << 20

// account reads account metadata: fields from the token response, then the probe's answer.
// Metadata is a convenience: a probe that fails leaves its fields empty and is logged.
func (s *Service) account(ctx context.Context, p Provider, md *appv1.RedirectMetadataSpec, tok *oauth2.Token) map[string]string {
	out := map[string]string{}
	fields := accountFields(&appv1.OAuthAccountMetadata{})
	put := func(field string, v any) {
		if _, ok := fields[field]; !ok {
			return
		}
		switch v := v.(type) {
		case string:
			if v != "" {
				out[field] = truncate(v)
			}
		case float64:
			out[field] = fmt.Sprint(v)
		}
	}
	for field, path := range md.GetFromTokenResponse() {
		put(field, lookup(tok.Extra, path))
	}
	pr := md.GetProbe()
	if pr == nil || pr.GetHost() == "" {
		return out
	}
	body, err := s.probe(ctx, pr, tok)
	if err != nil {
		s.d.Log.Warn("oauth account probe failed", "provider", p.ID, "err", err)
		return out
	}
	for field, path := range pr.GetMap() {
		put(field, lookup(func(k string) any { return body[k] }, path))
	}
	return out
}

func (s *Service) probe(ctx context.Context, pr *appv1.RedirectMetadataProbe, tok *oauth2.Token) (map[string]any, error) {
	scheme := "https"
	if s.d.LoopbackHTTP && egress.IsLoopbackHost(hostOnly(pr.GetHost())) {
		scheme = "http"
	}
	u, err := s.checkURL("spec.metadata.probe", scheme+"://"+pr.GetHost()+"/"+strings.TrimPrefix(pr.GetPath(), "/"))
	if err != nil {
		return nil, err
	}
	method := strings.ToUpper(cmpOr(pr.GetMethod(), http.MethodGet))
	if method != http.MethodGet && method != http.MethodPost {
		return nil, errors.New("probe method must be GET or POST")
	}
	ctx, cancel := context.WithTimeout(ctx, providerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), strings.NewReader(pr.GetBody()))
	if err != nil {
		return nil, fmt.Errorf("probe request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if pr.GetBody() != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	tok.SetAuthHeader(req)
	resp, err := s.client().Do(req)
	if err != nil {
		_, _, safe := providerError("probe", err)
		return nil, safe
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("probe %s answered %d", u.Redacted(), resp.StatusCode)
	}
	var body map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxProbeBytes)).Decode(&body); err != nil {
		return nil, fmt.Errorf("probe %s answered no JSON object", u.Redacted())
	}
	return body, nil
}

func hostOnly(hostport string) string {
	if u, err := url.Parse("//" + hostport); err == nil {
		return u.Hostname()
	}
	return hostport
}

// truncate bounds one account metadata value.
func truncate(v string) string {
	const max = 256
	if len(v) > max {
		return v[:max]
	}
	return v
}
