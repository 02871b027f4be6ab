package hangar

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/functions/imagesvc"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/bucket"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/platform/pubsub"
)

// publicServices are the services of the public API, from the registry of generated code.
func publicServices() []protoreflect.ServiceDescriptor {
	var svcs []protoreflect.ServiceDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("svc.app.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			svcs = append(svcs, fd.Services().Get(i))
		}
		return true
	})
	return svcs
}

// Every public service is either deployed as a function or listed as not built yet, never both,
// so a service added to proto/ without a function fails here rather than in production.
func TestEveryServiceIsDeployedOrListedAsNotBuilt(t *testing.T) {
	var deployed []string
	for _, fn := range composition.Functions() {
		deployed = append(deployed, fn.Service)
	}
	for _, sd := range publicServices() {
		name := string(sd.FullName())
		in, notBuilt := slices.Contains(deployed, name), slices.Contains(composition.NotBuilt, name)
		switch {
		case in && notBuilt:
			t.Errorf("%s is both deployed and listed as not built", name)
		case !in && !notBuilt:
			t.Errorf("%s has no function in composition.Functions", name)
		}
	}
}

// A service listed as not built answers unimplemented for every method; once one of its methods
// does something this fails, saying to deploy it.
func TestNotBuiltServicesServeOnlyUnimplemented(t *testing.T) {
	db, _ := testenv.Firestore(t)
	a := composition.New(composition.Deps{DB: db, Config: config.Default()})
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	key := adminKey(t, a)
	for _, sd := range publicServices() {
		if !slices.Contains(composition.NotBuilt, string(sd.FullName())) {
			continue
		}
		for i := range sd.Methods().Len() {
			md := sd.Methods().Get(i)
			if md.IsStreamingClient() || md.IsStreamingServer() {
				continue
			}
			t.Run(string(md.FullName()), func(t *testing.T) {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+httpapi.RPCPrefix+"/"+string(sd.FullName())+"/"+string(md.Name()), strings.NewReader("{}"))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(httpapi.APIKeyHeader, key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				if !strings.Contains(string(body), `"unimplemented"`) {
					t.Fatalf("answers %d %s: it is built now, so move %s from composition.NotBuilt to composition.Functions", resp.StatusCode, body, sd.FullName())
				}
			})
		}
	}
}

