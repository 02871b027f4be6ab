package sessiondb_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

func TestCanMoveFollowsTheLifecycle(t *testing.T) {
	t.Parallel()
	cases := []struct {
		from, to sessiondb.Status
		ok       bool
	}{
		{sessiondb.Creating, sessiondb.Running, true},
		{sessiondb.Running, sessiondb.Idle, true},
		{sessiondb.Idle, sessiondb.Running, true},
		{sessiondb.Running, sessiondb.Snapshotting, true},
		{sessiondb.Snapshotting, sessiondb.Evicted, true},
		{sessiondb.Evicted, sessiondb.Resuming, true},
		{sessiondb.Resuming, sessiondb.Running, true},
		{sessiondb.Running, sessiondb.Lost, true},
		{sessiondb.Lost, sessiondb.Resuming, true},
		{sessiondb.Failed, sessiondb.Resuming, true},
		{sessiondb.Evicted, sessiondb.Running, false},
		{sessiondb.Creating, sessiondb.Evicted, false},
		{sessiondb.Lost, sessiondb.Running, false},
		{sessiondb.Deleted, sessiondb.Resuming, false},
		{sessiondb.Running, sessiondb.Running, false},
	}
	for _, c := range cases {
		if got := sessiondb.CanMove(c.from, c.to); got != c.ok {
			t.Errorf("CanMove(%s, %s) = %v, want %v", c.from, c.to, got, c.ok)
		}
	}
}

func TestEveryStateButDeletedCanBeDeleted(t *testing.T) {
	t.Parallel()
	for _, s := range sessiondb.Statuses() {
		if s != sessiondb.Deleted && !sessiondb.CanMove(s, sessiondb.Deleted) {
			t.Errorf("%s cannot be deleted", s)
		}
	}
}

