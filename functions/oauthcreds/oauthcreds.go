// Package oauthcreds serves OAuthCredentialService: credentials per subject and provider
// (records/credentials), signed in by RFC 8628 device flows and authorization code redirect
// flows (PKCE, RFC 7636) against the providers of a Registry, refreshed before they expire, and
// brokered to the sessions created with them.
//
// Who may act on a subject is credentials.Authorize: a user on their own credentials (a USER
// subject with an empty id means the caller), admins on anyone's and on the organisation's
// connectors and MCP servers. A flow is its subject's: another caller is told not_found.
//
// The durable half is Sweep: it polls the device flows whose poll_at has come and refreshes the
// credentials whose refresh_at has, each claimed by moving that time a lease ahead in a
// transaction, so an instance that dies mid-poll leaves the work due again and two sweeps never
// do it twice. The automation worker's tick runs it (every minute in production, every second in
// `hangar dev`); GetFlow polls a due device flow itself, so a user waiting on GetFlow does not
// wait for a tick.
//
// Nothing this package answers, logs or stores in the clear holds a token, a client secret, a
// device code or a PKCE verifier: the provider's error answers are reduced to their OAuth error
// code before they reach a log or a caller.
package oauthcreds

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/records/credentials"
	"github.com/hangar-dev/hangar/records/secrets"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// Deps are what the service runs on.
type Deps struct {
	Store    *credentials.Store
	Flows    *credentials.Flows
	Secrets  *secrets.Store
	Sessions *sessiondb.Store
	// Sealer seals device codes and PKCE verifiers in flow records.
	Sealer    *seal.Sealer
	Providers Registry
	// Egress is what provider endpoints may resolve to beyond public addresses.
	Egress egress.Policy
	// LoopbackHTTP lets provider URLs use http on loopback addresses: only tests' loopback
	// providers set it; deployments take https only.
	LoopbackHTTP bool
	Clock        clock.Clock
	Log          *slog.Logger
}

// Timing of the durable work.
const (
	// pollLease is how long a claimed device poll or refresh holds its item before another
	// sweep may take it again; it also spaces retries after a provider error.
	pollLease = time.Minute
	// redirectFlowTTL is how long a redirect flow waits for its callback.
	redirectFlowTTL = 10 * time.Minute
	// defaultInterval is RFC 8628's polling interval when the provider names none (3.2).
	defaultInterval = 5
	// sweepBatch bounds the items one sweep takes of each kind.
	sweepBatch = 50
	// maxPendingFlows bounds a subject's pending (unexpired) flows.
	maxPendingFlows = 10
)

// Service implements OAuthCredentialService.
type Service struct {
	appv1connect.UnimplementedOAuthCredentialServiceHandler
	d Deps
}

// New returns the service over d.
func New(d Deps) *Service {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Service{d: d}
}

// PutCredential stores a credential bundle for a subject and provider, connecting it.
func (s *Service) PutCredential(ctx context.Context, req *connect.Request[appv1.PutCredentialRequest]) (*connect.Response[appv1.PutCredentialResponse], error) {
	sub, err := subject(ctx, req.Msg.GetSubject())
	if err != nil {
		return nil, err
	}
	meta, err := s.d.Store.Put(ctx, sub, strings.TrimSpace(req.Msg.GetProvider()), req.Msg.GetSecret())
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
	metas, err := s.d.Store.List(ctx, sub)
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
	meta, err := s.d.Store.Disconnect(ctx, sub, strings.TrimSpace(req.Msg.GetProvider()), req.Msg.GetExpectedVersion())
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

// secretSubject is who uses a provider's client id and secret references, for the org secret
// store's access policy: the caller (a device flow's poll acts as the flow's starter), or, in a
// refresh, the credential's user (the organisation's connectors and MCP servers are admins').
func secretSubject(ctx context.Context, sub credentials.Subject) secrets.Subject {
	if caller, ok := auth.Caller(ctx); ok {
		return secrets.SubjectOf(caller, "")
	}
	if sub.Kind == credentials.KindUser {
		return secrets.Subject{UserID: sub.ID}
	}
	return secrets.Subject{Admin: true}
}

func toProto(m credentials.Meta) *appv1.OAuthCredentialMeta {
	acct := &appv1.OAuthAccountMetadata{}
	for field, dst := range accountFields(acct) {
		if v, ok := m.Account[field]; ok && v != "" {
			*dst = &v
		}
	}
	out := &appv1.OAuthCredentialMeta{
		Provider: m.Provider, Version: m.Version, Connected: m.Connected(), Account: acct,
		CreatedAt: clock.Format(m.CreatedAt), UpdatedAt: clock.Format(m.UpdatedAt),
		Status: m.Status, SubjectId: m.SubjectID,
	}
	if m.ExpiresAt != nil {
		out.ExpiresAt = clock.Format(*m.ExpiresAt)
	}
	return out
}

// accountFields are the account metadata fields by their names in metadata maps.
func accountFields(a *appv1.OAuthAccountMetadata) map[string]**string {
	return map[string]**string{
		"display_name": &a.DisplayName, "plan_type": &a.PlanType,
		"workspace_id": &a.WorkspaceId, "workspace_name": &a.WorkspaceName,
	}
}
