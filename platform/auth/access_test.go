package auth_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/auth"
)

// The protos' access options, as read from the generated descriptors, are exactly the
// admin-only services and the self-authenticating broker methods: a service or method that
// loses or gains its option shows here, as a change of who may call it.
func TestAccessDeclaredInTheProtosIsReadFromTheDescriptors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want map[string]bool
	}{
		{"admin-only services", auth.AdminServices, map[string]bool{
			appv1connect.ApiKeyServiceName:    true,
			appv1connect.OrgSecretServiceName: true,
			appv1connect.FleetServiceName:     true,
		}},
		{"methods that authenticate themselves", auth.SelfAuthenticated, map[string]bool{
			appv1connect.OAuthCredentialServiceFetchSessionCredentialProcedure:  true,
			appv1connect.OAuthCredentialServiceUpdateSessionCredentialProcedure: true,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !maps.Equal(tc.got, tc.want) {
				t.Errorf("read %v, want %v", slices.Sorted(maps.Keys(tc.got)), slices.Sorted(maps.Keys(tc.want)))
			}
		})
	}
}
