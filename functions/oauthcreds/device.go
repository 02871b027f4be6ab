package oauthcreds

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/oauth2"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/records/credentials"
)

// deviceGrant is RFC 8628's grant type (3.4).
const deviceGrant = "urn:ietf:params:oauth:grant-type:device_code"

// provider is the registry's provider called name, for a request naming it in field.
func (s *Service) provider(name string) (Provider, error) {
	name = strings.TrimSpace(name)
	p, ok := s.d.Providers[name]
	if !ok {
		return Provider{}, apierr.InvalidArgument("provider", fmt.Sprintf("%q is not a provider this deployment signs in to (HANGAR_OAUTH_PROVIDERS adds one)", name))
	}
	return p, nil
}

// BeginFlow starts an RFC 8628 device flow: it asks the provider for a device and user code and
// answers the verification URL and user code for the user to enter; Sweep (and GetFlow) poll
// the token endpoint until the user approves, declines or the code expires.
func (s *Service) BeginFlow(ctx context.Context, req *connect.Request[appv1.BeginFlowRequest]) (*connect.Response[appv1.BeginFlowResponse], error) {
	sub, err := subject(ctx, req.Msg.GetSubject())
	if err != nil {
		return nil, err
	}
	p, err := s.provider(req.Msg.GetProvider())
	if err != nil {
		return nil, err
	}
	if p.DeviceAuthorizationURL == "" {
		return nil, apierr.FailedPrecondition("provider %s has no device flow: use BeginRedirectFlow", p.ID)
	}
	e, err := s.deviceEndpoints(p)
	if err != nil {
		return nil, err
	}
	conf, err := s.config(ctx, sub, p, nil, e, "")
	if err != nil {
		return nil, err
	}
	conf.Scopes = p.Scopes
	da, err := conf.DeviceAuth(s.withClient(ctx))
	if err != nil {
		code, _, safe := providerError("device authorization", err)
		s.d.Log.Warn("oauth device authorization failed", "provider", p.ID, "error_code", code)
		return nil, apierr.FailedPrecondition("%s refused to start a device flow: %v", p.ID, safe)
	}
	if da.DeviceCode == "" || da.UserCode == "" || da.VerificationURI == "" {
		return nil, apierr.FailedPrecondition("%s answered the device authorization without device_code, user_code or verification_uri", p.ID)
	}
	verify, err := s.checkURL("verification_uri", da.VerificationURI)
	if err != nil {
		return nil, apierr.FailedPrecondition("%s answered a verification_uri Hangar will not show: %v", p.ID, err)
	}
	now := s.d.Clock.Now()
	interval := da.Interval
	if interval <= 0 {
		interval = defaultInterval
	}
	expires := da.Expiry
	if expires.IsZero() {
		expires = now.Add(15 * time.Minute)
	}
	f := &credentials.Flow{
		ID: credentials.NewFlowID(), Kind: credentials.FlowDevice, SubjectKind: sub.Kind, SubjectID: sub.ID, Provider: p.ID,
		ExpiresAt: expires.UTC(), Interval: interval, StartedBy: starter(ctx),
	}
	if f.Sealed, err = s.d.Sealer.Seal([]byte(da.DeviceCode), credentials.FlowOwner(f.ID)); err != nil {
		return nil, err
	}
	pollAt := now.Add(time.Duration(interval) * time.Second)
	f.PollAt = &pollAt
	if err := s.createFlow(ctx, f); err != nil {
		return nil, err
	}
	s.d.Log.Info("oauth device flow began", "flow", f.ID, "provider", p.ID, "subject", sub.String())
	return connect.NewResponse(&appv1.BeginFlowResponse{
		Flow: flowProto(f), VerificationUrl: verify.String(), UserCode: da.UserCode,
	}), nil
}

// starter is the caller beginning a flow.
func starter(ctx context.Context) credentials.Starter {
	caller, _ := auth.Caller(ctx)
	return credentials.Starter{UserID: caller.UserID, KeyID: caller.KeyID, Admin: caller.Admin}
}

