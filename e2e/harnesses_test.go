package e2e

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/harnesses/oci"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

func TestHarnessCatalogRegistersListsAndDeletes(t *testing.T) {
	mods := testenv.RequirePlugins(t)
	s := newSessionsStack(t)
	ctx := context.Background()
	svc := appv1connect.NewHarnessCatalogServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))

	list, err := svc.ListHarnesses(ctx, connect.NewRequest(&emptypb.Empty{}))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range list.Msg.GetHarnesses() {
		if !h.GetBuiltIn() {
			t.Fatalf("%s listed as registered before any registration", h.GetName())
		}
		names = append(names, h.GetName())
	}
	if len(names) != 3 || names[0] != "bash" || names[1] != "claude-code" || names[2] != "codex" {
		t.Fatalf("built-in harnesses %v", names)
	}
	claude := list.Msg.GetHarnesses()[1].GetDescriptor_()
	if claude.GetAuth().GetOrgEnv() != "ANTHROPIC_API_KEY" || len(claude.GetModels()) == 0 || len(claude.GetRouterProtocols()) == 0 {
		t.Fatalf("claude-code describes itself as %v", claude)
	}

	reg := imagestest.Registry(t)
	ref := reg + "/plugins/shell:v1"
	if _, err := oci.Publish(ctx, mods["bash"].Wasm, ref); err != nil {
		t.Fatal(err)
	}
	got, err := svc.RegisterHarness(ctx, connect.NewRequest(&appv1.RegisterHarnessRequest{Name: "team-shell", OciRef: ref, Owner: "platform-team"}))
	if err != nil {
		t.Fatal(err)
	}
	if h := got.Msg.GetHarness(); h.GetName() != "team-shell" || h.GetBuiltIn() || h.GetDescriptor_().GetName() != "team-shell" {
		t.Fatalf("registered %v", h)
	}
	if _, err := svc.GetHarness(ctx, connect.NewRequest(&appv1.GetHarnessRequest{Name: "team-shell"})); err != nil {
		t.Fatal(err)
	}

	img, err := images.Busybox(nil)
	if err != nil {
		t.Fatal(err)
	}
	container := imagestest.Push(t, reg, "plugins/container", img)
	notPlugin := reg + "/plugins/empty:v1"
	if _, err := oci.Publish(ctx, []byte("\x00asm\x01\x00\x00\x00"), notPlugin); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, req, ref string
		code           connect.Code
	}{
		{"the same name from another artifact", "team-shell", notPlugin, connect.CodeAlreadyExists},
		{"a built-in's name", "bash", ref, connect.CodeAlreadyExists},
		{"a bad name", "Team Shell", ref, connect.CodeInvalidArgument},
		{"a container image", "container", container, connect.CodeInvalidArgument},
		{"a wasm module that is no plugin", "empty", notPlugin, connect.CodeInvalidArgument},
		{"nothing at the reference", "missing", reg + "/plugins/missing:v1", connect.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.RegisterHarness(ctx, connect.NewRequest(&appv1.RegisterHarnessRequest{Name: tc.req, OciRef: tc.ref}))
			testenv.WantCode(t, err, tc.code)
		})
	}

	// An admin registering a name again from its own artifact approves the harness's egress
	// (docs/harnesses.md): it answers the harness, as the first registration did.
	if again, err := svc.RegisterHarness(ctx, connect.NewRequest(&appv1.RegisterHarnessRequest{Name: "team-shell", OciRef: ref})); err != nil || again.Msg.GetHarness().GetName() != "team-shell" {
		t.Fatalf("the admin's registration again: %v, %v", again, err)
	}
	bobsCatalog := appv1connect.NewHarnessCatalogServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.mintKey(t, "bob@example.com", false)))
	_, err = bobsCatalog.RegisterHarness(ctx, connect.NewRequest(&appv1.RegisterHarnessRequest{Name: "team-shell", OciRef: ref}))
	testenv.WantCode(t, err, connect.CodeAlreadyExists)

	_, err = svc.GetHarness(ctx, connect.NewRequest(&appv1.GetHarnessRequest{Name: "nope"}))
	testenv.WantCode(t, err, connect.CodeNotFound)
	_, err = svc.DeleteHarness(ctx, connect.NewRequest(&appv1.DeleteHarnessRequest{Name: "bash"}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	_, err = bobsCatalog.DeleteHarness(ctx, connect.NewRequest(&appv1.DeleteHarnessRequest{Name: "team-shell"}))
	testenv.WantCode(t, err, connect.CodePermissionDenied)
	for _, want := range []bool{true, false} {
		del, err := svc.DeleteHarness(ctx, connect.NewRequest(&appv1.DeleteHarnessRequest{Name: "team-shell"}))
		if err != nil || del.Msg.GetDeleted() != want {
			t.Fatalf("delete: %v, %v; want deleted=%v", del, err, want)
		}
	}
}
