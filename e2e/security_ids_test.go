package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/hangar-dev/hangar/composition"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// The attack: bob creates (and deletes, so the id stays taken) the requested_session_id alice's
// script uses, before she does. Her creates used to fail with already_exists forever.
func TestSecurityRequestedSessionIDsAreEachOwnersOwn(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	alice, bob := s.sessions(s.mintKey(t, "alice@example.com", false)), s.sessions(s.mintKey(t, "bob@example.com", false))

	squat, err := bob.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{RequestedSessionId: ptr("nightly-build")}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.DeleteSession(ctx, connect.NewRequest(&appv1.DeleteSessionRequest{SessionId: squat.Msg.GetSessionId()})); err != nil {
		t.Fatal(err)
	}

	mine, err := alice.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{RequestedSessionId: ptr("nightly-build")}))
	if err != nil {
		t.Fatalf("alice's create after bob's squat: %v", err)
	}
	if mine.Msg.GetSessionId() != "nightly-build" || mine.Msg.GetStatus() != "running" {
		t.Fatalf("alice's session: %v", mine.Msg)
	}
	// Her retry is the same session; she names it by the id she asked for.
	again, err := alice.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{RequestedSessionId: ptr("nightly-build")}))
	if err != nil || again.Msg.GetSessionId() != "nightly-build" {
		t.Fatalf("alice's retry: %v, %v", again, err)
	}
	out, err := collectExec(ctx, alice, &appv1.ExecRequest{SessionId: "nightly-build", Command: ptr("echo hers")})
	if err != nil || out.stdout != "hers\n" {
		t.Fatalf("exec in alice's session by its requested id: %q, %v", out.stdout, err)
	}
	got, err := alice.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: "nightly-build"}))
	if err != nil || got.Msg.GetSession().GetId() != "nightly-build" || got.Msg.GetSession().GetStatus() != "running" {
		t.Fatalf("alice's GetSession: %v, %v", got, err)
	}

	// Others see the session by its record id, which no user chose; bob learns nothing about it.
	list, err := s.svc.ListSessions(ctx, connect.NewRequest(&emptypb.Empty{}))
	if err != nil || len(list.Msg.GetSessions()) != 1 {
		t.Fatalf("the admin's list: %v, %v", list, err)
	}
	recordID := list.Msg.GetSessions()[0].GetSession().GetId()
	if !ids.Valid("sess", recordID) {
		t.Fatalf("the admin sees alice's session as %q, not by a record id", recordID)
	}
	if _, err := s.svc.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: recordID})); err != nil {
		t.Fatalf("the admin's GetSession by the record id: %v", err)
	}
	for _, id := range []string{"nightly-build", recordID, "never-used"} {
		_, err := bob.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: id}))
		testenv.WantCode(t, err, connect.CodeNotFound)
		if want := fmt.Sprintf("session %q not found", id); !strings.Contains(err.Error(), want) {
			t.Fatalf("bob's GetSession(%s) says %q, want only %q", id, err, want)
		}
	}
	// Bob's own id of the same name is his again, and a new session.
	his, err := bob.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{RequestedSessionId: ptr("nightly-build")}))
	if err != nil || his.Msg.GetStatus() != "deleted" {
		t.Fatalf("bob's retry of his deleted id answers his deleted session: %v, %v", his, err)
	}

	// A session created before requested ids were scoped has the id it requested as its record
	// id: it stays its owner's by that name, for reads and for a retried create, and no one
	// else's.
	aliceUser, err := s.api.Users().EnsureHuman(ctx, "alice@example.com", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	legacy := &sessiondb.Record{ID: "legacy-build", Owner: aliceUser.ID, Status: sessiondb.Evicted, ImageURI: s.sb.Image, Mode: "sandbox"}
	if _, err := sessiondb.NewStore(s.sb.DB, time.Now).Create(ctx, legacy, 0); err != nil {
		t.Fatal(err)
	}
	retried, err := alice.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{RequestedSessionId: ptr("legacy-build")}))
	if err != nil || retried.Msg.GetSessionId() != "legacy-build" || retried.Msg.GetStatus() != "evicted" {
		t.Fatalf("alice's retry of a create made before the change: %v, %v", retried, err)
	}
	if got, err := alice.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: "legacy-build"})); err != nil || got.Msg.GetSession().GetStatus() != "evicted" {
		t.Fatalf("alice's read of her earlier session: %v, %v", got, err)
	}
	_, err = bob.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: "legacy-build"}))
	testenv.WantCode(t, err, connect.CodeNotFound)
}

