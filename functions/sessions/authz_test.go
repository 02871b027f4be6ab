package sessions_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"gocloud.dev/blob/memblob"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/hangar-dev/hangar/functions/sessions"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/records/fleet"
	"github.com/hangar-dev/hangar/records/sessiondb"
	"github.com/hangar-dev/hangar/sandboxhosts/hostclient"
)

// The people of these tests: two users and an admin.
var (
	alice = auth.Principal{UserID: "user_alice", Kind: "personal"}
	bob   = auth.Principal{UserID: "user_bob", Kind: "personal"}
	admin = auth.Principal{UserID: "user_admin", Kind: "personal", Admin: true}
)

// newService is SessionService over a Firestore project of its own holding alice's running
// session "sess_alice" and her deleted one "sess_gone". No host runs: every check these tests
// make comes before the service would reach one.
func newService(t *testing.T) *sessions.Service {
	t.Helper()
	t.Parallel()
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	svc := sessions.New(sessions.Deps{
		DB: db, Hosts: hostclient.New(fleet.New(db, func() time.Time { return now }, time.Minute), "host-token"),
		Sealer: sealer, Bucket: memblob.OpenBucket(nil), Users: auth.NewUsers(db), Clock: clock.NewFake(now),
		Limits: config.Default().Limits,
	})
	store := sessiondb.NewStore(db, func() time.Time { return now })
	for _, rec := range []*sessiondb.Record{
		{ID: "sess_alice", Owner: alice.UserID, Status: sessiondb.Running, HostID: "host_gone"},
		{ID: "sess_gone", Owner: alice.UserID, Status: sessiondb.Deleted},
	} {
		if _, err := store.Create(context.Background(), rec, 0); err != nil {
			t.Fatal(err)
		}
	}
	return svc
}

func as(p auth.Principal) context.Context { return auth.WithPrincipal(context.Background(), p) }

