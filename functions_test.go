package hangar

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
)

// Every public service has a Cloud Run function, so a service added to proto/ without one
// fails here rather than in production.
func TestEveryServiceIsDeployed(t *testing.T) {
	var missing []string
	protoregistry.GlobalFiles.RangeFilesByPackage("svc.app.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			if name := string(fd.Services().Get(i).FullName()); !slices.Contains(deployed, name) {
				missing = append(missing, name)
			}
		}
		return true
	})
	if len(missing) > 0 {
		t.Fatalf("services without a function in functions.go: %v", missing)
	}
}

func TestFunctionServesItsServiceOnBothPathsAndNothingElse(t *testing.T) {
	testenv.RequireEmulators(t)
	t.Setenv("HANGAR_PROJECT", testenv.Project(t))
	fn := serve("svc.app.v1.TaskService")
	cases := []struct {
		path string
		want int
	}{
		{"/rpc/svc.app.v1.TaskService/ListTasks", http.StatusUnauthorized},
		{"/svc.app.v1.TaskService/ListTasks", http.StatusUnauthorized},
		{"/rpc/svc.app.v1.ProfileService/ListProfiles", http.StatusNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/json")
			fn(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tc.want, rec.Body)
			}
		})
	}
}
