package tasks

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/ids"
)

func TestCreateTaskStoresAPendingRootTask(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  *appv1.CreateTaskRequest
		want *appv1.Task // the fields the request decides
	}{{
		name: "title derived from the prompt, settings from the profile",
		req:  &appv1.CreateTaskRequest{Prompt: new("Fix the flaky login test\nIt fails on CI.")},
		want: &appv1.Task{
			Type: "agent", Title: new("Fix the flaky login test"), TitleIsCustom: false,
			LocalTaskName: new("fix-the-flaky-login-test"), CanonicalTaskName: new("fix-the-flaky-login-test"),
			Harness: new("claude-code"), Model: new("opus"), Effort: new("high"), ModelRouter: new("router_main"),
		},
	}, {
		name: "custom title trimmed, own settings win over the profile's",
		req: &appv1.CreateTaskRequest{
			Type: "review", Title: new("  Ship v2  "), Prompt: new("do it"), Model: new("sonnet"), Effort: new("low"),
		},
		want: &appv1.Task{
			Type: "review", Title: new("Ship v2"), TitleIsCustom: true,
			LocalTaskName: new("ship-v2"), CanonicalTaskName: new("ship-v2"),
			Harness: new("claude-code"), Model: new("sonnet"), Effort: new("low"), ModelRouter: new("router_main"),
		},
	}, {
		name: "no title, no prompt, bare profile: nothing to show or name it by",
		req:  &appv1.CreateTaskRequest{ProfileId: profBare, Type: "draft"},
		want: &appv1.Task{Type: "draft", LocalTaskName: new("task"), CanonicalTaskName: new("task")},
	}, {
		name: "spawning session recorded",
		req:  &appv1.CreateTaskRequest{Title: new("Child work"), SpawningSessionId: new("sess_1")},
		want: &appv1.Task{
			Type: "agent", Title: new("Child work"), TitleIsCustom: true,
			LocalTaskName: new("child-work"), CanonicalTaskName: new("child-work"), SpawningSessionId: new("sess_1"),
			Harness: new("claude-code"), Model: new("opus"), Effort: new("high"), ModelRouter: new("router_main"),
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			got := f.create(t, as(t, alice), tc.req)
			if !ids.Valid(idPrefix, got.GetId()) {
				t.Fatalf("id %q is not a task id", got.GetId())
			}
			now := clock.Format(f.clock.Now())
			want := proto.CloneOf(tc.want)
			want.Id, want.Status, want.CreatedByUserId = got.GetId(), StatePending, new(alice)
			want.RootTaskId, want.CreatedAt, want.UpdatedAt = new(got.GetId()), now, now
			want.SourceJson = got.GetSourceJson()
			if !proto.Equal(got, want) {
				t.Fatalf("created task:\n got %v\nwant %v", got, want)
			}
			if read := f.mustGet(t, as(t, alice), got.GetId()); !proto.Equal(read, got) {
				t.Fatalf("GetTask differs from CreateTask:\n got %v\nwant %v", read, got)
			}
		})
	}
}

func TestSourceJSONRecordsHowTheTaskWasMade(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	task := f.create(t, as(t, alice), &appv1.CreateTaskRequest{
		Prompt: new("Fix <the> login"), HarnessMode: new("plan"), DeferInitialPrompt: true, Model: new("sonnet"),
	})
	var src map[string]any
	if err := json.Unmarshal([]byte(task.GetSourceJson()), &src); err != nil {
		t.Fatalf("source_json is not JSON: %v", err)
	}
	for key, want := range map[string]any{
		"type": "agent", "prompt": "Fix <the> login", "profile_id": profFull, "harness_mode": "plan",
		"defer_initial_prompt": true, "model": "sonnet",
	} {
		if src[key] != want {
			t.Errorf("source_json[%q] = %v, want %v", key, src[key], want)
		}
	}
	profile, _ := src["profile"].(map[string]any)
	if profile["id"] != profFull || profile["image_id"] != "img_go" || profile["model"] != "opus" {
		t.Errorf("source_json.profile = %v, want the snapshot of %s with proto field names", profile, profFull)
	}
}

func TestCreateTaskPassesProfileErrorsThrough(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tc := range []struct {
		profile string
		want    connect.Code
	}{
		{"prof_unknown", connect.CodeNotFound},
		{profArchived, connect.CodeFailedPrecondition},
	} {
		_, err := f.svc.CreateTask(as(t, alice), connect.NewRequest(&appv1.CreateTaskRequest{ProfileId: tc.profile}))
		testenv.WantCode(t, err, tc.want)
	}
}

