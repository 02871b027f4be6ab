package e2e

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/harnesses/oci"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// images is an ImageService client with key.
func (s *stack) images(key string) appv1connect.ImageServiceClient {
	return appv1connect.NewImageServiceClient(httpClient, s.rpcURL(), auth.WithKey(key))
}

func staticRegistry(host, user, password string) *appv1.AddRegistryRequest {
	return &appv1.AddRegistryRequest{Host: host, Auth: &appv1.AddRegistryRequest_Static{Static: &appv1.StaticRegistryAuth{Username: user, Password: password}}}
}

func TestRegistriesAddListDelete(t *testing.T) {
	s := newImageStack(t, 0).sandboxStack // AddRegistry is ImageService's, which needs Pub/Sub
	ctx := context.Background()
	admin, user := s.images(s.admin), s.images(s.mintKey(t, "dev@example.com", false))

	added, err := admin.AddRegistry(ctx, connect.NewRequest(staticRegistry("GHCR.io", "octocat", "ghp_pw")))
	if err != nil {
		t.Fatal(err)
	}
	if m := added.Msg; !strings.HasPrefix(m.GetId(), "reg_") || m.GetHost() != "ghcr.io" || m.GetAuthKind() != "static" || m.GetAuthPrincipal() != "octocat" {
		t.Fatalf("added %v", m)
	}
	if _, err := admin.AddRegistry(ctx, connect.NewRequest(&appv1.AddRegistryRequest{Host: "europe-docker.pkg.dev",
		Auth: &appv1.AddRegistryRequest_WorkloadIdentity{WorkloadIdentity: &appv1.WorkloadIdentityRegistryAuth{ImpersonateSa: proto.String("puller@p.iam.gserviceaccount.com")}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AddRegistry(ctx, connect.NewRequest(&appv1.AddRegistryRequest{Host: "123456789012.dkr.ecr.eu-west-1.amazonaws.com",
		Auth: &appv1.AddRegistryRequest_CloudRegistry{CloudRegistry: &appv1.CloudRegistryAuth{}}})); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name      string
		client    appv1connect.ImageServiceClient
		req       *appv1.AddRegistryRequest
		want      connect.Code
		wantField string
	}{
		{"a non-admin", user, &appv1.AddRegistryRequest{Host: "quay.io", Auth: &appv1.AddRegistryRequest_Anonymous{Anonymous: &appv1.AnonymousRegistryAuth{}}}, connect.CodePermissionDenied, ""},
		{"a URL for a host", admin, staticRegistry("https://quay.io/v2", "u", "p"), connect.CodeInvalidArgument, "host"},
		{"no auth", admin, &appv1.AddRegistryRequest{Host: "quay.io"}, connect.CodeInvalidArgument, "auth"},
		{"no password", admin, staticRegistry("quay.io", "u", ""), connect.CodeInvalidArgument, "static.password"},
		{"a host already configured", admin, staticRegistry("ghcr.io", "other", "pw"), connect.CodeAlreadyExists, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.client.AddRegistry(ctx, connect.NewRequest(tc.req))
			testenv.WantCode(t, err, tc.want)
			if tc.wantField != "" {
				if got := testenv.ViolatedFields(t, err); len(got) != 1 || got[0] != tc.wantField {
					t.Fatalf("violated %v, want %s", got, tc.wantField)
				}
			}
		})
	}

	// Anyone signed in may see which registries Hangar pulls from; no one sees a password.
	list, err := user.ListRegistries(ctx, connect.NewRequest(&appv1.ListRegistriesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range list.Msg.GetRegistries() {
		got = append(got, r.GetRegistryHost()+"="+r.GetAuthKind()+":"+r.GetAuthPrincipal())
	}
	want := "123456789012.dkr.ecr.eu-west-1.amazonaws.com=cloud_registry:,europe-docker.pkg.dev=workload_identity:puller@p.iam.gserviceaccount.com,ghcr.io=static:octocat"
	if strings.Join(got, ",") != want {
		t.Fatalf("list:\n%s\nwant:\n%s", strings.Join(got, ","), want)
	}

	_, err = user.DeleteRegistry(ctx, connect.NewRequest(&appv1.DeleteRegistryRequest{Host: "ghcr.io"}))
	testenv.WantCode(t, err, connect.CodePermissionDenied)
	if _, err := admin.DeleteRegistry(ctx, connect.NewRequest(&appv1.DeleteRegistryRequest{Host: "ghcr.io"})); err != nil {
		t.Fatal(err)
	}
	_, err = admin.DeleteRegistry(ctx, connect.NewRequest(&appv1.DeleteRegistryRequest{Host: "ghcr.io"}))
	testenv.WantCode(t, err, connect.CodeNotFound)
}

// logCapture collects every log line of the processes in the test (the API's and the hosts'
// loggers are slog.Default when built), at debug level.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *logCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func captureLogs(t *testing.T) *logCapture {
	c := &logCapture{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return c
}

// The attack: a user (or an agent in a session) wants the password of the team's private
// registry. It is not in any answer (AddRegistry's, ListRegistries', a failed session's), in
// no session event, in no log line of the API or the hosts, and not in the sandbox, whose
// image the host pulled with it: the sandbox's environment, its PID 1's environment and its
// files do not hold it. On the way, a wrong password is refused with what to do, and replacing
// it fixes pulls on the running host.
func TestSecurityRegistryPasswordNeverLeaves(t *testing.T) {
	logs := captureLogs(t)
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	const password = "PRIVATE-REGISTRY-PASSWORD-7f3a"
	const wrongPassword = "WRONG-PASSWORD-91c2"

	// The test image, copied into two private registries.
	src, err := name.ParseReference(s.sb.Image)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(src, remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	private := imagestest.Registry(t, imagestest.BasicAuth("robot", password, nil))
	privateRef := imagestest.Push(t, private, "team/busybox", img, remote.WithAuth(&authn.Basic{Username: "robot", Password: password}))
	other := imagestest.Registry(t, imagestest.BasicAuth("robot", password, nil))
	otherRef := imagestest.Push(t, other, "team/busybox", img, remote.WithAuth(&authn.Basic{Username: "robot", Password: password}))

	var answers []proto.Message
	admin := s.images(s.admin)
	for _, req := range []*appv1.AddRegistryRequest{staticRegistry(private, "robot", password), staticRegistry(other, "robot", wrongPassword)} {
		resp, err := admin.AddRegistry(ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, resp.Msg)
	}
	userKey := s.mintKey(t, "dev@example.com", false)
	for _, key := range []string{s.admin, userKey} {
		list, err := s.images(key).ListRegistries(ctx, connect.NewRequest(&appv1.ListRegistriesRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, list.Msg)
	}

	// The wrong password is refused, and the refusal says what to do without either password.
	_, err = s.sessions(userKey).CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{ImageUri: otherRef}))
	testenv.WantCode(t, err, connect.CodeInvalidArgument)
	if !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "hangar registries") {
		t.Fatalf("a session of an image behind a wrong password: %v", err)
	}

	refusal := err.Error()

	// An admin who replaces the wrong password fixes pulls on the running host within its
	// keychain's recheck, without a restart.
	if _, err := admin.DeleteRegistry(ctx, connect.NewRequest(&appv1.DeleteRegistryRequest{Host: other})); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AddRegistry(ctx, connect.NewRequest(staticRegistry(other, "robot", password))); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "a pull with the replaced password", func() (bool, string) {
		resp, err := s.sessions(userKey).CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{ImageUri: otherRef}))
		if err != nil {
			return false, err.Error()
		}
		return true, resp.Msg.GetSessionId()
	})

	// The right one pulls the image; the session runs.
	session := s.create(t, &appv1.CreateSessionRequest{ImageUri: privateRef})
	inside := s.sh(t, session, "env; tr '\\0' '\\n' < /proc/1/environ; P=PRIVATE-REGISTRY; grep -rs \"$P-PASSWORD-7f3a\" /etc /root /tmp /.hangar 2>/dev/null; echo done")
	if !strings.Contains(inside, "done") {
		t.Fatalf("the sandbox's output: %s", inside)
	}

	var seen strings.Builder
	for _, m := range answers {
		seen.WriteString(protojson.Format(m))
	}
	seen.WriteString(refusal)
	for _, e := range s.listEvents(t, session) {
		seen.WriteString(protojson.Format(e))
	}
	for what, text := range map[string]string{"an answer or event": seen.String(), "the sandbox": inside, "a log line": logs.String()} {
		for _, secret := range []string{password, wrongPassword} {
			if strings.Contains(text, secret) {
				t.Errorf("%s shows a registry password:\n%s", what, text)
			}
		}
	}
	if !strings.Contains(logs.String(), "level=") {
		t.Fatal("no log line was captured: the test proves nothing about logs")
	}
}