// The attack: a task's session id was ids.FromKey("sess", owner + request id), computable from
// the owner's user id (shown in listings) and a request id (a scheduled run's is derived from
// its automation and delivery, which every user can read), so bob could make that session first
// and every run of alice's automation failed.
func TestSecurityTaskSessionIDsCannotBePredicted(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	aliceKey := s.mintKey(t, "alice@example.com", false)
	bob := s.sessions(s.mintKey(t, "bob@example.com", false))
	aliceUser, err := s.api.Users().EnsureHuman(ctx, "alice@example.com", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	predicted := ids.FromKey("sess", aliceUser.ID+"\x00"+"run-42")
	if _, err := bob.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{RequestedSessionId: &predicted})); err != nil {
		t.Fatal(err)
	}

	profiles := appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), auth.WithKey(aliceKey))
	p, err := profiles.CreateProfile(ctx, connect.NewRequest(&appv1.CreateProfileRequest{Name: "shell", ImageId: s.sb.Image, Harness: ptr("bash")}))
	if err != nil {
		t.Fatal(err)
	}
	tasks := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(aliceKey))
	req := &appv1.CreateTaskRequest{ProfileId: p.Msg.GetProfile().GetId(), Prompt: ptr("echo hi"), RequestId: ptr("run-42"), DeferInitialPrompt: true}
	created, err := tasks.CreateTask(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("alice's task after bob's squat: %v", err)
	}
	sid := created.Msg.GetTask().GetSessions()[0].GetSessionId()
	if sid == predicted || !ids.Valid("sess", sid) {
		t.Fatalf("the task's session id %q is the predictable one, or not a record id", sid)
	}
	retried, err := tasks.CreateTask(ctx, connect.NewRequest(req))
	if err != nil || retried.Msg.GetTask().GetId() != created.Msg.GetTask().GetId() || retried.Msg.GetTask().GetSessions()[0].GetSessionId() != sid {
		t.Fatalf("the retried task: %v, %v", retried, err)
	}
	// Bob cannot reach it by its id either.
	_, err = bob.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: sid}))
	testenv.WantCode(t, err, connect.CodeNotFound)
}

// The attack: ids that are not document ids ("../x") reached Firestore paths and came back as
// internal errors (a 500), and Exec arguments past the kernel's limit failed inside the sandbox
// as internal.
func TestSecurityMalformedIDsAndHugeArgumentsAreInvalidArgument(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	c := func() (appv1connect.TaskServiceClient, appv1connect.ProfileServiceClient, appv1connect.HarnessCatalogServiceClient, appv1connect.ApiKeyServiceClient, appv1connect.AutomationServiceClient) {
		o := auth.WithKey(s.admin)
		return appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), o), appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), o),
			appv1connect.NewHarnessCatalogServiceClient(httpClient, s.rpcURL(), o), appv1connect.NewApiKeyServiceClient(httpClient, s.rpcURL(), o),
			appv1connect.NewAutomationServiceClient(httpClient, s.rpcURL(), o)
	}
	tasks, profiles, harnesses, keys, automations := c()
	live := s.create(t, nil)
	for _, id := range []string{"../x", "a/b", "__x__", "..", strings.Repeat("a", ids.MaxLen+1)} {
		for _, tc := range []struct {
			name, field string
			call        func() error
		}{
			{"GetSession", "session_id", func() error {
				_, err := s.svc.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: id}))
				return err
			}},
			{"DeleteSession", "session_id", func() error {
				_, err := s.svc.DeleteSession(ctx, connect.NewRequest(&appv1.DeleteSessionRequest{SessionId: id}))
				return err
			}},
			{"Exec", "session_id", func() error {
				_, err := collectExec(ctx, s.svc, &appv1.ExecRequest{SessionId: id, Command: ptr("true")})
				return err
			}},
			{"CopyFiles", "target_session_id", func() error {
				_, err := s.svc.CopyFiles(ctx, connect.NewRequest(&appv1.CopyFilesRequest{SourceSessionId: live, TargetSessionId: id, Paths: []string{"/etc/hostname"}}))
				return err
			}},
			{"GetTask", "task_id", func() error {
				_, err := tasks.GetTask(ctx, connect.NewRequest(&appv1.GetTaskRequest{TaskId: id}))
				return err
			}},
			{"GetTask by session", "session_id", func() error {
				_, err := tasks.GetTask(ctx, connect.NewRequest(&appv1.GetTaskRequest{SessionId: id}))
				return err
			}},
			{"GetProfile", "id", func() error {
				_, err := profiles.GetProfile(ctx, connect.NewRequest(&appv1.GetProfileRequest{Id: id}))
				return err
			}},
			{"GetHarness", "name", func() error {
				_, err := harnesses.GetHarness(ctx, connect.NewRequest(&appv1.GetHarnessRequest{Name: id}))
				return err
			}},
			{"RevokeApiKey", "id", func() error {
				_, err := keys.RevokeApiKey(ctx, connect.NewRequest(&appv1.RevokeApiKeyRequest{Id: id}))
				return err
			}},
			{"GetAutomation", "id", func() error {
				_, err := automations.GetAutomation(ctx, connect.NewRequest(&appv1.GetAutomationRequest{Lookup: &appv1.GetAutomationRequest_Id{Id: id}}))
				return err
			}},
		} {
			t.Run(tc.name+" "+id[:min(len(id), 8)], func(t *testing.T) {
				if fields := testenv.ViolatedFields(t, tc.call()); len(fields) != 1 || fields[0] != tc.field {
					t.Fatalf("violations %v, want %s", fields, tc.field)
				}
			})
		}
	}

	for _, tc := range []struct {
		name, field string
		req         *appv1.ExecRequest
	}{
		{"an argv item past MAX_ARG_STRLEN", "argv", &appv1.ExecRequest{SessionId: live, Argv: []string{"echo", strings.Repeat("a", 128<<10)}}},
		{"a command past MAX_ARG_STRLEN", "command", &appv1.ExecRequest{SessionId: live, Command: ptr("echo " + strings.Repeat("a", 128<<10))}},
		{"an env value past MAX_ARG_STRLEN", "env", &appv1.ExecRequest{SessionId: live, Command: ptr("true"), Env: map[string]string{"BIG": strings.Repeat("a", 128<<10)}}},
		{"arguments past the total", "argv", &appv1.ExecRequest{SessionId: live, Argv: append([]string{"echo"}, strings.Split(strings.Repeat(strings.Repeat("a", 100<<10)+" ", 12), " ")...)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := collectExec(ctx, s.svc, tc.req)
			if fields := testenv.ViolatedFields(t, err); len(fields) == 0 || fields[0] != tc.field {
				t.Fatalf("violations %v (%v), want %s", fields, err, tc.field)
			}
		})
	}
	if got := s.sh(t, live, "echo still fine"); got != "still fine\n" {
		t.Fatalf("the session after refused execs: %q", got)
	}
}