// createFlow stores a new flow; a subject at maxPendingFlows is resource_exhausted.
func (s *Service) createFlow(ctx context.Context, f *credentials.Flow) error {
	err := s.d.Flows.Create(ctx, f, maxPendingFlows)
	if errors.Is(err, credentials.ErrTooManyFlows) {
		return apierr.ResourceExhausted("%s has %d sign-in flows pending: finish or cancel one (CancelFlow), or wait for one to expire", f.Subject(), maxPendingFlows)
	}
	return err
}

func (s *Service) deviceEndpoints(p Provider) (endpoints, error) {
	d, err := s.checkURL("device_authorization_url", p.DeviceAuthorizationURL)
	if err != nil {
		return endpoints{}, err
	}
	t, err := s.checkURL("token_url", p.TokenURL)
	if err != nil {
		return endpoints{}, err
	}
	return endpoints{deviceAuth: d.String(), token: t.String()}, nil
}

// GetFlow answers a flow of the subject's; a pending device flow whose poll is due is polled
// first.
func (s *Service) GetFlow(ctx context.Context, req *connect.Request[appv1.GetFlowRequest]) (*connect.Response[appv1.GetFlowResponse], error) {
	f, err := s.ownFlow(ctx, req.Msg.GetSubject(), req.Msg.GetFlowId())
	if err != nil {
		return nil, err
	}
	if f.Kind == credentials.FlowDevice && !f.Ended() && f.PollAt != nil && !f.PollAt.After(s.d.Clock.Now()) {
		polled, err := s.pollDevice(ctx, f.ID)
		if err != nil {
			s.d.Log.Warn("oauth device poll", "flow", f.ID, "err", err)
		} else if polled != nil {
			f = polled
		}
	}
	if !f.Ended() && !s.d.Clock.Now().Before(f.ExpiresAt) {
		if f, err = s.d.Flows.End(ctx, f.ID, credentials.FlowExpired, "expired_token"); err != nil {
			return nil, err
		}
	}
	return connect.NewResponse(&appv1.GetFlowResponse{Flow: flowProto(f)}), nil
}

// CancelFlow ends a pending flow as cancelled; a flow that ended already is answered as it is.
func (s *Service) CancelFlow(ctx context.Context, req *connect.Request[appv1.CancelFlowRequest]) (*connect.Response[appv1.CancelFlowResponse], error) {
	f, err := s.ownFlow(ctx, req.Msg.GetSubject(), req.Msg.GetFlowId())
	if err != nil {
		return nil, err
	}
	if f, err = s.d.Flows.End(ctx, f.ID, credentials.FlowCancelled, "cancelled"); err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.CancelFlowResponse{Flow: flowProto(f)}), nil
}

// ownFlow reads the flow id when it is the subject's and the caller may act on that subject;
// any other flow is not_found, as an unknown one is.
func (s *Service) ownFlow(ctx context.Context, ps *appv1.OAuthSubject, id string) (*credentials.Flow, error) {
	sub, err := subject(ctx, ps)
	if err != nil {
		return nil, err
	}
	return s.flowOf(ctx, &sub, id)
}

// flowOf reads flow id for the caller: when sub is not nil the flow must be sub's, and the caller
// must be allowed the flow's subject.
func (s *Service) flowOf(ctx context.Context, sub *credentials.Subject, id string) (*credentials.Flow, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return nil, apierr.InvalidArgument("flow_id", "is required")
	}
	f, err := s.d.Flows.Get(ctx, id)
	if errors.Is(err, credentials.ErrFlowNotFound) {
		return nil, apierr.NotFound("OAuth flow", id)
	}
	if err != nil {
		return nil, err
	}
	caller, _ := auth.Caller(ctx)
	if (sub != nil && *sub != f.Subject()) || credentials.Authorize(caller, f.Subject()) != nil {
		return nil, apierr.NotFound("OAuth flow", id)
	}
	return f, nil
}

