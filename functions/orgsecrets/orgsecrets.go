// Package orgsecrets serves OrgSecretService over the organisation's secret store
// (records/secrets): admins put, list and delete the secrets model routers and
// profiles refer to by name, and set who besides admins may use each (its access policy, which
// records/secrets enforces). Values go in and never come out: every answer is metadata. The
// service is admin-only (auth.AdminServices), so the interceptor has refused everyone else
// before a method runs: only admins change a policy.
package orgsecrets

import (
	"context"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/opt"
	"github.com/hangar-dev/hangar/records/secrets"
)

// Service implements OrgSecretService.
type Service struct {
	store *secrets.Store
}

var _ appv1connect.OrgSecretServiceHandler = (*Service)(nil)

// New returns the service over store.
func New(store *secrets.Store) *Service { return &Service{store: store} }

// PutOrgSecret creates a secret or stores a new version of its value.
func (s *Service) PutOrgSecret(ctx context.Context, req *connect.Request[appv1.PutOrgSecretRequest]) (*connect.Response[appv1.PutOrgSecretResponse], error) {
	m := req.Msg
	caller, _ := auth.Caller(ctx)
	meta, created, err := s.store.Put(ctx, secrets.Put{
		Name: m.GetName(), Value: m.GetValue(), Description: m.Description, ExpectedVersion: m.ExpectedVersion,
		Access: accessFrom(m.GetAccess()), By: caller.UserID,
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.PutOrgSecretResponse{Secret: toProto(meta), Created: created}), nil
}

// ListOrgSecrets lists every secret's metadata, by name.
func (s *Service) ListOrgSecrets(ctx context.Context, _ *connect.Request[appv1.ListOrgSecretsRequest]) (*connect.Response[appv1.ListOrgSecretsResponse], error) {
	metas, err := s.store.List(ctx)
	if err != nil {
		return nil, err
	}
	out := &appv1.ListOrgSecretsResponse{Secrets: make([]*appv1.OrgSecret, len(metas))}
	for i, m := range metas {
		out.Secrets[i] = toProto(m)
	}
	return connect.NewResponse(out), nil
}

// DeleteOrgSecret deletes a secret and answers what it was.
func (s *Service) DeleteOrgSecret(ctx context.Context, req *connect.Request[appv1.DeleteOrgSecretRequest]) (*connect.Response[appv1.DeleteOrgSecretResponse], error) {
	meta, err := s.store.Delete(ctx, req.Msg.GetName(), req.Msg.ExpectedVersion)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.DeleteOrgSecretResponse{Secret: toProto(meta)}), nil
}

// SetOrgSecretAccess replaces a secret's access policy.
func (s *Service) SetOrgSecretAccess(ctx context.Context, req *connect.Request[appv1.SetOrgSecretAccessRequest]) (*connect.Response[appv1.SetOrgSecretAccessResponse], error) {
	access := accessFrom(req.Msg.GetAccess())
	if access == nil {
		return nil, apierr.InvalidArgument("access", "is required")
	}
	caller, _ := auth.Caller(ctx)
	meta, err := s.store.SetAccess(ctx, req.Msg.GetName(), *access, caller.UserID)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.SetOrgSecretAccessResponse{Secret: toProto(meta)}), nil
}

// visibilities maps the API's visibilities to the store's; UNSPECIFIED is the store's default.
var visibilities = map[appv1.OrgSecretVisibility]secrets.Visibility{
	appv1.OrgSecretVisibility_ORG_SECRET_VISIBILITY_UNSPECIFIED: "",
	appv1.OrgSecretVisibility_ORG_SECRET_VISIBILITY_ADMINS_ONLY: secrets.AdminsOnly,
	appv1.OrgSecretVisibility_ORG_SECRET_VISIBILITY_ALL_USERS:   secrets.AllUsers,
	appv1.OrgSecretVisibility_ORG_SECRET_VISIBILITY_SELECTED:    secrets.Selected,
}

// accessFrom is the store's policy for a, nil for none; an unknown enum number passes through
// as a visibility the store refuses by name.
func accessFrom(a *appv1.OrgSecretAccess) *secrets.Access {
	if a == nil {
		return nil
	}
	v, ok := visibilities[a.GetVisibility()]
	if !ok {
		v = secrets.Visibility(a.GetVisibility().String())
	}
	return &secrets.Access{Visibility: v, UserIDs: a.GetUserIds(), ServiceKeyIDs: a.GetServiceKeyIds(), ProfileIDs: a.GetProfileIds()}
}

func accessProto(a secrets.Access) *appv1.OrgSecretAccess {
	out := &appv1.OrgSecretAccess{Visibility: appv1.OrgSecretVisibility_ORG_SECRET_VISIBILITY_ADMINS_ONLY, UserIds: a.UserIDs, ServiceKeyIds: a.ServiceKeyIDs, ProfileIds: a.ProfileIDs}
	for pv, sv := range visibilities {
		if sv == a.Visibility && sv != "" {
			out.Visibility = pv
		}
	}
	return out
}

func toProto(m secrets.Meta) *appv1.OrgSecret {
	return &appv1.OrgSecret{
		Name: m.Name, Description: m.Description, Version: m.Version,
		CreatedAt: clock.Format(m.CreatedAt), UpdatedAt: clock.Format(m.UpdatedAt),
		CreatedByUserId: opt.String(m.CreatedBy), UpdatedByUserId: opt.String(m.UpdatedBy),
		Access: accessProto(m.Access),
	}
}