// The attack: every request with an unknown API key cost a Firestore read, so a client could
// make the database do unbounded work (and pay for it) without any key.
func TestSecurityUnknownKeysAreCachedAndRateLimited(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	profiles := func(key string) error {
		_, err := appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), auth.WithKey(key)).ListProfiles(ctx, connect.NewRequest(&appv1.ListProfilesRequest{}))
		return err
	}
	// The admin's key is verified (and cached) before the flood.
	if err := profiles(s.admin); err != nil {
		t.Fatal(err)
	}
	authn := s.api.Authenticator()

	bad := fakeKey()
	before := authn.Lookups()
	for range 50 {
		testenv.WantCode(t, profiles(bad), connect.CodeUnauthenticated)
	}
	if n := authn.Lookups() - before; n != 1 {
		t.Fatalf("one bad key presented 50 times cost %d reads, want 1", n)
	}

	before = authn.Lookups()
	began := time.Now()
	limited := 0
	for range 350 {
		switch err := profiles(fakeKey()); connect.CodeOf(err) {
		case connect.CodeResourceExhausted:
			limited++
		case connect.CodeUnauthenticated:
		default:
			t.Fatalf("a bad key: %v", err)
		}
	}
	// The address's limit refills ten a second while the flood runs, however slow the machine.
	refilled := int64(10*time.Since(began).Seconds()) + 1
	if n := authn.Lookups() - before; limited == 0 || n > 300+refilled {
		t.Fatalf("350 new bad keys: %d reads, %d refused as resource_exhausted; want at most the address's burst (300) and its refill (%d) read", n, limited, refilled)
	}
	if err := profiles(s.admin); err != nil {
		t.Fatalf("a verified key during the flood: %v", err)
	}
}

// fakeKey is a well-formed API key that exists nowhere.
func fakeKey() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	b := make([]byte, 44)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "hgr_" + string(b[:12]) + "_" + string(b[12:])
}

// The attack: a client that sends its headers a byte at a time (slowloris) holds a connection,
// and a goroutine, for as long as it likes.
func TestSecuritySlowHeadersAreCutOff(t *testing.T) {
	db, _ := testenv.Firestore(t)
	a := composition.New(composition.Deps{DB: db, Config: config.Default()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := composition.NewServer(a.Handler())
	if srv.ReadHeaderTimeout != composition.ReadHeaderTimeout || srv.IdleTimeout == 0 || srv.MaxHeaderBytes == 0 {
		t.Fatalf("server timeouts: header %s, idle %s, max header bytes %d", srv.ReadHeaderTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
	srv.ReadHeaderTimeout = 200 * time.Millisecond // the test's, so it does not wait 10 s
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(conn).ReadString('\n')
		closed <- err
	}()
	// Dribble a header line a byte at a time, for far longer than the timeout.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-closed:
			// The server answers 408 or just closes; either way the request never completed.
			if err != nil && !errors.Is(err, io.EOF) && !isReset(err) {
				t.Fatalf("reading the cut connection: %v", err)
			}
			return
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := conn.Write([]byte("x")); err != nil {
			return
		}
	}
	t.Fatal("the server still waits for headers dribbled for 30 s")
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne)
}