// A harness plugin in a private registry is pulled with the registry an admin added, as images
// are: without it the registry refuses RegisterHarness (the machine's docker config, which
// earlier answered for plugin pulls, plays no part), with it the plugin registers.
func TestHarnessPluginPullsSignInWithAddedRegistries(t *testing.T) {
	mods := testenv.RequirePlugins(t)
	s := newImageStack(t, 1)
	ctx := context.Background()
	const password = "PLUGIN-REGISTRY-PASSWORD-5d1e"
	private := imagestest.Registry(t, imagestest.BasicAuth("robot", password, nil))
	ref := private + "/plugins/shell:v1"
	if _, err := oci.Publish(ctx, mods["bash"].Wasm, ref, remote.WithAuthFromKeychain(basicKeychain{Username: "robot", Password: password})); err != nil {
		t.Fatal(err)
	}
	catalog := appv1connect.NewHarnessCatalogServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	register := func() error {
		_, err := catalog.RegisterHarness(ctx, connect.NewRequest(&appv1.RegisterHarnessRequest{Name: "private-shell", OciRef: ref}))
		return err
	}

	err := register()
	testenv.WantCode(t, err, connect.CodeInvalidArgument)
	if !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
		t.Fatalf("registering from a private registry no one added: %v", err)
	}
	if _, err := s.images.AddRegistry(ctx, connect.NewRequest(staticRegistry(private, "robot", password))); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "RegisterHarness with the added registry", func() (bool, string) {
		if err := register(); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if strings.Contains(fmt.Sprint(err), password) {
		t.Fatalf("the refusal holds the password: %v", err)
	}
}

// basicKeychain signs every registry in with one username and password.
type basicKeychain authn.Basic

func (k basicKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	b := authn.Basic(k)
	return &b, nil
}
