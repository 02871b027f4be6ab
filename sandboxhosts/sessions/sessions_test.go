package sessions_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/sandboxhosts/sessions"
)

func TestCanMoveFollowsTheLifecycle(t *testing.T) {
	cases := []struct {
		from, to sessions.Status
		ok       bool
	}{
		{sessions.Creating, sessions.Running, true},
		{sessions.Running, sessions.Idle, true},
		{sessions.Idle, sessions.Running, true},
		{sessions.Running, sessions.Snapshotting, true},
		{sessions.Snapshotting, sessions.Evicted, true},
		{sessions.Evicted, sessions.Resuming, true},
		{sessions.Resuming, sessions.Running, true},
		{sessions.Running, sessions.Lost, true},
		{sessions.Lost, sessions.Resuming, true},
		{sessions.Failed, sessions.Resuming, true},
		{sessions.Evicted, sessions.Running, false},
		{sessions.Creating, sessions.Evicted, false},
		{sessions.Lost, sessions.Running, false},
		{sessions.Deleted, sessions.Resuming, false},
		{sessions.Running, sessions.Running, false},
	}
	for _, c := range cases {
		if got := sessions.CanMove(c.from, c.to); got != c.ok {
			t.Errorf("CanMove(%s, %s) = %v, want %v", c.from, c.to, got, c.ok)
		}
	}
}

func TestEveryStateButDeletedCanBeDeleted(t *testing.T) {
	for _, s := range sessions.Statuses() {
		if s != sessions.Deleted && !sessions.CanMove(s, sessions.Deleted) {
			t.Errorf("%s cannot be deleted", s)
		}
	}
}

func TestMoveChecksTheTable(t *testing.T) {
	db, _ := testenv.Firestore(t)
	st := sessions.NewStore(db, func() time.Time { return time.Now().UTC() })
	ctx := context.Background()
	r := &sessions.Record{ID: "sess_a", Owner: "u1", Status: sessions.Creating, ImageURI: "img"}
	if err := st.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := st.Create(ctx, r); !sessions.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want already exists", err)
	}
	from, got, err := st.Move(ctx, "sess_a", sessions.Running, "started", func(r *sessions.Record) error {
		r.HostID = "h1"
		return nil
	})
	if err != nil || from != sessions.Creating || got.Status != sessions.Running || got.HostID != "h1" {
		t.Fatalf("move to running: from %s, %+v, %v", from, got, err)
	}
	_, _, err = st.Move(ctx, "sess_a", sessions.Resuming, "", nil)
	var me *sessions.MoveError
	if !errors.As(err, &me) || me.From != sessions.Running || me.To != sessions.Resuming {
		t.Fatalf("running → resuming: %v, want a MoveError", err)
	}
	refuse := errors.New("no")
	if _, _, err := st.Move(ctx, "sess_a", sessions.Idle, "", func(*sessions.Record) error { return refuse }); !errors.Is(err, refuse) {
		t.Fatalf("refused move: %v", err)
	}
	back, err := st.Get(ctx, "sess_a")
	if err != nil || back.Status != sessions.Running || back.StatusReason != "started" {
		t.Fatalf("after refused moves: %+v, %v", back, err)
	}
	if _, _, err := st.Move(ctx, "sess_missing", sessions.Running, "", nil); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

func TestListByOwnerHidesDeletedAndOthers(t *testing.T) {
	db, _ := testenv.Firestore(t)
	now := time.Now().UTC()
	st := sessions.NewStore(db, func() time.Time { now = now.Add(time.Second); return now })
	ctx := context.Background()
	for _, r := range []*sessions.Record{
		{ID: "s1", Owner: "u1", Status: sessions.Running, HostID: "h1"},
		{ID: "s2", Owner: "u1", Status: sessions.Deleted, HostID: "h1"},
		{ID: "s3", Owner: "u2", Status: sessions.Idle, HostID: "h2"},
		{ID: "s4", Owner: "u1", Status: sessions.Evicted},
	} {
		if err := st.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.ListByOwner(ctx, "u1", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "s4" || got[1].ID != "s1" {
		t.Fatalf("u1's sessions newest first: %v", ids(got))
	}
	all, err := st.ListByOwner(ctx, "", 10)
	if err != nil || len(all) != 3 {
		t.Fatalf("everyone's: %v, %v", ids(all), err)
	}
	onH1, err := st.ListByHost(ctx, "h1", sessions.Running, sessions.Idle)
	if err != nil || len(onH1) != 1 || onH1[0].ID != "s1" {
		t.Fatalf("live on h1: %v, %v", ids(onH1), err)
	}
}

func ids(rs []*sessions.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func TestMoveRechecksWhenAnotherWriteLandsFirst(t *testing.T) {
	db, _ := testenv.Firestore(t)
	st := sessions.NewStore(db, func() time.Time { return time.Now().UTC() })
	ctx := context.Background()
	if err := st.Create(ctx, &sessions.Record{ID: "sess_race", Owner: "u1", Status: sessions.Running}); err != nil {
		t.Fatal(err)
	}
	// The first move reads "running", then the session is deleted before it writes: its write
	// must fail, and its retry must see "deleted", which cannot become idle.
	deleted := make(chan struct{})
	calls := 0
	_, _, err := st.Move(ctx, "sess_race", sessions.Idle, "quiet", func(*sessions.Record) error {
		if calls++; calls == 1 {
			go func() {
				defer close(deleted)
				if _, _, err := st.Move(ctx, "sess_race", sessions.Deleted, "deleted", nil); err != nil {
					t.Errorf("delete: %v", err)
				}
			}()
			<-deleted
		}
		return nil
	})
	var me *sessions.MoveError
	if !errors.As(err, &me) || me.From != sessions.Deleted {
		t.Fatalf("move raced by a delete: %v, want a MoveError from deleted found on re-reading", err)
	}

	// Concurrent moves that may all happen each get written once, none lost.
	if err := st.Create(ctx, &sessions.Record{ID: "sess_many", Owner: "u1", Status: sessions.Running}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			_, _, err := st.Move(ctx, "sess_many", sessions.Running, "placed", func(r *sessions.Record) error {
				r.SandboxID = fmt.Sprintf("sb-%d", i)
				return nil
			})
			if err != nil {
				t.Errorf("mover %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if got, err := st.Get(ctx, "sess_many"); err != nil || !strings.HasPrefix(got.SandboxID, "sb-") {
		t.Fatalf("after concurrent moves: %+v, %v", got, err)
	}
	_, _, err = st.Move(ctx, "sess_many", sessions.Running, "", func(r *sessions.Record) error {
		r.Owner = "someone else"
		return nil
	})
	if err == nil {
		t.Fatal("a move changed the owner")
	}
}
