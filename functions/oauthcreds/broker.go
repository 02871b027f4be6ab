package oauthcreds

import (
	"context"
	"crypto/subtle"
	"errors"
	"strings"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/records/credentials"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// brokered is the session a broker token authenticates: it must be the session's, and the
// session live (the token dies with its sandbox). Every refusal is the same unauthenticated
// answer, so a caller learns nothing of which sessions exist.
func (s *Service) brokered(ctx context.Context, sessionID, token string) (*sessiondb.Broker, error) {
	refused := connect.NewError(connect.CodeUnauthenticated, errors.New("the session id and broker token do not match a live session"))
	sessionID, token = strings.TrimSpace(sessionID), strings.TrimSpace(token)
	if sessionID == "" || !strings.HasPrefix(token, credentials.BrokerPrefix) || s.d.Sessions == nil {
		return nil, refused
	}
	rec, err := s.d.Sessions.Get(ctx, sessionID)
	if errors.Is(err, sessiondb.ErrNotFound) {
		return nil, refused
	}
	if err != nil {
		return nil, err
	}
	if rec.Broker == nil || subtle.ConstantTimeCompare(rec.Broker.TokenHash, credentials.BrokerHash(token)) != 1 || !rec.Status.Live() {
		return nil, refused
	}
	return rec.Broker, nil
}

// FetchSessionCredential answers the current bundle of the session's credential and its version,
// for a harness that wants the newest (another session, or the refresh sweep, may have renewed
// it since the session started).
func (s *Service) FetchSessionCredential(ctx context.Context, req *connect.Request[appv1.FetchSessionCredentialRequest]) (*connect.Response[appv1.FetchSessionCredentialResponse], error) {
	b, err := s.brokered(ctx, req.Msg.GetSessionId(), req.Msg.GetBrokerToken())
	if err != nil {
		return nil, err
	}
	bundle, meta, err := s.d.Store.Bundle(ctx, credentials.Subject{Kind: b.SubjectKind, ID: b.SubjectID}, b.Provider)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.FetchSessionCredentialResponse{
		Provider: b.Provider, Version: meta.Version, OpaqueBundle: []byte(bundle),
	}), nil
}

// UpdateSessionCredential saves a bundle the session's agent refreshed, only over the version it
// was refreshed from (expected_version): a session that lost a race is aborted, told the current
// version, and fetches the winner's bundle rather than overwriting it. It answers the saved
// bundle and its version.
func (s *Service) UpdateSessionCredential(ctx context.Context, req *connect.Request[appv1.UpdateSessionCredentialRequest]) (*connect.Response[appv1.UpdateSessionCredentialResponse], error) {
	b, err := s.brokered(ctx, req.Msg.GetSessionId(), req.Msg.GetBrokerToken())
	if err != nil {
		return nil, err
	}
	if req.Msg.GetExpectedVersion() <= 0 {
		return nil, apierr.InvalidArgument("expected_version", "is required: the version the bundle was refreshed from")
	}
	sub := credentials.Subject{Kind: b.SubjectKind, ID: b.SubjectID}
	p, known := s.d.Providers[b.Provider]
	if !known {
		p = Provider{ID: b.Provider}
	}
	bundle := string(req.Msg.GetOpaqueBundle())
	tok := decodeBundle(p.Bundle, bundle)
	meta, err := s.d.Store.Save(ctx, sub, b.Provider, credentials.Grant{
		Bundle: bundle, ExpiresAt: tok.Expiry, Refreshable: known && tok.RefreshToken != "",
	}, req.Msg.GetExpectedVersion(), "opaque_bundle")
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.UpdateSessionCredentialResponse{
		Provider: b.Provider, Version: meta.Version, OpaqueBundle: []byte(bundle),
	}), nil
}