func TestAnotherUsersSessionIsNotFoundForEveryMethod(t *testing.T) {
	svc := newService(t)
	const id = "sess_alice"
	calls := map[string]func(ctx context.Context) error{
		"GetSession": func(ctx context.Context) error {
			_, err := svc.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: id}))
			return err
		},
		"DeleteSession": func(ctx context.Context) error {
			_, err := svc.DeleteSession(ctx, connect.NewRequest(&appv1.DeleteSessionRequest{SessionId: id}))
			return err
		},
		"ListSessionEvents": func(ctx context.Context) error {
			_, err := svc.ListSessionEvents(ctx, connect.NewRequest(&appv1.ListSessionEventsRequest{SessionId: id}))
			return err
		},
		"GetLog": func(ctx context.Context) error {
			_, err := svc.GetLog(ctx, connect.NewRequest(&appv1.GetLogRequest{SessionId: id}))
			return err
		},
		"SendPrompt": func(ctx context.Context) error {
			_, err := svc.SendPrompt(ctx, connect.NewRequest(&appv1.SendPromptRequest{SessionId: id, Text: "hi"}))
			return err
		},
		"EditQueuedPrompt": func(ctx context.Context) error {
			_, err := svc.EditQueuedPrompt(ctx, connect.NewRequest(&appv1.EditQueuedPromptRequest{SessionId: id, PromptId: "p", Text: "hi"}))
			return err
		},
		"DequeueQueuedPrompt": func(ctx context.Context) error {
			_, err := svc.DequeueQueuedPrompt(ctx, connect.NewRequest(&appv1.DequeueQueuedPromptRequest{SessionId: id, PromptId: "p"}))
			return err
		},
		"Interrupt": func(ctx context.Context) error {
			_, err := svc.Interrupt(ctx, connect.NewRequest(&appv1.InterruptRequest{SessionId: id}))
			return err
		},
		"CompleteToolCall": func(ctx context.Context) error {
			_, err := svc.CompleteToolCall(ctx, connect.NewRequest(&appv1.CompleteToolCallRequest{SessionId: id, ToolCallId: "c", ResultJson: "{}"}))
			return err
		},
		"CancelExec": func(ctx context.Context) error {
			_, err := svc.CancelExec(ctx, connect.NewRequest(&appv1.CancelExecRequest{SessionId: id, ExecId: "e"}))
			return err
		},
		"CopyFiles from it": func(ctx context.Context) error {
			_, err := svc.CopyFiles(ctx, connect.NewRequest(&appv1.CopyFilesRequest{SourceSessionId: id, TargetSessionId: id, Paths: []string{"/root"}}))
			return err
		},
		"Snapshot": func(ctx context.Context) error {
			_, err := svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: id}))
			return err
		},
		"Resume": func(ctx context.Context) error {
			_, err := svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: id}))
			return err
		},
		"EvictLocal": func(ctx context.Context) error {
			_, err := svc.EvictLocal(ctx, connect.NewRequest(&appv1.EvictLocalRequest{SessionId: id}))
			return err
		},
		"EnsureIde": func(ctx context.Context) error {
			_, err := svc.EnsureIde(ctx, connect.NewRequest(&appv1.EnsureIdeRequest{SessionId: id}))
			return err
		},
		"EnsureBrowser": func(ctx context.Context) error {
			_, err := svc.EnsureBrowser(ctx, connect.NewRequest(&appv1.EnsureBrowserRequest{SessionId: id}))
			return err
		},
		"GetCowState": func(ctx context.Context) error {
			_, err := svc.GetCowState(ctx, connect.NewRequest(&appv1.GetCowStateRequest{SessionId: id}))
			return err
		},
		"ListCheckpoints": func(ctx context.Context) error {
			_, err := svc.ListCheckpoints(ctx, connect.NewRequest(&appv1.ListCheckpointsRequest{SessionId: id}))
			return err
		},
		"CreateArtifactFromPath": func(ctx context.Context) error {
			_, err := svc.CreateArtifactFromPath(ctx, connect.NewRequest(&appv1.CreateArtifactFromPathRequest{SessionId: id, Path: "/root/f"}))
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			// not_found, never permission_denied: an id must not reveal that the session exists.
			testenv.WantCode(t, call(as(bob)), connect.CodeNotFound)
		})
	}
}

func TestOwnerAndAdminSeeASessionThatOthersDoNot(t *testing.T) {
	svc := newService(t)
	for _, tc := range []struct {
		name   string
		caller auth.Principal
		id     string
		want   connect.Code // 0 for success
	}{
		{"the owner sees her session", alice, "sess_alice", 0},
		{"an admin sees anyone's session", admin, "sess_alice", 0},
		{"another user does not", bob, "sess_alice", connect.CodeNotFound},
		{"nobody sees a deleted session", alice, "sess_gone", connect.CodeNotFound},
		{"an unknown id is the same not_found", bob, "sess_nobody", connect.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := svc.GetSession(as(tc.caller), connect.NewRequest(&appv1.GetSessionRequest{SessionId: tc.id}))
			if tc.want != 0 {
				testenv.WantCode(t, err, tc.want)
				return
			}
			if err != nil || resp.Msg.GetSession().GetId() != tc.id {
				t.Fatalf("GetSession(%s) = %v, %v", tc.id, resp, err)
			}
		})
	}
}

func TestListSessionsShowsTheCallersOwnUnlessAdmin(t *testing.T) {
	svc := newService(t)
	for _, tc := range []struct {
		name   string
		caller auth.Principal
		want   int
	}{{"the owner lists her live session", alice, 1}, {"another user lists none", bob, 0}, {"an admin lists everyone's", admin, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := svc.ListSessions(as(tc.caller), connect.NewRequest(&emptypb.Empty{}))
			if err != nil {
				t.Fatal(err)
			}
			if got := len(resp.Msg.GetSessions()); got != tc.want {
				t.Fatalf("%d sessions listed, want %d: %v", got, tc.want, resp.Msg.GetSessions())
			}
		})
	}
}