// pollDevice makes one token request for a device flow whose poll is due, claiming it first by
// moving poll_at an interval ahead (so no other poller takes it meanwhile), and moves the flow
// as the provider answers (RFC 8628 3.5): a token completes it, authorization_pending leaves it,
// slow_down adds 5 s to its interval, access_denied denies it, expired_token expires it, any
// other error fails it. A provider that cannot be reached leaves it for the next poll. It
// answers nil when the flow was not due (another poller has it).
func (s *Service) pollDevice(ctx context.Context, id string) (*credentials.Flow, error) {
	claimed := false
	f, err := s.d.Flows.Update(ctx, id, func(f *credentials.Flow, now time.Time) (bool, error) {
		claimed = false
		if f.Ended() || f.Kind != credentials.FlowDevice || f.PollAt == nil || f.PollAt.After(now) {
			return false, nil
		}
		if !now.Before(f.ExpiresAt) {
			f.Status, f.ErrorCode = credentials.FlowExpired, "expired_token"
			return true, nil
		}
		next := now.Add(time.Duration(f.Interval) * time.Second)
		f.PollAt, claimed = &next, true
		return true, nil
	})
	if err != nil || !claimed {
		if err == nil && f.Ended() {
			return f, nil
		}
		return nil, err
	}
	p, ok := s.d.Providers[f.Provider]
	if !ok {
		return s.d.Flows.End(ctx, id, credentials.FlowFailed, "unknown_provider")
	}
	e, err := s.deviceEndpoints(p)
	if err != nil {
		return s.d.Flows.End(ctx, id, credentials.FlowFailed, "endpoint_refused")
	}
	// The client's secrets are used as the flow's starter, whoever polls.
	by := f.StartedBy
	conf, err := s.config(auth.WithPrincipal(ctx, auth.Principal{UserID: by.UserID, KeyID: by.KeyID, Admin: by.Admin}), f.Subject(), p, nil, e, "")
	if err != nil {
		s.d.Log.Warn("oauth device poll: no client", "flow", id, "provider", p.ID, "err", err)
		return s.d.Flows.End(ctx, id, credentials.FlowFailed, "client_unavailable")
	}
	deviceCode, err := s.d.Sealer.Open(f.Sealed, credentials.FlowOwner(id))
	if err != nil {
		return nil, fmt.Errorf("open the device code of flow %s: %w", id, err)
	}
	// Exchange is the token request; RFC 6749 3.2 has the empty code it also sends treated as
	// omitted.
	tok, err := conf.Exchange(s.withClient(ctx), "",
		oauth2.SetAuthURLParam("grant_type", deviceGrant), oauth2.SetAuthURLParam("device_code", string(deviceCode)))
	if err != nil {
		code, transient, safe := providerError("device token request", err)
		switch {
		case transient:
			s.d.Log.Warn("oauth device poll: provider unreachable; polled again later", "flow", id, "provider", p.ID, "err", safe)
			return f, nil
		case code == "authorization_pending":
			return f, nil
		case code == "slow_down":
			return s.d.Flows.Update(ctx, id, func(f *credentials.Flow, now time.Time) (bool, error) {
				if f.Ended() {
					return false, nil
				}
				f.Interval += 5
				next := now.Add(time.Duration(f.Interval) * time.Second)
				f.PollAt = &next
				return true, nil
			})
		case code == "access_denied":
			return s.d.Flows.End(ctx, id, credentials.FlowDenied, code)
		case code == "expired_token":
			return s.d.Flows.End(ctx, id, credentials.FlowExpired, code)
		}
		s.d.Log.Warn("oauth device flow failed", "flow", id, "provider", p.ID, "error_code", code)
		return s.d.Flows.End(ctx, id, credentials.FlowFailed, code)
	}
	if _, err := s.store(ctx, f.Subject(), p, nil, tok, p.Scopes); err != nil {
		s.d.Log.Warn("oauth device flow: storing the credential failed", "flow", id, "provider", p.ID, "err", err)
		return s.d.Flows.End(ctx, id, credentials.FlowFailed, "store_failed")
	}
	s.d.Log.Info("oauth device flow completed", "flow", id, "provider", p.ID, "subject", f.Subject().String())
	return s.d.Flows.End(ctx, id, credentials.FlowCompleted, "")
}

func flowProto(f *credentials.Flow) *appv1.OAuthFlow {
	out := &appv1.OAuthFlow{
		Id: f.ID, Provider: f.Provider, Status: f.Status,
		ExpiresAt: clock.Format(f.ExpiresAt), UpdatedAt: clock.Format(f.UpdatedAt),
	}
	if f.ErrorCode != "" {
		out.ErrorCode = &f.ErrorCode
	}
	return out
}
