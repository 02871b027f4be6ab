package imagesvc

import (
	"context"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/opt"
	"github.com/hangar-dev/hangar/records/registries"
)

// AddRegistry configures how pulls sign in to a registry host (admins only). The answer, like
// every answer about registries, carries no password.
func (s *Service) AddRegistry(ctx context.Context, req *connect.Request[appv1.AddRegistryRequest]) (*connect.Response[appv1.AddRegistryResponse], error) {
	caller, err := admin(ctx, "adding a registry")
	if err != nil {
		return nil, err
	}
	m := req.Msg
	add := registries.Add{Host: m.GetHost(), By: caller.UserID}
	switch a := m.GetAuth().(type) {
	case *appv1.AddRegistryRequest_Static:
		add.Kind, add.Principal, add.Password = registries.Static, a.Static.GetUsername(), a.Static.GetPassword()
	case *appv1.AddRegistryRequest_Anonymous:
		add.Kind = registries.Anonymous
	case *appv1.AddRegistryRequest_WorkloadIdentity:
		add.Kind, add.Principal = registries.WorkloadIdentity, a.WorkloadIdentity.GetImpersonateSa()
	case *appv1.AddRegistryRequest_CloudRegistry:
		add.Kind, add.Principal = registries.CloudRegistry, a.CloudRegistry.GetAssumeRoleArn()
	}
	sum, err := s.registries.Add(ctx, add)
	if err != nil {
		return nil, err
	}
	s.log.Info("registry added", "host", sum.Host, "kind", sum.Kind, "principal", sum.Principal, "by", caller.UserID)
	return connect.NewResponse(&appv1.AddRegistryResponse{
		Id: sum.ID, Host: sum.Host, AuthKind: string(sum.Kind), AuthPrincipal: opt.String(sum.Principal),
	}), nil
}

// ListRegistries lists every configured registry, by host, to any signed-in caller: whoever
// may enable an image may see which registries Hangar can pull from, and a summary holds no
// secret.
func (s *Service) ListRegistries(ctx context.Context, _ *connect.Request[appv1.ListRegistriesRequest]) (*connect.Response[appv1.ListRegistriesResponse], error) {
	sums, err := s.registries.List(ctx)
	if err != nil {
		return nil, err
	}
	out := &appv1.ListRegistriesResponse{Registries: make([]*appv1.RegistryCredentialSummary, len(sums))}
	for i, r := range sums {
		out.Registries[i] = &appv1.RegistryCredentialSummary{
			Id: r.ID, RegistryHost: r.Host, AuthKind: string(r.Kind), AuthPrincipal: opt.String(r.Principal),
			CreatedAt: clock.Format(r.CreatedAt),
		}
	}
	return connect.NewResponse(out), nil
}

// DeleteRegistry removes a registry's credentials (admins only); later pulls from its host go
// without credentials.
func (s *Service) DeleteRegistry(ctx context.Context, req *connect.Request[appv1.DeleteRegistryRequest]) (*connect.Response[emptypb.Empty], error) {
	caller, err := admin(ctx, "deleting a registry")
	if err != nil {
		return nil, err
	}
	sum, err := s.registries.Delete(ctx, req.Msg.GetHost())
	if err != nil {
		return nil, err
	}
	s.log.Info("registry deleted", "host", sum.Host, "kind", sum.Kind, "by", caller.UserID)
	return connect.NewResponse(&emptypb.Empty{}), nil
}

// admin returns the caller when they are an admin, else permission_denied saying what for.
func admin(ctx context.Context, what string) (auth.Principal, error) {
	caller, _ := auth.Caller(ctx)
	if !caller.Admin {
		return auth.Principal{}, apierr.PermissionDenied("%s is for admins only", what)
	}
	return caller, nil
}
