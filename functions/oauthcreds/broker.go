package oauthcreds

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/records/credentials"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// brokered is the session a broker token authenticates: it must be the session's, and the
// session live (the token dies with its sandbox). Every refusal is the same unauthenticated
// answer, so a caller learns nothing of which sessions exist; an id that cannot name a session
// document is invalid_argument, which says nothing of which sessions exist either.
func (s *Service) brokered(ctx context.Context, sessionID, token string) (*sessiondb.Record, error) {
	refused := connect.NewError(connect.CodeUnauthenticated, errors.New("the session id and broker token do not match a live session"))
	sessionID, token = strings.TrimSpace(sessionID), strings.TrimSpace(token)
	// The id is checked before it names a document: "a/b/c" would read a document of a
	// sub-collection, and "../x" or "__x__" are ids Firestore refuses with an internal error.
	if err := ids.Check("session_id", sessionID); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(token, credentials.BrokerPrefix) || s.d.Sessions == nil {
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
	return rec, nil
}

// FetchSessionCredential answers the current bundle of the session's credential and its version,
// for a harness that wants the newest (another session, or the refresh sweep, may have renewed
// it since the session started). A proxied session's sandbox gets its own placeholder bundle,
// whatever the version: the egress proxy injects the current token.
func (s *Service) FetchSessionCredential(ctx context.Context, req *connect.Request[appv1.FetchSessionCredentialRequest]) (*connect.Response[appv1.FetchSessionCredentialResponse], error) {
	rec, err := s.brokered(ctx, req.Msg.GetSessionId(), req.Msg.GetBrokerToken())
	if err != nil {
		return nil, err
	}
	b := rec.Broker
	bundle, meta, err := s.d.Store.Bundle(ctx, credentials.Subject{Kind: b.SubjectKind, ID: b.SubjectID}, b.Provider)
	if err != nil {
		return nil, err
	}
	if b.Proxied {
		sandboxed, err := s.d.Sealer.Open(rec.SealedCredential, sessiondb.CredentialOwner(rec.ID))
		if err != nil {
			return nil, fmt.Errorf("open the sandbox bundle of %s: %w", rec.ID, err)
		}
		bundle = string(sandboxed)
	}
	return connect.NewResponse(&appv1.FetchSessionCredentialResponse{
		Provider: b.Provider, Version: meta.Version, OpaqueBundle: []byte(bundle),
	}), nil
}

// UpdateSessionCredential saves a bundle the session's agent refreshed, only over the version it
// was refreshed from (expected_version): a session that lost a race is aborted, told the current
// version, and fetches the winner's bundle rather than overwriting it. It answers the saved
// bundle and its version.
//
// A proxied session cannot: its sandbox holds placeholders and no refresh token, so whatever
// it posts is not a credential; Hangar refreshes the credential itself (failed_precondition).
func (s *Service) UpdateSessionCredential(ctx context.Context, req *connect.Request[appv1.UpdateSessionCredentialRequest]) (*connect.Response[appv1.UpdateSessionCredentialResponse], error) {
	rec, err := s.brokered(ctx, req.Msg.GetSessionId(), req.Msg.GetBrokerToken())
	if err != nil {
		return nil, err
	}
	b := rec.Broker
	if b.Proxied {
		return nil, apierr.FailedPrecondition("session %s holds its %s credential as a placeholder the egress proxy swaps: Hangar refreshes the credential, and the sandbox cannot save one", rec.ID, b.Provider)
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
	tok := credentials.DecodeBundle(p.Bundle, bundle)
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
