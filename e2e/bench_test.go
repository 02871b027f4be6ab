package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
)

// The benchmarks come in pairs: an API call through the whole stack (HTTP, Connect, auth,
// validation, Firestore) and the bare Firestore operation it is built on, measured in the same
// run so that `make bench` can print their ratio.

type rawDoc struct {
	Title     string    `firestore:"title"`
	Prompt    string    `firestore:"prompt"`
	CreatedAt time.Time `firestore:"created_at"`
}

func BenchmarkRawFirestoreCreate(b *testing.B) {
	db, _ := testenv.Firestore(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		doc := rawDoc{Title: "bench", Prompt: "do the thing", CreatedAt: time.Now()}
		if _, err := db.Collection("raw").Doc(fmt.Sprintf("d%d", i)).Create(ctx, doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawFirestoreGet(b *testing.B) {
	db, _ := testenv.Firestore(b)
	ctx := context.Background()
	ref := db.Collection("raw").Doc("one")
	if _, err := ref.Create(ctx, rawDoc{Title: "bench"}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := ref.Get(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func benchClients(b *testing.B) (appv1connect.TaskServiceClient, string) {
	s := newStack(b)
	ctx := context.Background()
	profiles := appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	p, err := profiles.CreateProfile(ctx, connect.NewRequest(&appv1.CreateProfileRequest{Name: "bench", ImageId: "busybox"}))
	if err != nil {
		b.Fatal(err)
	}
	return appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin)), p.Msg.GetProfile().GetId()
}

func BenchmarkCreateTask(b *testing.B) {
	tasks, profileID := benchClients(b)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		_, err := tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{
			ProfileId: profileID, Prompt: new("do the thing"), Title: new("bench"),
		}))
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGetTask(b *testing.B) {
	tasks, profileID := benchClients(b)
	ctx := context.Background()
	created, err := tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{ProfileId: profileID, Title: new("bench")}))
	if err != nil {
		b.Fatal(err)
	}
	req := &appv1.GetTaskRequest{TaskId: created.Msg.GetTask().GetId()}
	b.ResetTimer()
	for b.Loop() {
		if _, err := tasks.GetTask(ctx, connect.NewRequest(req)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAuthCached is the interceptor's cost on the common path: a key verified recently.
func BenchmarkAuthCached(b *testing.B) {
	s := newStack(b)
	ctx := context.Background()
	if _, err := s.api.Authenticator().Authenticate(ctx, s.admin, ""); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.api.Authenticator().Authenticate(ctx, s.admin, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAuthUncached is the cost when the cache has expired: one Firestore read.
func BenchmarkAuthUncached(b *testing.B) {
	db, _ := testenv.Firestore(b)
	ctx := context.Background()
	authn := auth.NewAuthenticator(db, clock.Real{}, 0, slog.Default())
	keys := auth.NewKeys(db, authn)
	k, key, err := keys.Create(ctx, auth.NewKeyInput{Name: "bench", Kind: auth.KindPersonal, UserID: "u"}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	// The first use records last_used_at in the background; wait for it so the loop measures
	// verification alone.
	if _, err := authn.Authenticate(ctx, key, ""); err != nil {
		b.Fatal(err)
	}
	testkit.Eventually(b, 5*time.Second, "last_used_at recorded", func() (bool, string) {
		snap, err := db.Collection("apiKeys").Doc(k.ID).Get(ctx)
		return err == nil && snap.Data()["last_used_at"].(time.Time).Year() > 1, fmt.Sprint(err)
	})
	b.ResetTimer()
	for b.Loop() {
		if _, err := authn.Authenticate(ctx, key, ""); err != nil {
			b.Fatal(err)
		}
	}
}
