package tasks

import (
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/config"
)

func TestInvalidRequestsNameTheirFields(t *testing.T) {
	t.Parallel()
	lim := config.Default().Limits
	lim.MaxPromptBytes = 10
	f := newFixtureWith(t, lim)
	ctx := as(t, alice)
	adminCtx := as(t, admin)
	task := f.titled(t, ctx, "Existing")
	long := func(n int) *string { return new(strings.Repeat("x", n)) }
	many := func(n int, item string) []string { return slices.Repeat([]string{item}, n) }
	users := make([]string, 31)
	for i := range users {
		users[i] = "user_" + string(rune('a'+i%26)) + strings.Repeat("z", i/26)
	}

	create := func(req *appv1.CreateTaskRequest) func() error {
		return func() error {
			if req.ProfileId == "" {
				req.ProfileId = profFull
			}
			_, err := f.svc.CreateTask(ctx, connect.NewRequest(req))
			return err
		}
	}
	list := func(req *appv1.ListTasksRequest) func() error {
		return func() error { _, err := f.svc.ListTasks(adminCtx, connect.NewRequest(req)); return err }
	}
	for _, tc := range []struct {
		name  string
		call  func() error
		field []string
	}{
		{"unknown type", create(&appv1.CreateTaskRequest{Type: "epic"}), []string{"type"}},
		{"no profile", create(&appv1.CreateTaskRequest{ProfileId: " "}), []string{"profile_id"}},
		{"prompt too long", create(&appv1.CreateTaskRequest{Prompt: long(11)}), []string{"prompt"}},
		{"title too long", create(&appv1.CreateTaskRequest{Title: long(201)}), []string{"title"}},
		{"title on two lines", create(&appv1.CreateTaskRequest{Title: new("one\ntwo")}), []string{"title"}},
		{"harness too long", create(&appv1.CreateTaskRequest{Harness: long(101)}), []string{"harness"}},
		{"model too long", create(&appv1.CreateTaskRequest{Model: long(101)}), []string{"model"}},
		{"effort too long", create(&appv1.CreateTaskRequest{Effort: long(101)}), []string{"effort"}},
		{"model_router too long", create(&appv1.CreateTaskRequest{ModelRouter: long(101)}), []string{"model_router"}},
		{"harness_mode with a control character", create(&appv1.CreateTaskRequest{HarnessMode: new("a\x00b")}), []string{"harness_mode"}},
		{"spawning_session_id too long", create(&appv1.CreateTaskRequest{SpawningSessionId: long(101)}), []string{"spawning_session_id"}},
		{"every bad field at once", create(&appv1.CreateTaskRequest{Type: "epic", ProfileId: " ", Title: long(201)}), []string{"title", "type", "profile_id"}},

		{"get without an id", func() error {
			_, err := f.svc.GetTask(ctx, connect.NewRequest(&appv1.GetTaskRequest{}))
			return err
		}, []string{"task_id"}},
		{"update without an id", func() error {
			_, err := f.svc.UpdateTask(ctx, connect.NewRequest(&appv1.UpdateTaskRequest{Title: new("x")}))
			return err
		}, []string{"task_id"}},
		{"update with a title too long", func() error {
			_, err := f.svc.UpdateTask(ctx, connect.NewRequest(&appv1.UpdateTaskRequest{TaskId: task.GetId(), Title: long(201)}))
			return err
		}, []string{"title"}},
		{"delete without an id", func() error { return f.delete(ctx, "") }, []string{"task_id"}},

		{"unknown scope", list(&appv1.ListTasksRequest{Scope: "everyone"}), []string{"scope"}},
		{"unknown order", list(&appv1.ListTasksRequest{Order: "alphabetical"}), []string{"order"}},
		{"updated order with a search", list(&appv1.ListTasksRequest{Order: "updated", Search: "login"}), []string{"order"}},
		{"unknown state", list(&appv1.ListTasksRequest{States: []string{StateRunning, "paused"}}), []string{"states[1]"}},
		{"empty state", list(&appv1.ListTasksRequest{States: []string{""}}), []string{"states[0]"}},
		{"too many states", list(&appv1.ListTasksRequest{States: many(11, StateRunning)}), []string{"states"}},
		{"empty creator", list(&appv1.ListTasksRequest{Scope: "all", CreatedByUserIds: []string{alice, ""}}), []string{"created_by_user_ids[1]"}},
		{"too many creators", list(&appv1.ListTasksRequest{Scope: "all", CreatedByUserIds: users}), []string{"created_by_user_ids"}},
		{"creators times states past Firestore's bound", list(&appv1.ListTasksRequest{
			Scope: "all", CreatedByUserIds: users[:16], States: []string{StatePending, StateRunning},
		}), []string{"created_by_user_ids"}},
		{"too many search words", list(&appv1.ListTasksRequest{Search: "aa bb cc dd ee ff gg hh ii jj kk"}), []string{"search"}},
		{"negative page", list(&appv1.ListTasksRequest{Page: -1}), []string{"page"}},
		{"page too deep", list(&appv1.ListTasksRequest{Page: 201}), []string{"page"}},
		{"negative page size", list(&appv1.ListTasksRequest{PageSize: -1}), []string{"page_size"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := testenv.ViolatedFields(t, tc.call())
			if !slices.Equal(got, tc.field) {
				t.Fatalf("violated fields %v, want %v", got, tc.field)
			}
		})
	}
}
