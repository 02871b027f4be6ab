package auth

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	optionsv1 "github.com/hangar-dev/hangar/gen/hangar/options/v1"
	// The API's descriptors, registered by its generated package, are what access reads.
	_ "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

// Which services are admin-only, and which methods authenticate their callers themselves, is
// declared in the protos (proto/hangar/options/v1: the service option admin_only and the
// method option authenticates_itself) and read here from the generated descriptors, so that
// a service or method gains its rule where it is defined, not in a list kept beside it.

// apiPackage is the API's proto package, whose services the interceptor serves.
const apiPackage = "svc.app.v1"

var (
	// AdminServices are the services only admins may call, by full name
	// ("svc.app.v1.ApiKeyService"): those declaring admin_only.
	AdminServices map[string]bool
	// SelfAuthenticated are the procedures ("/svc.app.v1.OAuthCredentialService/FetchSessionCredential")
	// that authenticate their callers themselves, with something other than an API key or the
	// dashboard's cookie (a session's broker token, from inside a sandbox): those declaring
	// authenticates_itself.
	SelfAuthenticated map[string]bool
)

func init() { AdminServices, SelfAuthenticated = declaredAccess(protoregistry.GlobalFiles, apiPackage) }

// declaredAccess reads the access options of package pkg's services from files.
func declaredAccess(files *protoregistry.Files, pkg protoreflect.FullName) (admin, self map[string]bool) {
	admin, self = map[string]bool{}, map[string]bool{}
	files.RangeFilesByPackage(pkg, func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			sd := f.Services().Get(i)
			if proto.GetExtension(sd.Options(), optionsv1.E_AdminOnly).(bool) {
				admin[string(sd.FullName())] = true
			}
			for j := range sd.Methods().Len() {
				md := sd.Methods().Get(j)
				if proto.GetExtension(md.Options(), optionsv1.E_AuthenticatesItself).(bool) {
					self["/"+string(sd.FullName())+"/"+string(md.Name())] = true
				}
			}
		}
		return true
	})
	return admin, self
}