func TestTasksShowTheirCreator(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ada, err := f.users.EnsureHuman(t.Context(), "ada@example.com", "Ada", t0)
	if err != nil {
		t.Fatal(err)
	}
	task := f.titled(t, as(t, ada.ID), "Mine")
	want := &appv1.User{Id: ada.ID, Email: "ada@example.com", Name: "Ada", Kind: "human"}
	for what, got := range map[string]*appv1.Task{
		"create": task,
		"get":    f.mustGet(t, as(t, ada.ID), task.GetId()),
		"list":   f.list(t, as(t, ada.ID), &appv1.ListTasksRequest{}).GetTasks()[0],
	} {
		if !proto.Equal(got.GetCreatedBy(), want) {
			t.Errorf("%s: created_by = %v, want %v", what, got.GetCreatedBy(), want)
		}
	}
}

func TestUpdateTaskTitle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		title      *string
		wantTitle  string
		wantCustom bool
		wantWrite  bool
	}{
		{"a title is custom", new("  Rename me  "), "Rename me", true, true},
		{"an empty title returns to the derived one", new(""), "Investigate the outage", false, true},
		{"a blank title returns to the derived one", new("   "), "Investigate the outage", false, true},
		{"no title changes nothing", nil, "Original", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := as(t, alice)
			task := f.create(t, ctx, &appv1.CreateTaskRequest{Title: new("Original"), Prompt: new("Investigate the outage\nlogs attached")})
			f.clock.Advance(time.Minute)
			res, err := f.svc.UpdateTask(ctx, connect.NewRequest(&appv1.UpdateTaskRequest{TaskId: task.GetId(), Title: tc.title}))
			if err != nil {
				t.Fatal(err)
			}
			got := res.Msg.GetTask()
			if got.GetTitle() != tc.wantTitle || got.GetTitleIsCustom() != tc.wantCustom {
				t.Fatalf("title %q custom %v, want %q custom %v", got.GetTitle(), got.GetTitleIsCustom(), tc.wantTitle, tc.wantCustom)
			}
			if got.GetLocalTaskName() != "original" || got.GetCanonicalTaskName() != "original" {
				t.Fatalf("names changed to %q, %q; they must stay", got.GetLocalTaskName(), got.GetCanonicalTaskName())
			}
			wantUpdated := task.GetUpdatedAt()
			if tc.wantWrite {
				wantUpdated = clock.Format(f.clock.Now())
			}
			if got.GetUpdatedAt() != wantUpdated || got.GetCreatedAt() != task.GetCreatedAt() {
				t.Fatalf("updated_at %s created_at %s, want %s and %s", got.GetUpdatedAt(), got.GetCreatedAt(), wantUpdated, task.GetCreatedAt())
			}
			if read := f.mustGet(t, ctx, task.GetId()); !proto.Equal(read, got) {
				t.Fatalf("GetTask differs from UpdateTask:\n got %v\nwant %v", read, got)
			}
		})
	}
}

func TestUpdateTaskReindexesTheTitle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := as(t, alice)
	task := f.create(t, ctx, &appv1.CreateTaskRequest{Title: new("Original"), Prompt: new("keep this")})
	if _, err := f.svc.UpdateTask(ctx, connect.NewRequest(&appv1.UpdateTaskRequest{TaskId: task.GetId(), Title: new("Zebra migration")})); err != nil {
		t.Fatal(err)
	}
	for search, want := range map[string]int32{"zebra": 1, "migr": 1, "original": 0, "keep": 1} {
		if got := f.list(t, ctx, &appv1.ListTasksRequest{Search: search}).GetTotalCount(); got != want {
			t.Errorf("search %q finds %d tasks, want %d", search, got, want)
		}
	}
}

