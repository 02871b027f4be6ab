package main

import (
	"testing"

	"google.golang.org/protobuf/proto"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
)

func TestTasksCreate(t *testing.T) {
	promptFile := writeTemp(t, "prompt.md", "from a file\n")
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  *appv1.CreateTaskRequest
	}{
		{name: "defaults", args: []string{"--profile", "p1"},
			want: &appv1.CreateTaskRequest{Type: "agent", ProfileId: "p1"}},
		{name: "every flag", args: []string{"--profile", "p1", "--type", "review", "--prompt", "fix it", "--title", "Fix",
			"--harness", "claude", "--model", "opus", "--effort", "high", "--harness-mode", "plan", "--defer-initial-prompt",
			"--model-router", "r1", "--parent", "t0"},
			want: &appv1.CreateTaskRequest{Type: "review", ProfileId: "p1", Prompt: proto.String("fix it"), Title: proto.String("Fix"),
				Harness: proto.String("claude"), Model: proto.String("opus"), Effort: proto.String("high"), HarnessMode: proto.String("plan"),
				DeferInitialPrompt: true, ModelRouter: proto.String("r1"), ParentTaskId: proto.String("t0")}},
		{name: "empty optional flags stay unset", args: []string{"--profile", "p1", "--title", "", "--model", ""},
			want: &appv1.CreateTaskRequest{Type: "agent", ProfileId: "p1"}},
		{name: "prompt file", args: []string{"--profile", "p1", "--prompt-file", promptFile},
			want: &appv1.CreateTaskRequest{Type: "agent", ProfileId: "p1", Prompt: proto.String("from a file\n")}},
		{name: "prompt from stdin", stdin: "from stdin", args: []string{"--profile", "p1", "--prompt-file", "-"},
			want: &appv1.CreateTaskRequest{Type: "agent", ProfileId: "p1", Prompt: proto.String("from stdin")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			reply(f, appv1connect.TaskServiceCreateTaskProcedure, &appv1.CreateTaskResponse{Task: &appv1.Task{Id: "t1", Status: "pending", Type: "agent"}})
			r := f.runWithInput(t, tc.stdin, append([]string{"tasks", "create"}, tc.args...)...)
			if r.err != nil {
				t.Fatalf("exit %d: %v", r.code, r.err)
			}
			f.assertRequest(t, appv1connect.TaskServiceCreateTaskProcedure, tc.want)
			assertContains(t, r.out, "id: t1\n", "type: agent\n", "status: pending\n")
		})
	}
}

func TestTasksList(t *testing.T) {
	f := newFakeAPI(t)
	reply(f, appv1connect.TaskServiceListTasksProcedure, &appv1.ListTasksResponse{TotalCount: 7, Tasks: []*appv1.Task{
		{Id: "t1", Status: "running", Type: "agent", CanonicalTaskName: proto.String("fix-login"), LocalTaskName: proto.String("login"),
			Title: proto.String("Make the login page remember who signed in last time"), CreatedAt: "2026-01-02T03:04:05Z"},
		{Id: "t22", Status: "pending", Type: "agent", LocalTaskName: proto.String("sub"), CreatedAt: "2026-01-03T00:00:00Z"},
	}})
	out := f.mustRun(t, "tasks", "list", "--scope", "all", "--search", "login", "--state", "running", "--state", "pending",
		"--created-by", "u1", "--created-by", "u2", "--order", "updated", "--page", "2", "--page-size", "10")
	f.assertRequest(t, appv1connect.TaskServiceListTasksProcedure, &appv1.ListTasksRequest{
		Scope: "all", Search: "login", States: []string{"running", "pending"}, CreatedByUserIds: []string{"u1", "u2"},
		Order: "updated", Page: 2, PageSize: 10,
	})
	want := "" +
		"ID   STATUS   TYPE   NAME       TITLE                                     CREATED\n" +
		"t1   running  agent  fix-login  Make the login page remember who signed…  2026-01-02T03:04:05Z\n" +
		"t22  pending  agent  sub        -                                         2026-01-03T00:00:00Z\n" +
		"total: 7\n"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}

	f = newFakeAPI(t)
	f.mustRun(t, "tasks", "list")
	f.assertRequest(t, appv1connect.TaskServiceListTasksProcedure, &appv1.ListTasksRequest{})
}

func TestTasksGetUpdateDelete(t *testing.T) {
	task := &appv1.Task{
		Id: "t1", Status: "running", Type: "agent", Title: proto.String("Fix it"),
		CreatedBy: &appv1.User{Id: "u1", Email: "ada@example.com"},
		Sessions:  []*appv1.TaskSessionRef{{SessionId: "s1", Session: &appv1.Session{Id: "s1", Status: "idle"}}},
	}
	for _, tc := range []struct {
		name      string
		args      []string
		procedure string
		want      proto.Message
		wantOut   []string
	}{
		{"get", []string{"get", "t1"}, appv1connect.TaskServiceGetTaskProcedure, &appv1.GetTaskRequest{TaskId: "t1"},
			[]string{"id: t1\n", "title: Fix it\n", "created_by.email: ada@example.com\n", "sessions[0].session_id: s1\n", "sessions[0].session.status: idle\n"}},
		{"get by session", []string{"get", "--session", "s1"}, appv1connect.TaskServiceGetTaskProcedure, &appv1.GetTaskRequest{SessionId: "s1"},
			[]string{"id: t1\n"}},
		{"retitle", []string{"update", "t1", "--title", "New"}, appv1connect.TaskServiceUpdateTaskProcedure,
			&appv1.UpdateTaskRequest{TaskId: "t1", Title: proto.String("New")}, []string{"id: t1\n"}},
		{"reset title", []string{"update", "t1", "--title", ""}, appv1connect.TaskServiceUpdateTaskProcedure,
			&appv1.UpdateTaskRequest{TaskId: "t1", Title: proto.String("")}, []string{"id: t1\n"}},
		{"delete", []string{"delete", "t1"}, appv1connect.TaskServiceDeleteTaskProcedure, &appv1.DeleteTaskRequest{TaskId: "t1"},
			[]string{"deleted task t1\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			reply(f, appv1connect.TaskServiceGetTaskProcedure, &appv1.GetTaskResponse{Task: task})
			reply(f, appv1connect.TaskServiceUpdateTaskProcedure, &appv1.UpdateTaskResponse{Task: task})
			out := f.mustRun(t, append([]string{"tasks"}, tc.args...)...)
			f.assertRequest(t, tc.procedure, tc.want)
			assertContains(t, out, tc.wantOut...)
		})
	}
}
