// Package oauthcreds serves OAuthCredentialService's credential methods over the credential
// store (records/credentials): PutCredential, ListCredentials and Disconnect. The
// sign-in flows (device code and redirect) and the session broker (FetchSessionCredential,
// UpdateSessionCredential) are later work and answer unimplemented.
//
// Who may act on a subject is credentials.Authorize: a user on their own credentials (a USER
// subject with an empty id means the caller), admins on anyone's and on the organisation's
// connectors and MCP servers.
package oauthcreds

import (
	"context"
	"strings"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/records/credentials"
)

// Service implements OAuthCredentialService.
type Service struct {
	appv1connect.UnimplementedOAuthCredentialServiceHandler
	store *credentials.Store
}

// New returns the service over store.
func New(store *credentials.Store) *Service { return &Service{store: store} }

// PutCredential stores a credential bundle for a subject and provider, connecting it.
func (s *Service) PutCredential(ctx context.Context, req *connect.Request[appv1.PutCredentialRequest]) (*connect.Response[appv1.PutCredentialResponse], error) {
	sub, err := subject(ctx, req.Msg.GetSubject())
	if err != nil {
		return nil, err
	}
	meta, err := s.store.Put(ctx, sub, strings.TrimSpace(req.Msg.GetProvider()), req.Msg.GetSecret())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.PutCredentialResponse{Credential: toProto(meta)}), nil
}

// ListCredentials lists a subject's credentials, connected or not, by provider.
func (s *Service) ListCredentials(ctx context.Context, req *connect.Request[appv1.ListCredentialsRequest]) (*connect.Response[appv1.ListCredentialsResponse], error) {
	sub, err := subject(ctx, req.Msg.GetSubject())
	if err != nil {
		return nil, err
	}
	metas, err := s.store.List(ctx, sub)
	if err != nil {
		return nil, err
	}
	out := &appv1.ListCredentialsResponse{Credentials: make([]*appv1.OAuthCredentialMeta, len(metas))}
	for i, m := range metas {
		out.Credentials[i] = toProto(m)
	}
	return connect.NewResponse(out), nil
}

// Disconnect drops a credential's bundle; expected_version, when not 0, must be its version.
func (s *Service) Disconnect(ctx context.Context, req *connect.Request[appv1.DisconnectRequest]) (*connect.Response[appv1.DisconnectResponse], error) {
	sub, err := subject(ctx, req.Msg.GetSubject())
	if err != nil {
		return nil, err
	}
	meta, err := s.store.Disconnect(ctx, sub, strings.TrimSpace(req.Msg.GetProvider()), req.Msg.GetExpectedVersion())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.DisconnectResponse{Credential: toProto(meta)}), nil
}

// subject is the request's subject, when the caller may act on it.
func subject(ctx context.Context, p *appv1.OAuthSubject) (credentials.Subject, error) {
	caller, _ := auth.Caller(ctx)
	return credentials.SubjectOf(caller, p)
}

func toProto(m credentials.Meta) *appv1.OAuthCredentialMeta {
	return &appv1.OAuthCredentialMeta{
		Provider: m.Provider, Version: m.Version, Connected: m.Connected(), Account: &appv1.OAuthAccountMetadata{},
		CreatedAt: clock.Format(m.CreatedAt), UpdatedAt: clock.Format(m.UpdatedAt),
		Status: m.Status, SubjectId: m.SubjectID,
	}
}
