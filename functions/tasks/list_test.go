package tasks

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

func TestListTasksPagesWithoutGapsOrDuplicates(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := as(t, alice)
	const total = 250
	forEach(t, total, func(i int) error {
		// Every third create moves the clock, so that orders meet both ties and distinct times.
		if i%3 == 0 {
			f.clock.Advance(time.Millisecond)
		}
		_, err := f.svc.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{ProfileId: profFull, Title: new(fmt.Sprint("Task ", i))}))
		return err
	})
	f.titled(t, as(t, bob), "Not alice's")
	// Three tasks change last: "updated" lists them first, most recent first.
	all := f.list(t, ctx, &appv1.ListTasksRequest{PageSize: total}).GetTasks()
	var touched []string
	for _, task := range all[:3] {
		f.clock.Advance(time.Second)
		if _, err := f.svc.UpdateTask(ctx, connect.NewRequest(&appv1.UpdateTaskRequest{TaskId: task.GetId(), Title: new("Touched")})); err != nil {
			t.Fatal(err)
		}
		touched = append([]string{task.GetId()}, touched...)
	}

	for _, tc := range []struct {
		order string
		key   func(*appv1.Task) string
		desc  bool
	}{
		{"", (*appv1.Task).GetCreatedAt, true},
		{"newest", (*appv1.Task).GetCreatedAt, true},
		{"oldest", (*appv1.Task).GetCreatedAt, false},
		{"updated", (*appv1.Task).GetUpdatedAt, true},
	} {
		t.Run("order "+cmp.Or(tc.order, "default"), func(t *testing.T) {
			var got []*appv1.Task
			for page := int32(1); ; page++ {
				res := f.list(t, ctx, &appv1.ListTasksRequest{Order: tc.order, Page: page, PageSize: 100})
				if res.GetTotalCount() != total {
					t.Fatalf("page %d: total_count %d, want %d", page, res.GetTotalCount(), total)
				}
				if len(res.GetTasks()) == 0 {
					break
				}
				got = append(got, res.GetTasks()...)
			}
			ids := idsOf(got)
			if len(ids) != total || len(slices.Compact(slices.Sorted(slices.Values(ids)))) != total {
				t.Fatalf("paged through %d tasks (%d distinct), want %d", len(ids), len(slices.Compact(slices.Sorted(slices.Values(ids)))), total)
			}
			sorted := slices.IsSortedFunc(got, func(a, b *appv1.Task) int {
				c := cmp.Or(cmp.Compare(tc.key(a), tc.key(b)), cmp.Compare(a.GetId(), b.GetId()))
				if tc.desc {
					return -c
				}
				return c
			})
			if !sorted {
				t.Fatal("pages are not in order, ties broken by id")
			}
			if tc.order == "updated" && !slices.Equal(ids[:3], touched) {
				t.Fatalf("updated order starts %v, want the touched tasks %v", ids[:3], touched)
			}
		})
	}

	for _, tc := range []struct {
		name     string
		pageSize int32
		want     int
	}{
		{"default page size", 0, f.svc.lim.Tasks.Default},
		{"page size above the maximum is clamped", 1000, f.svc.lim.Tasks.Max},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(f.list(t, ctx, &appv1.ListTasksRequest{PageSize: tc.pageSize}).GetTasks()); got != tc.want {
				t.Fatalf("got %d tasks, want %d", got, tc.want)
			}
		})
	}
}

func TestListTasksScope(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a1 := f.titled(t, as(t, alice), "Alice one")
	a2 := f.titled(t, as(t, alice), "Alice two")
	b1 := f.titled(t, as(t, bob), "Bob one")
	for _, tc := range []struct {
		name   string
		caller string
		req    *appv1.ListTasksRequest
		want   []*appv1.Task
	}{
		{"mine by default", alice, &appv1.ListTasksRequest{}, []*appv1.Task{a2, a1}},
		{"mine", bob, &appv1.ListTasksRequest{Scope: "mine"}, []*appv1.Task{b1}},
		{"all is mine for a non-admin", alice, &appv1.ListTasksRequest{Scope: "all"}, []*appv1.Task{a2, a1}},
		{"a non-admin filtering on others sees nothing", alice, &appv1.ListTasksRequest{Scope: "all", CreatedByUserIds: []string{bob}}, nil},
		{"a non-admin filtering on self and others sees their own", alice, &appv1.ListTasksRequest{CreatedByUserIds: []string{bob, alice}}, []*appv1.Task{a2, a1}},
		{"an admin's own tasks", admin, &appv1.ListTasksRequest{}, nil},
		{"an admin's all", admin, &appv1.ListTasksRequest{Scope: "all"}, []*appv1.Task{b1, a2, a1}},
		{"an admin's all by creator", admin, &appv1.ListTasksRequest{Scope: "all", CreatedByUserIds: []string{bob, bob}}, []*appv1.Task{b1}},
		{"an admin's all by two creators", admin, &appv1.ListTasksRequest{Scope: "all", CreatedByUserIds: []string{alice, bob}, Order: "oldest"}, []*appv1.Task{a1, a2, b1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := f.list(t, as(t, tc.caller), tc.req)
			wantIDs(t, "tasks", res.GetTasks(), tc.want...)
			if int(res.GetTotalCount()) != len(tc.want) || res.GetSessionStateUnavailable() {
				t.Fatalf("total_count %d session_state_unavailable %v, want %d and false", res.GetTotalCount(), res.GetSessionStateUnavailable(), len(tc.want))
			}
		})
	}
}