func TestNamesAreUniqueAmongSiblings(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := as(t, alice)
	var names []string
	for range 3 {
		names = append(names, f.titled(t, ctx, "Fix login").GetLocalTaskName())
	}
	parent := f.titled(t, ctx, "Plan")
	otherParent := f.titled(t, ctx, "Other plan")
	child := func(parent *appv1.Task) *appv1.Task {
		return f.create(t, ctx, &appv1.CreateTaskRequest{Title: new("Fix login"), ParentTaskId: new(parent.GetId())})
	}
	first, second, elsewhere := child(parent), child(parent), child(otherParent)
	bobs := f.titled(t, as(t, bob), "Fix login")
	for _, tc := range []struct {
		what, got, want string
	}{
		{"three roots with one title", fmt.Sprint(names), "[fix-login fix-login-2 fix-login-3]"},
		{"first child", first.GetCanonicalTaskName(), "plan/fix-login"},
		{"second child of the same parent", second.GetCanonicalTaskName(), "plan/fix-login-2"},
		{"child of another parent", elsewhere.GetCanonicalTaskName(), "other-plan/fix-login"},
		{"another owner's root", bobs.GetLocalTaskName(), "fix-login"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.what, tc.got, tc.want)
		}
	}
}

func TestDeletingATaskFreesItsName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := as(t, alice)
	f.titled(t, ctx, "Report")
	second := f.titled(t, ctx, "Report")
	if err := f.delete(ctx, second.GetId()); err != nil {
		t.Fatal(err)
	}
	if got := f.titled(t, ctx, "Report").GetLocalTaskName(); got != "report-2" {
		t.Fatalf("name after delete = %q, want report-2 again", got)
	}
}

func TestManyNamesakesGetATagFromTheID(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := as(t, alice)
	for i := 1; i <= nameWindow*nameWindows; i++ {
		if got, want := f.titled(t, ctx, "Same").GetLocalTaskName(), numbered("same", i); got != want {
			t.Fatalf("namesake %d is %q, want %q", i, got, want)
		}
	}
	last := f.titled(t, ctx, "Same")
	if want := "same-" + last.GetId()[len(last.GetId())-6:]; last.GetLocalTaskName() != want {
		t.Fatalf("namesake past the numbered ones is %q, want %q", last.GetLocalTaskName(), want)
	}
}

func TestConcurrentCreatesWithOneTitleGetDistinctNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := as(t, alice)
	const n = 3
	names := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := f.svc.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{ProfileId: profFull, Title: new("Race")}))
			if err != nil {
				t.Error(err)
				return
			}
			names[i] = res.Msg.GetTask().GetLocalTaskName()
		})
	}
	wg.Wait()
	slices.Sort(names)
	if want := []string{"race", "race-2", "race-3"}; !slices.Equal(names, want) {
		t.Fatalf("names %v, want %v", names, want)
	}
}

// tree is root → (a → a1, b), created in the order root, a, b, a1.
type tree struct{ root, a, b, a1 *appv1.Task }

func (f fixture) tree(t *testing.T, owner string) tree {
	t.Helper()
	ctx := as(t, owner)
	under := func(parent *appv1.Task, title string) *appv1.Task {
		return f.create(t, ctx, &appv1.CreateTaskRequest{Title: new(title), ParentTaskId: new(parent.GetId())})
	}
	var tr tree
	tr.root = f.titled(t, ctx, "Root")
	tr.a = under(tr.root, "A")
	tr.b = under(tr.root, "B")
	tr.a1 = under(tr.a, "A1")
	return tr
}

func TestChildrenKnowTheirParentRootAndCanonicalName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tr := f.tree(t, alice)
	for _, tc := range []struct {
		task                  *appv1.Task
		parent, root, canonic string
	}{
		{tr.root, "", tr.root.GetId(), "root"},
		{tr.a, tr.root.GetId(), tr.root.GetId(), "root/a"},
		{tr.b, tr.root.GetId(), tr.root.GetId(), "root/b"},
		{tr.a1, tr.a.GetId(), tr.root.GetId(), "root/a/a1"},
	} {
		got := tc.task
		if got.GetParentTaskId() != tc.parent || got.GetRootTaskId() != tc.root || got.GetCanonicalTaskName() != tc.canonic {
			t.Errorf("%s: parent %q root %q canonical %q, want %q %q %q", got.GetTitle(),
				got.GetParentTaskId(), got.GetRootTaskId(), got.GetCanonicalTaskName(), tc.parent, tc.root, tc.canonic)
		}
	}
}

