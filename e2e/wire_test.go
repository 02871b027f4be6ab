package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/auth"
)

// postJSON sends a hand-written JSON body, as a client outside the project would, and decodes
// the JSON answer.
func postJSON(t *testing.T, s *stack, key, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+"/rpc/"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", key)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: answer %q is not JSON", path, raw)
	}
	return resp.StatusCode, out
}

func TestHandWrittenJSONUsesSpecFieldNames(t *testing.T) {
	s := newStack(t)
	status, out := postJSON(t, s, s.admin, "svc.app.v1.ProfileService/CreateProfile",
		`{"name": "web", "image_id": "busybox", "env_vars": {"GOFLAGS": "-mod=mod"}, "network": {"default": "deny", "allow_hosts": ["github.com"]}}`)
	if status != http.StatusOK {
		t.Fatalf("CreateProfile: %d %v", status, out)
	}
	profile := out["profile"].(map[string]any)
	for _, name := range []string{"id", "image_id", "env_vars", "include_user_tokens", "created_at", "updated_at", "archived"} {
		if _, ok := profile[name]; !ok {
			t.Errorf("response lacks API field %q: %v", name, profile)
		}
	}
	if _, ok := profile["imageId"]; ok {
		t.Errorf("response uses camelCase names: %v", profile)
	}
	profileID := profile["id"].(string)

	status, out = postJSON(t, s, s.admin, "svc.app.v1.TaskService/CreateTask",
		`{"type": "agent", "profile_id": "`+profileID+`", "prompt": "Fix the flaky login test", "defer_initial_prompt": true}`)
	if status != http.StatusOK {
		t.Fatalf("CreateTask: %d %v", status, out)
	}
	task := out["task"].(map[string]any)
	if task["status"] == "" || task["source_json"] == "" || task["created_at"] == "" {
		t.Fatalf("task lacks fields: %v", task)
	}

	// The same task read back with protobuf bodies through the generated client.
	tasks := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	got, err := tasks.GetTask(context.Background(), connect.NewRequest(&appv1.GetTaskRequest{TaskId: task["id"].(string)}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Msg.GetTask().GetCreatedAt() != task["created_at"] || !strings.Contains(got.Msg.GetTask().GetSourceJson(), "flaky login") {
		t.Fatalf("protobuf read differs from JSON write: %v", got.Msg.GetTask())
	}
}

func TestMisspeltJSONFieldIsRefusedNotIgnored(t *testing.T) {
	s := newStack(t)
	status, out := postJSON(t, s, s.admin, "svc.app.v1.ProfileService/CreateProfile", `{"name": "x", "imageId": "busybox", "imgae_id": "oops"}`)
	if status != http.StatusBadRequest || out["code"] != "invalid_argument" || !strings.Contains(out["message"].(string), "imgae_id") {
		t.Fatalf("got %d %v, want invalid_argument naming the unknown field", status, out)
	}
}

func TestValidationErrorsTravelWithTheirFields(t *testing.T) {
	s := newStack(t)
	profiles := appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	_, err := profiles.CreateProfile(context.Background(), connect.NewRequest(&appv1.CreateProfileRequest{
		Name: "ok", ImageId: "busybox", EnvVars: map[string]string{"1BAD": "x"},
	}))
	assertFieldViolation(t, err, `env_vars["1BAD"]`)

	tasks := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	_, err = tasks.ListTasks(context.Background(), connect.NewRequest(&appv1.ListTasksRequest{Order: "sideways"}))
	assertFieldViolation(t, err, "order")
}

func TestAnotherUsersTaskIsNotFound(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	alice, bob := s.mintKey(t, "alice@example.com", false), s.mintKey(t, "bob@example.com", false)
	profiles := appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), auth.WithKey(alice))
	p, err := profiles.CreateProfile(ctx, connect.NewRequest(&appv1.CreateProfileRequest{Name: "alice", ImageId: "busybox"}))
	if err != nil {
		t.Fatal(err)
	}
	aliceTasks := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(alice))
	created, err := aliceTasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{ProfileId: p.Msg.GetProfile().GetId(), Prompt: new("secret plan")}))
	if err != nil {
		t.Fatal(err)
	}
	id := created.Msg.GetTask().GetId()
	bobTasks := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(bob))
	calls := map[string]func() error{
		"GetTask": func() error {
			_, err := bobTasks.GetTask(ctx, connect.NewRequest(&appv1.GetTaskRequest{TaskId: id}))
			return err
		},
		"UpdateTask": func() error {
			_, err := bobTasks.UpdateTask(ctx, connect.NewRequest(&appv1.UpdateTaskRequest{TaskId: id, Title: new("mine now")}))
			return err
		},
		"DeleteTask": func() error {
			_, err := bobTasks.DeleteTask(ctx, connect.NewRequest(&appv1.DeleteTaskRequest{TaskId: id}))
			return err
		},
	}
	for name, call := range calls {
		if code := connect.CodeOf(call()); code != connect.CodeNotFound {
			t.Errorf("%s of another user's task: %v, want not_found", name, code)
		}
	}
	list, err := bobTasks.ListTasks(ctx, connect.NewRequest(&appv1.ListTasksRequest{Scope: "all"}))
	if err != nil {
		t.Fatal(err)
	}
	if list.Msg.GetTotalCount() != 0 || len(list.Msg.GetTasks()) != 0 {
		t.Fatalf("bob lists alice's task: %v", list.Msg)
	}
	// Alice's task is untouched, and the admin sees it.
	admin := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	all, err := admin.ListTasks(ctx, connect.NewRequest(&appv1.ListTasksRequest{Scope: "all"}))
	if err != nil {
		t.Fatal(err)
	}
	if all.Msg.GetTotalCount() != 1 || all.Msg.GetTasks()[0].GetTitle() == "mine now" {
		t.Fatalf("admin view: %v", all.Msg)
	}
}

func TestOversizedRequestIsRefused(t *testing.T) {
	s := newStack(t)
	big := bytes.Repeat([]byte("a"), 5<<20)
	status, out := postJSON(t, s, s.admin, "svc.app.v1.ProfileService/CreateProfile", `{"name": "big", "image_id": "x", "description": "`+string(big)+`"}`)
	if status == http.StatusOK || out["code"] != "resource_exhausted" {
		t.Fatalf("5 MiB request: %d %v, want resource_exhausted", status, out)
	}
}

func TestGRPCAndGRPCWebClientsWork(t *testing.T) {
	s := newStack(t)
	key := s.mintKey(t, "grpc@example.com", false)

	h2c := &http.Client{Transport: &http.Transport{Protocols: func() *http.Protocols {
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		return p
	}()}}
	cases := []struct {
		name   string
		client *http.Client
		opt    connect.ClientOption
	}{
		{"gRPC over cleartext HTTP/2", h2c, connect.WithGRPC()},
		{"gRPC-Web over HTTP/1.1", httpClient, connect.WithGRPCWeb()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tasks := appv1connect.NewTaskServiceClient(tc.client, s.rpcURL(), tc.opt, auth.WithKey(key))
			if _, err := tasks.ListTasks(context.Background(), connect.NewRequest(&appv1.ListTasksRequest{})); err != nil {
				t.Fatalf("ListTasks: %v", err)
			}
			_, err := tasks.ListTasks(context.Background(), connect.NewRequest(&appv1.ListTasksRequest{Order: "sideways"}))
			assertFieldViolation(t, err, "order")
		})
	}
}