func TestMoveChecksTheTable(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	st := sessiondb.NewStore(db, func() time.Time { return time.Now().UTC() })
	ctx := context.Background()
	r := &sessiondb.Record{ID: "sess_a", Owner: "u1", Status: sessiondb.Creating, ImageURI: "img"}
	if _, err := st.Create(ctx, r, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(ctx, r, 0); !sessiondb.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want already exists", err)
	}
	from, got, err := st.Move(ctx, "sess_a", sessiondb.Running, "started", func(r *sessiondb.Record) error {
		r.HostID = "h1"
		return nil
	})
	if err != nil || from != sessiondb.Creating || got.Status != sessiondb.Running || got.HostID != "h1" {
		t.Fatalf("move to running: from %s, %+v, %v", from, got, err)
	}
	_, _, err = st.Move(ctx, "sess_a", sessiondb.Resuming, "", nil)
	var me *sessiondb.MoveError
	if !errors.As(err, &me) || me.From != sessiondb.Running || me.To != sessiondb.Resuming {
		t.Fatalf("running → resuming: %v, want a MoveError", err)
	}
	refuse := errors.New("no")
	if _, _, err := st.Move(ctx, "sess_a", sessiondb.Idle, "", func(*sessiondb.Record) error { return refuse }); !errors.Is(err, refuse) {
		t.Fatalf("refused move: %v", err)
	}
	back, err := st.Get(ctx, "sess_a")
	if err != nil || back.Status != sessiondb.Running || back.StatusReason != "started" {
		t.Fatalf("after refused moves: %+v, %v", back, err)
	}
	if _, _, err := st.Move(ctx, "sess_missing", sessiondb.Running, "", nil); !errors.Is(err, sessiondb.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

func TestListByOwnerHidesDeletedAndOthers(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	now := time.Now().UTC()
	st := sessiondb.NewStore(db, func() time.Time { now = now.Add(time.Second); return now })
	ctx := context.Background()
	for _, r := range []*sessiondb.Record{
		{ID: "s1", Owner: "u1", Status: sessiondb.Running, HostID: "h1"},
		{ID: "s2", Owner: "u1", Status: sessiondb.Deleted, HostID: "h1"},
		{ID: "s3", Owner: "u2", Status: sessiondb.Idle, HostID: "h2"},
		{ID: "s4", Owner: "u1", Status: sessiondb.Evicted},
	} {
		if _, err := st.Create(ctx, r, 0); err != nil {
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
	onH1, err := st.ListByHost(ctx, "h1", sessiondb.Running, sessiondb.Idle)
	if err != nil || len(onH1) != 1 || onH1[0].ID != "s1" {
		t.Fatalf("live on h1: %v, %v", ids(onH1), err)
	}
}

// A session not deleted still needs its image: running on it, or resumable from it on any host.
func TestImagesInUseAreThoseOfEverySessionNotDeleted(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	st := sessiondb.NewStore(db, func() time.Time { return time.Now().UTC() })
	ctx := context.Background()
	for _, r := range []*sessiondb.Record{
		{ID: "s1", Owner: "u1", Status: sessiondb.Running, ImageURI: "reg/a@sha256:aa", ImageDigest: "sha256:aa", WarmLayer: "w/1"},
		{ID: "s2", Owner: "u1", Status: sessiondb.Evicted, ImageURI: "reg/b:latest", ImageDigest: "sha256:bb"},
		{ID: "s3", Owner: "u2", Status: sessiondb.Lost, ImageURI: "reg/c@sha256:cc"},
		{ID: "s4", Owner: "u2", Status: sessiondb.Deleted, ImageURI: "reg/d@sha256:dd", ImageDigest: "sha256:dd", WarmLayer: "w/4"},
	} {
		if _, err := st.Create(ctx, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.ImagesInUse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b sessiondb.ImageUse) int { return strings.Compare(a.URI, b.URI) })
	want := []sessiondb.ImageUse{
		{URI: "reg/a@sha256:aa", Digest: "sha256:aa", WarmLayer: "w/1"},
		{URI: "reg/b:latest", Digest: "sha256:bb"},
		{URI: "reg/c@sha256:cc"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("images in use: %+v, want %+v", got, want)
	}
}

func ids(rs []*sessiondb.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func TestMoveRechecksWhenAnotherWriteLandsFirst(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	st := sessiondb.NewStore(db, func() time.Time { return time.Now().UTC() })
	ctx := context.Background()
	if _, err := st.Create(ctx, &sessiondb.Record{ID: "sess_race", Owner: "u1", Status: sessiondb.Running}, 0); err != nil {
		t.Fatal(err)
	}
	// The first move reads "running", then the session is deleted before it writes: its write
	// must fail, and its retry must see "deleted", which cannot become idle.
	deleted := make(chan struct{})
	calls := 0
	_, _, err := st.Move(ctx, "sess_race", sessiondb.Idle, "quiet", func(*sessiondb.Record) error {
		if calls++; calls == 1 {
			go func() {
				defer close(deleted)
				if _, _, err := st.Move(ctx, "sess_race", sessiondb.Deleted, "deleted", nil); err != nil {
					t.Errorf("delete: %v", err)
				}
			}()
			<-deleted
		}
		return nil
	})
	var me *sessiondb.MoveError
	if !errors.As(err, &me) || me.From != sessiondb.Deleted {
		t.Fatalf("move raced by a delete: %v, want a MoveError from deleted found on re-reading", err)
	}

	// Concurrent moves that may all happen each get written once, none lost.
	if _, err := st.Create(ctx, &sessiondb.Record{ID: "sess_many", Owner: "u1", Status: sessiondb.Running}, 0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			_, _, err := st.Move(ctx, "sess_many", sessiondb.Running, "placed", func(r *sessiondb.Record) error {
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
	_, _, err = st.Move(ctx, "sess_many", sessiondb.Running, "", func(r *sessiondb.Record) error {
		r.Owner = "someone else"
		return nil
	})
	if err == nil {
		t.Fatal("a move changed the owner")
	}
}

// MoveAt starts from the record as its creator wrote it, at the version Create returned: the
// write changes only the move's fields, and a record changed since, or a version that is not
// the record's, is read and checked as Move does.
func TestMoveAtStartsFromTheVersionCreateReturned(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	st := sessiondb.NewStore(db, func() time.Time { return time.Now().UTC() })
	ctx := context.Background()
	placed := func(r *sessiondb.Record) error {
		if r.HostID != "h1" || r.Status != sessiondb.Creating {
			return fmt.Errorf("record is %s on %q", r.Status, r.HostID)
		}
		r.SandboxID = "sbx-1"
		return nil
	}
	for _, c := range []struct {
		name string
		// meanwhile runs between the create and the move.
		meanwhile func(t *testing.T, id string)
		// version is what the mover holds, from the version Create returned.
		version  func(created time.Time) time.Time
		wantFrom sessiondb.Status
		// wantRead says that the move read the record rather than start from the held one.
		wantRead, wantErr bool
	}{
		{"unchanged since the create, the move writes its fields only, without a read", nil,
			func(v time.Time) time.Time { return v }, sessiondb.Creating, false, false},
		{"deleted since the create, the move reads the deletion and refuses", func(t *testing.T, id string) {
			if _, _, err := st.Move(ctx, id, sessiondb.Deleted, "deleted", nil); err != nil {
				t.Fatal(err)
			}
		}, func(v time.Time) time.Time { return v }, sessiondb.Deleted, true, true},
		{"a version that is not the record's is read and checked", nil,
			func(v time.Time) time.Time { return v.Add(time.Microsecond) }, sessiondb.Creating, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := "sess_at_" + strings.ReplaceAll(c.name[:20], " ", "_")
			created, err := st.Create(ctx, &sessiondb.Record{ID: id, Owner: "u1", Status: sessiondb.Creating, HostID: "h1", ImageURI: "img", SealedEnv: []byte("sealed")}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if c.meanwhile != nil {
				c.meanwhile(t, id)
			}
			held := &sessiondb.Record{ID: id, Status: sessiondb.Creating, HostID: "h1", ImageURI: "img"}
			from, moved, err := st.MoveAt(ctx, held, c.version(created), sessiondb.Running, "started", placed)
			if from != c.wantFrom || (err != nil) != c.wantErr {
				t.Fatalf("MoveAt = from %s, %v; want from %s, error %v", from, err, c.wantFrom, c.wantErr)
			}
			// The record returned is held as changed when the move did not read it: held has no
			// owner, the stored record has.
			if moved != nil && (moved.Owner != "") != c.wantRead {
				t.Fatalf("MoveAt read the record: %v, want %v", !c.wantRead, c.wantRead)
			}
			got, err := st.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if c.wantErr {
				if got.Status != sessiondb.Deleted {
					t.Fatalf("after a refused move: %s", got.Status)
				}
				return
			}
			if got.Status != sessiondb.Running || got.SandboxID != "sbx-1" || got.Owner != "u1" || string(got.SealedEnv) != "sealed" {
				t.Fatalf("after the move: %+v", got)
			}
		})
	}
}

// The attack: one user took every sandbox slot by creating sessions as fast as it could.
func TestCreateStopsAtTheOwnersLiveSessionLimit(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	st := sessiondb.NewStore(db, func() time.Time { return time.Now().UTC() })
	ctx := context.Background()
	const limit = 2
	for _, r := range []*sessiondb.Record{
		{ID: "u1-running", Owner: "u1", Status: sessiondb.Running},
		{ID: "u1-idle", Owner: "u1", Status: sessiondb.Idle},
		{ID: "u1-evicted", Owner: "u1", Status: sessiondb.Evicted},
		{ID: "u2-running", Owner: "u2", Status: sessiondb.Running},
	} {
		if _, err := st.Create(ctx, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := st.CountLive(ctx, "u1"); err != nil || n != 2 {
		t.Fatalf("CountLive(u1) = %d, %v; want 2 (evicted holds no sandbox)", n, err)
	}
	for _, c := range []struct {
		name string
		rec  *sessiondb.Record
		want func(error) bool
	}{
		{"an owner at the limit is refused", &sessiondb.Record{ID: "u1-third", Owner: "u1", Status: sessiondb.Creating},
			func(err error) bool { return errors.Is(err, sessiondb.ErrLimit) }},
		{"a repeated id at the limit is the existing session, not the limit", &sessiondb.Record{ID: "u1-running", Owner: "u1", Status: sessiondb.Creating},
			sessiondb.IsAlreadyExists},
		{"another owner is not affected", &sessiondb.Record{ID: "u2-second", Owner: "u2", Status: sessiondb.Creating},
			func(err error) bool { return err == nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := st.Create(ctx, c.rec, limit); !c.want(err) {
				t.Errorf("Create = %v", err)
			}
		})
	}

	// A move out of the live states gives a place back, and a move into them takes it again.
	for _, m := range []struct {
		to   sessiondb.Status
		want int64
	}{{sessiondb.Lost, 1}, {sessiondb.Resuming, 2}} {
		if _, _, err := st.Move(ctx, "u1-running", m.to, "", nil); err != nil {
			t.Fatal(err)
		}
		if n, err := st.CountLive(ctx, "u1"); err != nil || n != m.want {
			t.Fatalf("CountLive(u1) after a move to %s = %d, %v; want %d", m.to, n, err, m.want)
		}
	}

	// Creates racing at the limit: the count is in the transaction, so only the limit pass.
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for i := range 6 {
		wg.Go(func() {
			_, err := st.Create(ctx, &sessiondb.Record{ID: fmt.Sprintf("u3-%d", i), Owner: "u3", Status: sessiondb.Creating}, limit)
			switch {
			case err == nil:
				mu.Lock()
				created++
				mu.Unlock()
			case !errors.Is(err, sessiondb.ErrLimit):
				t.Errorf("racing create %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if n, err := st.CountLive(ctx, "u3"); err != nil || created != limit || n != limit {
		t.Errorf("racing creates: %d created, %d live (%v); want %d", created, n, err, limit)
	}
}

// Turns' usage adds up in the session's record, however many land at once.
func TestAddUsageSumsConcurrentTurns(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	st := sessiondb.NewStore(db, time.Now)
	ctx := context.Background()
	if _, err := st.Create(ctx, &sessiondb.Record{ID: "s1", Owner: "u1", Status: sessiondb.Running}, 0); err != nil {
		t.Fatal(err)
	}
	turn := sessiondb.Usage{InputTokens: 10, OutputTokens: 2, CacheReadTokens: 300, CacheWriteTokens: 4, CostUSD: 0.25}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- st.AddUsage(ctx, "s1", turn) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	r, err := st.Get(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	want := sessiondb.Usage{InputTokens: 40, OutputTokens: 8, CacheReadTokens: 1200, CacheWriteTokens: 16, CostUSD: 1}
	if r.Usage != want {
		t.Fatalf("usage %+v, want %+v", r.Usage, want)
	}
}
