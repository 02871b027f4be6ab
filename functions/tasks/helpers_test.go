package tasks

import (
	"context"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
)

var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

const (
	alice = "user_alice"
	bob   = "user_bob"
	admin = "user_root"
)

// Profiles the fake knows: a full one, a bare one, an archived one.
const (
	profFull     = "prof_full"
	profBare     = "prof_bare"
	profArchived = "prof_archived"
)

// fakeProfiles answers Launch the way ProfileService does.
type fakeProfiles map[string]*appv1.ProfileSnapshot

func (f fakeProfiles) Egress(context.Context, string) (*appv1.ProfileNetwork, []*appv1.ProfileRepo, string, error) {
	return nil, nil, "", nil
}

func (f fakeProfiles) Launch(_ context.Context, id string) (*appv1.ProfileSnapshot, map[string]string, []*appv1.ProfileSecret, error) {
	p, ok := f[id]
	switch {
	case !ok:
		return nil, nil, nil, apierr.NotFound("profile", id)
	case id == profArchived:
		return nil, nil, nil, apierr.FailedPrecondition("profile %s is archived", id)
	}
	return p, nil, nil, nil
}

var profiles = fakeProfiles{
	profFull: {
		Id: profFull, Name: "Go backend", ImageId: "img_go", Harness: new("claude-code"),
		Model: new("opus"), Effort: new("high"), ModelRouter: new("router_main"),
		UpdatedAt: "2025-02-01T00:00:00.000Z",
	},
	profBare:     {Id: profBare, Name: "Bare", ImageId: "busybox"},
	profArchived: {Id: profArchived, Name: "Old", ImageId: "busybox"},
}

type fixture struct {
	svc   *Service
	db    *firestore.Client
	clock *clock.Fake
	users *auth.Users
}

func newFixture(t *testing.T) fixture {
	return newFixtureWith(t, config.Default().Limits)
}

func newFixtureWith(t *testing.T, lim config.Limits) fixture {
	t.Helper()
	db, _ := testenv.Firestore(t)
	c := clock.NewFake(t0)
	users := auth.NewUsers(db)
	return fixture{svc: New(db, profiles, nil, users, c, lim), db: db, clock: c, users: users}
}

// as is a request context for a caller; admin is the admin.
func as(t *testing.T, userID string) context.Context {
	return auth.WithPrincipal(t.Context(), auth.Principal{UserID: userID, Admin: userID == admin})
}

// create makes a task, from profFull unless the request names a profile, a second after the
// previous one so that creation order is unambiguous.
func (f fixture) create(t *testing.T, ctx context.Context, req *appv1.CreateTaskRequest) *appv1.Task {
	t.Helper()
	if req.ProfileId == "" {
		req.ProfileId = profFull
	}
	f.clock.Advance(time.Second)
	res, err := f.svc.CreateTask(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("CreateTask(%v): %v", req, err)
	}
	return res.Msg.GetTask()
}

func (f fixture) titled(t *testing.T, ctx context.Context, title string) *appv1.Task {
	t.Helper()
	return f.create(t, ctx, &appv1.CreateTaskRequest{Title: new(title)})
}

func (f fixture) get(ctx context.Context, id string) (*appv1.Task, error) {
	res, err := f.svc.GetTask(ctx, connect.NewRequest(&appv1.GetTaskRequest{TaskId: id}))
	if err != nil {
		return nil, err
	}
	return res.Msg.GetTask(), nil
}

func (f fixture) mustGet(t *testing.T, ctx context.Context, id string) *appv1.Task {
	t.Helper()
	task, err := f.get(ctx, id)
	if err != nil {
		t.Fatalf("GetTask(%s): %v", id, err)
	}
	return task
}

func (f fixture) list(t *testing.T, ctx context.Context, req *appv1.ListTasksRequest) *appv1.ListTasksResponse {
	t.Helper()
	res, err := f.svc.ListTasks(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("ListTasks(%v): %v", req, err)
	}
	return res.Msg
}

func (f fixture) delete(ctx context.Context, id string) error {
	_, err := f.svc.DeleteTask(ctx, connect.NewRequest(&appv1.DeleteTaskRequest{TaskId: id}))
	return err
}

// setField writes a stored field directly, standing in for what later services (sessions)
// will write.
func (f fixture) setField(t *testing.T, id, path string, value any) {
	t.Helper()
	if _, err := f.db.Collection(tasksCollection).Doc(id).Update(t.Context(), []firestore.Update{{Path: path, Value: value}}); err != nil {
		t.Fatalf("set %s of %s: %v", path, id, err)
	}
}

func idsOf(tasks []*appv1.Task) []string {
	out := make([]string, len(tasks))
	for i, task := range tasks {
		out[i] = task.GetId()
	}
	return out
}

func wantIDs(t *testing.T, what string, got []*appv1.Task, want ...*appv1.Task) {
	t.Helper()
	if g, w := idsOf(got), idsOf(want); !slices.Equal(g, w) {
		t.Fatalf("%s: got %v, want %v", what, g, w)
	}
}