func TestListTasksByState(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := as(t, alice)
	pending := f.titled(t, ctx, "Pending")
	running := f.titled(t, ctx, "Running")
	done := f.titled(t, ctx, "Done")
	f.setField(t, running.GetId(), "status", StateRunning)
	f.setField(t, done.GetId(), "status", StateCompleted)
	for _, tc := range []struct {
		states []string
		want   []*appv1.Task
	}{
		{nil, []*appv1.Task{done, running, pending}},
		{[]string{StateRunning}, []*appv1.Task{running}},
		{[]string{StateRunning, StateCompleted, StateRunning}, []*appv1.Task{done, running}},
		{[]string{StatePending}, []*appv1.Task{pending}},
		{[]string{StateCancelled}, nil},
	} {
		t.Run(fmt.Sprint(tc.states), func(t *testing.T) {
			res := f.list(t, ctx, &appv1.ListTasksRequest{States: tc.states})
			wantIDs(t, "tasks", res.GetTasks(), tc.want...)
			if int(res.GetTotalCount()) != len(tc.want) {
				t.Fatalf("total_count %d, want %d", res.GetTotalCount(), len(tc.want))
			}
		})
	}
}

func TestListTasksSearch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := as(t, alice)
	authBug := f.create(t, ctx, &appv1.CreateTaskRequest{Title: new("Fix authentication bug in login"), Prompt: new("The OAuth callback fails")})
	loginPage := f.create(t, ctx, &appv1.CreateTaskRequest{Prompt: new("Add a login page\nDesign it with React")})
	billing := f.create(t, ctx, &appv1.CreateTaskRequest{Title: new("Refactor billing"), Prompt: new("Move invoices to Stripe")})
	bobsLogin := f.create(t, as(t, bob), &appv1.CreateTaskRequest{Title: new("Login for Bob")})
	f.setField(t, loginPage.GetId(), "status", StateRunning)

	for _, tc := range []struct {
		name   string
		caller string
		req    *appv1.ListTasksRequest
		want   []*appv1.Task
	}{
		{"one word, newest first", alice, &appv1.ListTasksRequest{Search: "login"}, []*appv1.Task{loginPage, authBug}},
		{"oldest first", alice, &appv1.ListTasksRequest{Search: "login", Order: "oldest"}, []*appv1.Task{authBug, loginPage}},
		{"case-insensitive", alice, &appv1.ListTasksRequest{Search: "LOGIN"}, []*appv1.Task{loginPage, authBug}},
		{"every word must match", alice, &appv1.ListTasksRequest{Search: "login page"}, []*appv1.Task{loginPage}},
		{"words in any order, with punctuation", alice, &appv1.ListTasksRequest{Search: "page, LOGIN!"}, []*appv1.Task{loginPage}},
		{"prefix", alice, &appv1.ListTasksRequest{Search: "auth"}, []*appv1.Task{authBug}},
		{"prefix of a later word", alice, &appv1.ListTasksRequest{Search: "oau"}, []*appv1.Task{authBug}},
		{"a word of the prompt", alice, &appv1.ListTasksRequest{Search: "stripe"}, []*appv1.Task{billing}},
		{"no match", alice, &appv1.ListTasksRequest{Search: "kubernetes"}, nil},
		{"words that match different tasks", alice, &appv1.ListTasksRequest{Search: "login stripe"}, nil},
		{"a word longer than the prefix is not a match", alice, &appv1.ListTasksRequest{Search: "authenticationxyz"}, nil},
		{"one-letter words are ignored", alice, &appv1.ListTasksRequest{Search: "a"}, []*appv1.Task{billing, loginPage, authBug}},
		{"with states", alice, &appv1.ListTasksRequest{Search: "login", States: []string{StatePending}}, []*appv1.Task{authBug}},
		{"only the caller's tasks", bob, &appv1.ListTasksRequest{Search: "login"}, []*appv1.Task{bobsLogin}},
		{"an admin's all", admin, &appv1.ListTasksRequest{Scope: "all", Search: "login"}, []*appv1.Task{bobsLogin, loginPage, authBug}},
		{"with created_by", admin, &appv1.ListTasksRequest{Scope: "all", Search: "login", CreatedByUserIds: []string{alice}}, []*appv1.Task{loginPage, authBug}},
		{"with created_by and states", admin, &appv1.ListTasksRequest{Scope: "all", Search: "login", CreatedByUserIds: []string{alice, bob}, States: []string{StateRunning}}, []*appv1.Task{loginPage}},
		{"paged", alice, &appv1.ListTasksRequest{Search: "login", PageSize: 1, Page: 2}, []*appv1.Task{authBug}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := f.list(t, as(t, tc.caller), tc.req)
			wantIDs(t, "tasks", res.GetTasks(), tc.want...)
			wantTotal := len(tc.want)
			if tc.req.GetPageSize() == 1 {
				wantTotal = 2
			}
			if int(res.GetTotalCount()) != wantTotal {
				t.Fatalf("total_count %d, want %d", res.GetTotalCount(), wantTotal)
			}
		})
	}
}
