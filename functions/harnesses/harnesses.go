// Package harnesses is HarnessCatalogService: the harnesses a deployment offers — its built-in
// plugins and those registered from OCI artifacts — with what each describes of itself.
package harnesses

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/harnesses/harnesscatalog"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/ids"
)

// Service implements HarnessCatalogService.
type Service struct {
	catalog *harnesscatalog.Catalog
}

var _ appv1connect.HarnessCatalogServiceHandler = (*Service)(nil)

// New returns the service over c.
func New(c *harnesscatalog.Catalog) *Service { return &Service{catalog: c} }

// RegisterHarness fetches a plugin from a registry, checks it by loading it and asking it to
// describe itself under the plugin limits, and adds it to the harnesscatalog. Any authenticated user may
// register; owner defaults to the caller.
//
// A harness's egress (the hosts its descriptor opens in a session's network) is the admins' to
// vouch for: an admin's registration approves it; a non-admin's harness that declares egress is
// registered with its egress pending, which opens only in the registrant's own sessions and in
// tasks on profiles they own (harnesscatalog.Entry.EgressAppliesFor) until an admin approves it
// by registering it again under the same name from the same oci_ref.
func (s *Service) RegisterHarness(ctx context.Context, req *connect.Request[appv1.RegisterHarnessRequest]) (*connect.Response[appv1.RegisterHarnessResponse], error) {
	m := req.Msg
	caller, _ := auth.Caller(ctx)
	name, ref := strings.TrimSpace(m.GetName()), strings.TrimSpace(m.GetOciRef())
	owner := strings.TrimSpace(m.GetOwner())
	if owner == "" {
		owner = caller.UserID
	}
	var e *harnesscatalog.Entry
	var err error
	switch cur, getErr := s.catalog.Get(ctx, name); {
	case caller.Admin && getErr == nil && !cur.BuiltIn:
		e, err = s.catalog.Approve(ctx, name, ref, caller.UserID)
		if errors.Is(err, harnesscatalog.ErrExists) {
			return nil, apierr.AlreadyExists("%v: an admin approves a registered harness's egress by registering it again from that oci_ref", err)
		}
	case caller.Admin:
		e, err = s.catalog.Register(ctx, name, ref, owner, caller.UserID, caller.UserID)
	default:
		e, err = s.catalog.Register(ctx, name, ref, owner, caller.UserID, "")
	}
	if err != nil {
		return nil, catalogErr(err, name)
	}
	h, err := summary(e)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.RegisterHarnessResponse{Harness: h}), nil
}

// ListHarnesses lists built-in harnesses, then registered ones, each by name.
func (s *Service) ListHarnesses(ctx context.Context, _ *connect.Request[emptypb.Empty]) (*connect.Response[appv1.ListHarnessesResponse], error) {
	entries, err := s.catalog.List(ctx)
	if err != nil {
		return nil, err
	}
	out := &appv1.ListHarnessesResponse{Harnesses: make([]*appv1.HarnessSummary, 0, len(entries))}
	for i := range entries {
		h, err := summary(&entries[i])
		if err != nil {
			return nil, err
		}
		out.Harnesses = append(out.Harnesses, h)
	}
	return connect.NewResponse(out), nil
}

// GetHarness returns one harness.
func (s *Service) GetHarness(ctx context.Context, req *connect.Request[appv1.GetHarnessRequest]) (*connect.Response[appv1.GetHarnessResponse], error) {
	if err := ids.Check("name", req.Msg.GetName()); err != nil {
		return nil, err
	}
	e, err := s.catalog.Get(ctx, req.Msg.GetName())
	if err != nil {
		return nil, catalogErr(err, req.Msg.GetName())
	}
	h, err := summary(e)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.GetHarnessResponse{Harness: h}), nil
}

// DeleteHarness removes a registered harness; built-ins refuse. Deleting one that is not there
// answers deleted: false.
func (s *Service) DeleteHarness(ctx context.Context, req *connect.Request[appv1.DeleteHarnessRequest]) (*connect.Response[appv1.DeleteHarnessResponse], error) {
	name := req.Msg.GetName()
	if err := ids.Check("name", name); err != nil {
		return nil, err
	}
	e, err := s.catalog.Get(ctx, name)
	if errors.Is(err, harnesscatalog.ErrNotFound) {
		return connect.NewResponse(&appv1.DeleteHarnessResponse{}), nil
	}
	if err != nil {
		return nil, catalogErr(err, name)
	}
	caller, _ := auth.Caller(ctx)
	if !e.BuiltIn && !caller.Admin && caller.UserID != e.CreatedBy {
		return nil, apierr.PermissionDenied("only who registered harness %s or an admin may delete it", name)
	}
	deleted, err := s.catalog.Delete(ctx, name)
	if err != nil {
		return nil, catalogErr(err, name)
	}
	return connect.NewResponse(&appv1.DeleteHarnessResponse{Deleted: deleted}), nil
}

// catalogErr maps the catalog's errors to the API's.
func catalogErr(err error, name string) error {
	switch {
	case errors.Is(err, harnesscatalog.ErrNotFound):
		return apierr.NotFound("harness", name)
	case errors.Is(err, harnesscatalog.ErrExists):
		return apierr.AlreadyExists("%v", err)
	case errors.Is(err, harnesscatalog.ErrBuiltIn), errors.Is(err, harnesscatalog.ErrChanged):
		return apierr.FailedPrecondition("%v", err)
	}
	var inv *harnesscatalog.InvalidError
	if errors.As(err, &inv) {
		return apierr.InvalidArgument(inv.Field, inv.Reason)
	}
	return err
}

// summary is an entry as the API shows it. The plugin's descriptor is read as the API message
// itself, whose JSON names it shares.
func summary(e *harnesscatalog.Entry) (*appv1.HarnessSummary, error) {
	js, err := json.Marshal(e.Descriptor)
	if err != nil {
		return nil, err
	}
	d := &appv1.HarnessDescriptor{}
	if err := protojson.Unmarshal(js, d); err != nil {
		return nil, err
	}
	return &appv1.HarnessSummary{Name: e.Name, Descriptor_: d, BuiltIn: e.BuiltIn}, nil
}