func TestGetTaskListsEveryDescendantOldestFirst(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := as(t, alice)
	tr := f.tree(t, alice)
	for _, tc := range []struct {
		task *appv1.Task
		want []*appv1.Task
	}{
		{tr.root, []*appv1.Task{tr.a, tr.b, tr.a1}},
		{tr.a, []*appv1.Task{tr.a1}},
		{tr.b, nil},
		{tr.a1, nil},
	} {
		got := f.mustGet(t, ctx, tc.task.GetId())
		wantIDs(t, "descendants of "+tc.task.GetTitle(), got.GetDescendants(), tc.want...)
		for i, d := range got.GetDescendants() {
			if !proto.Equal(d, tc.want[i]) {
				t.Errorf("descendant %s:\n got %v\nwant %v", d.GetTitle(), d, tc.want[i])
			}
		}
	}
}

func TestTreesHaveABoundedDepth(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := as(t, alice)
	parent := f.titled(t, ctx, "Level 1")
	for level := 2; level <= config.Default().Limits.TaskTreeDepth; level++ {
		parent = f.create(t, ctx, &appv1.CreateTaskRequest{Title: new(fmt.Sprint("Level ", level)), ParentTaskId: new(parent.GetId())})
	}
	_, err := f.svc.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{ProfileId: profFull, ParentTaskId: new(parent.GetId())}))
	testenv.WantCode(t, err, connect.CodeResourceExhausted)
}

func TestDeleteTaskDeletesItsSubtree(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := as(t, alice)
	tr := f.tree(t, alice)
	if err := f.delete(ctx, tr.a.GetId()); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []*appv1.Task{tr.a, tr.a1} {
		_, err := f.get(ctx, gone.GetId())
		testenv.WantCode(t, err, connect.CodeNotFound)
	}
	wantIDs(t, "descendants of root after deleting a", f.mustGet(t, ctx, tr.root.GetId()).GetDescendants(), tr.b)

	if err := f.delete(ctx, tr.root.GetId()); err != nil {
		t.Fatal(err)
	}
	for _, coll := range []string{tasksCollection, namesCollection} {
		left, err := f.db.Collection(coll).Documents(t.Context()).GetAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 0 {
			t.Errorf("%d documents left in %s after deleting every task", len(left), coll)
		}
	}
	testenv.WantCode(t, f.delete(ctx, tr.root.GetId()), connect.CodeNotFound)
}

func TestDeleteTaskDeletesLargeSubtreesInChunks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := as(t, alice)
	root := f.titled(t, ctx, "Big")
	const children = deleteChunk + 5
	forEach(t, children, func(i int) error {
		_, err := f.svc.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{
			ProfileId: profFull, Title: new(fmt.Sprint("Part ", i)), ParentTaskId: new(root.GetId()),
		}))
		return err
	})
	if err := f.delete(ctx, root.GetId()); err != nil {
		t.Fatal(err)
	}
	if n := f.list(t, ctx, &appv1.ListTasksRequest{}).GetTotalCount(); n != 0 {
		t.Fatalf("%d tasks left after deleting the root of %d", n, children+1)
	}
}

func TestGetTaskBySessionID(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := as(t, alice)
	task := f.titled(t, ctx, "With sessions")
	f.titled(t, ctx, "Without")
	f.setField(t, task.GetId(), "session_ids", []string{"sess_a", "sess_b"})

	res, err := f.svc.GetTask(ctx, connect.NewRequest(&appv1.GetTaskRequest{SessionId: "sess_b"}))
	if err != nil {
		t.Fatal(err)
	}
	got := res.Msg.GetTask()
	if got.GetId() != task.GetId() {
		t.Fatalf("found %s, want %s", got.GetId(), task.GetId())
	}
	want := []*appv1.TaskSessionRef{{SessionId: "sess_a"}, {SessionId: "sess_b"}}
	if !slices.EqualFunc(got.GetSessions(), want, func(a, b *appv1.TaskSessionRef) bool { return proto.Equal(a, b) }) {
		t.Fatalf("sessions %v, want %v", got.GetSessions(), want)
	}
	for _, tc := range []struct {
		name   string
		ctx    string
		req    *appv1.GetTaskRequest
		code   connect.Code
		wantID string
	}{
		{"unknown session", alice, &appv1.GetTaskRequest{SessionId: "sess_zzz"}, connect.CodeNotFound, ""},
		{"another user's session", bob, &appv1.GetTaskRequest{SessionId: "sess_a"}, connect.CodeNotFound, ""},
		{"an admin finds anyone's", admin, &appv1.GetTaskRequest{SessionId: "sess_a"}, 0, task.GetId()},
		{"task_id decides over session_id", alice, &appv1.GetTaskRequest{TaskId: task.GetId(), SessionId: "sess_zzz"}, 0, task.GetId()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := f.svc.GetTask(as(t, tc.ctx), connect.NewRequest(tc.req))
			if tc.code != 0 {
				testenv.WantCode(t, err, tc.code)
				return
			}
			if err != nil || res.Msg.GetTask().GetId() != tc.wantID {
				t.Fatalf("got %v, %v; want task %s", res, err, tc.wantID)
			}
		})
	}
}