func TestFunctionServesItsServiceOnBothPathsAndNothingElse(t *testing.T) {
	testenv.RequireEmulators(t)
	t.Setenv("HANGAR_PROJECT", testenv.Project(t))
	fn := instance.Handler(composition.Function{EntryPoint: "TaskService", Service: appv1connect.TaskServiceName, Public: true})
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

// TestProductionParity runs every Cloud Run function as deployed: the buildpack's main
// (internal/cloudrunmain) with the Functions Framework, one process per function with
// FUNCTION_TARGET set, configured only by production's environment variables pointed at the
// emulators, a file:// bucket and a sandbox host. A task started through TaskService runs a
// session that SessionService execs in and snapshots: what only `hangar dev` used to wire.
func TestProductionParity(t *testing.T) {
	db, project := testenv.Firestore(t)
	sb := testenv.NewSandboxes(t, db)
	ctx := context.Background()

	dir := t.TempDir()
	bin := filepath.Join(dir, "function")
	if out, err := exec.Command("go", "build", "-o", bin, "./internal/cloudrunmain").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	blobDir := filepath.Join(dir, "blob")
	if err := os.MkdirAll(blobDir, 0o700); err != nil {
		t.Fatal(err)
	}
	var err error
	// The host and the functions share the bucket and keyset, as in production.
	if sb.Bucket, err = bucket.Open(ctx, "file://"+blobDir); err != nil {
		t.Fatal(err)
	}
	ks, sealer := testenv.Keyset(t)
	sb.Sealer = sealer
	sb.StartHost(t, "parity-host")
	// A deployment provisions its topics and subscriptions once (docs/deploy.md).
	ps, err := pubsub.Open(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ps.Close() })
	if err := ps.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"GOOGLE_CLOUD_PROJECT=" + project, "HANGAR_BLOB_URL=file://" + blobDir, "HANGAR_SEAL_KEYSET=" + string(ks),
		"HANGAR_HOST_TOKEN=" + sb.Config.HostToken, "HANGAR_DEFAULT_IMAGE=" + sb.Image,
		// The test registry is on loopback, which an operator lists for pulls.
		"HANGAR_PRIVATE_REGISTRIES=127.0.0.1",
	}

	urls := map[string]string{}
	for _, fn := range composition.Functions() {
		urls[fn.EntryPoint] = startFunction(t, bin, fn.EntryPoint, env)
	}
	key := adminKey(t, composition.New(composition.Deps{DB: db, Config: config.Default()}))
	opts := auth.WithKey(key)

	t.Run("every function opens and serves", func(t *testing.T) {
		for _, fn := range composition.Functions() {
			method, path, want := http.MethodPost, "/"+fn.Service+"/NoSuchMethod", http.StatusNotFound
			switch {
			case fn == composition.Dashboard:
				method, path, want = http.MethodGet, "/tasks", http.StatusOK
			case fn.Service == "":
				path, want = "/internal/automations/tick", http.StatusNoContent
			}
			req, err := http.NewRequest(method, urls[fn.EntryPoint]+path, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%s %s: %d %s, want %d", fn.EntryPoint, path, resp.StatusCode, body, want)
			}
		}
		hc := appv1connect.NewHarnessCatalogServiceClient(http.DefaultClient, urls["HarnessCatalogService"], opts)
		if _, err := hc.ListHarnesses(ctx, connect.NewRequest(&emptypb.Empty{})); err != nil {
			t.Errorf("HarnessCatalogService: %v", err)
		}
	})

	// Sessions start only from enabled images: enable the test image through ImageService, and
	// deliver its job to the worker function the way the push subscription does.
	images := appv1connect.NewImageServiceClient(http.DefaultClient, urls["ImageService"], opts)
	enabled, err := images.EnableImage(ctx, connect.NewRequest(&appv1.EnableImageRequest{ImageUri: sb.Image}))
	if err != nil {
		t.Fatal(err)
	}
	job := enabled.Msg.GetJob().GetId()
	push(t, urls["AutomationWorker"]+imagesvc.JobsPushPath, fmt.Sprintf(`{"job_id":%q}`, job))
	got, err := images.GetEnableJob(ctx, connect.NewRequest(&appv1.GetEnableJobRequest{JobId: job}))
	if err != nil {
		t.Fatal(err)
	}
	if state := got.Msg.GetJob().GetState(); state != "ready" {
		t.Fatalf("enable job %s is %s (%s), want ready", job, state, got.Msg.GetJob().GetError())
	}

	profiles := appv1connect.NewProfileServiceClient(http.DefaultClient, urls["ProfileService"], opts)
	p, err := profiles.CreateProfile(ctx, connect.NewRequest(&appv1.CreateProfileRequest{Name: "parity", ImageId: sb.Image}))
	if err != nil {
		t.Fatal(err)
	}
	tasks := appv1connect.NewTaskServiceClient(http.DefaultClient, urls["TaskService"], opts)
	prompt := "echo parity"
	created, err := tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{Type: "agent", ProfileId: p.Msg.GetProfile().GetId(), Prompt: &prompt}))
	if err != nil {
		t.Fatal(err)
	}
	ss := created.Msg.GetTask().GetSessions()
	if len(ss) != 1 {
		t.Fatalf("task %v: want one session", created.Msg.GetTask())
	}
	sessionID := ss[0].GetSessionId()

	sessions := appv1connect.NewSessionServiceClient(http.DefaultClient, urls["SessionService"], opts)
	stream, err := sessions.Exec(ctx, connect.NewRequest(&appv1.ExecRequest{SessionId: sessionID, Argv: []string{"sh", "-c", "echo hello > /root/f; cat /root/f"}}))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for stream.Receive() {
		out.Write(stream.Msg().GetStdout())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if out.String() != "hello\n" {
		t.Fatalf("exec printed %q", out.String())
	}
	snap, err := sessions.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: sessionID}))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Msg.GetSnapshotId() == "" {
		t.Fatalf("snapshot %v has no id", snap.Msg)
	}
}

// push delivers one message to a push endpoint in Pub/Sub's push format, as a push subscription
// does, and fails t unless it is acknowledged.
func push(t *testing.T, url, data string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"message": map[string]any{"data": []byte(data), "messageId": "parity-1"}, "subscription": "parity"})
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("push to %s: %d %s", url, resp.StatusCode, b)
	}
}

// startFunction runs bin as the Cloud Run function target on a free loopback port until t ends,
// and returns its URL once it answers.
func startFunction(t *testing.T, bin, target string, env []string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), append([]string{"FUNCTION_TARGET=" + target, "PORT=" + port, "LOCAL_ONLY=true"}, env...)...)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	url := "http://127.0.0.1:" + port
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			return url
		}
		select {
		case err := <-exited:
			t.Fatalf("function %s exited: %v", target, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("function %s never listened on %s", target, port)
	return ""
}

// adminKey mints an admin key through a's key store.
func adminKey(t *testing.T, a *composition.API) string {
	t.Helper()
	ctx := context.Background()
	u, err := a.Users().EnsureHuman(ctx, "parity@example.com", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := a.Keys().Create(ctx, auth.NewKeyInput{Name: "parity", Kind: auth.KindPersonal, UserID: u.ID, Admin: true, CreatedBy: u.ID}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return key
}