func TestOtherUsersTasksAreNotFound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	task := f.titled(t, as(t, alice), "Private")
	bobCtx := as(t, bob)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"get", func() error { _, err := f.get(bobCtx, task.GetId()); return err }},
		{"update", func() error {
			_, err := f.svc.UpdateTask(bobCtx, connect.NewRequest(&appv1.UpdateTaskRequest{TaskId: task.GetId(), Title: new("mine now")}))
			return err
		}},
		{"delete", func() error { return f.delete(bobCtx, task.GetId()) }},
		{"create a child", func() error {
			_, err := f.svc.CreateTask(bobCtx, connect.NewRequest(&appv1.CreateTaskRequest{ProfileId: profFull, ParentTaskId: new(task.GetId())}))
			return err
		}},
		{"get an unknown id", func() error { _, err := f.get(bobCtx, ids.New(idPrefix)); return err }},
		{"get a malformed id", func() error { _, err := f.get(bobCtx, "task_nope"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) { testenv.WantCode(t, tc.call(), connect.CodeNotFound) })
	}
	if got := f.mustGet(t, as(t, alice), task.GetId()); got.GetTitle() != "Private" {
		t.Fatalf("alice's task changed: %v", got)
	}
}

func TestAdminsSeeAndChangeEveryTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tr := f.tree(t, alice)
	adminCtx := as(t, admin)
	if _, err := f.svc.UpdateTask(adminCtx, connect.NewRequest(&appv1.UpdateTaskRequest{TaskId: tr.b.GetId(), Title: new("Renamed by admin")})); err != nil {
		t.Fatal(err)
	}
	// An admin's child under alice's task is the admin's: alice does not see it in her tree.
	adminsChild := f.create(t, adminCtx, &appv1.CreateTaskRequest{Title: new("Admin help"), ParentTaskId: new(tr.root.GetId())})
	if adminsChild.GetCreatedByUserId() != admin || adminsChild.GetCanonicalTaskName() != "root/admin-help" {
		t.Fatalf("admin's child: owner %q canonical %q", adminsChild.GetCreatedByUserId(), adminsChild.GetCanonicalTaskName())
	}
	wantIDs(t, "alice's view of her tree", f.mustGet(t, as(t, alice), tr.root.GetId()).GetDescendants(), tr.a, tr.b, tr.a1)
	wantIDs(t, "the admin's view of alice's tree", f.mustGet(t, adminCtx, tr.root.GetId()).GetDescendants(), tr.a, tr.b, tr.a1, adminsChild)
	if err := f.delete(adminCtx, tr.root.GetId()); err != nil {
		t.Fatal(err)
	}
	_, err := f.get(adminCtx, adminsChild.GetId())
	testenv.WantCode(t, err, connect.CodeNotFound)
}

// forEach runs fn(0…n-1) on a bounded pool of workers and fails t on the first error.
func forEach(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	const workers = 16
	next := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					errs <- fmt.Errorf("item %d: %w", i, err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestCreateTaskWithARequestIDIsIdempotentPerCaller(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := &appv1.CreateTaskRequest{ProfileId: profFull, Title: new("Once"), RequestId: new("req-1")}
	first := f.create(t, as(t, alice), req)
	again := f.create(t, as(t, alice), req)
	if again.GetId() != first.GetId() || again.GetTitle() != "Once" {
		t.Fatalf("the retry made %s, want %s", again.GetId(), first.GetId())
	}
	other := f.create(t, as(t, bob), req)
	if other.GetId() == first.GetId() {
		t.Fatal("another caller's request id answered alice's task")
	}
	list := f.list(t, as(t, alice), &appv1.ListTasksRequest{})
	if len(list.GetTasks()) != 1 {
		t.Fatalf("alice has %d tasks, want 1", len(list.GetTasks()))
	}
}
