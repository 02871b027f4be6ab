package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/harnesses/oci"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/sandboxhosts/egressproxy"
)

// The attacks of docs/security.md "Harness egress: whose harness may open a session's network"
// (issue 23, item 11), replayed over the wire by non-admin keys.

// harnessEgressStack is a sandbox stack whose hosts' proxies reach api.anthropic.com (plain
// http), the host the claude-code module's native egress opens, at a loopback server standing
// for whatever host a harness's registrant picks; the module is published to the stack's
// registry at ref for users to register under names of their own.
func harnessEgressStack(t *testing.T) (s *sandboxStack, exfil *headerLog, ref string) {
	mods := testenv.RequirePlugins(t)
	exfil = newHeaderLog(t)
	s = newSandboxStack(t, 1, func(sb *testenv.Sandboxes) {
		sb.EgressResolve = map[string]string{"api.anthropic.com:80": exfil.Listener.Addr().String()}
	})
	ref = s.sb.Registry + "/plugins/egress-harness:v1"
	if _, err := oci.Publish(t.Context(), mods["claude-code"].Wasm, ref); err != nil {
		t.Fatal(err)
	}
	return s, exfil, ref
}

func (s *sandboxStack) harnesses(key string) appv1connect.HarnessCatalogServiceClient {
	return appv1connect.NewHarnessCatalogServiceClient(httpClient, s.rpcURL(), auth.WithKey(key))
}

// profileOf creates a profile of key's whose network allows nothing beyond what its harness
// opens, and returns its id.
func (s *sandboxStack) profileOf(t *testing.T, key, name string) string {
	t.Helper()
	c := appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), auth.WithKey(key))
	p, err := c.CreateProfile(t.Context(), connect.NewRequest(&appv1.CreateProfileRequest{Name: name, ImageId: s.sb.Image, Harness: ptr("bash")}))
	if err != nil {
		t.Fatal(err)
	}
	return p.Msg.GetProfile().GetId()
}

// taskSession starts key's task on profile with harness and no prompt, and returns its session.
func (s *sandboxStack) taskSession(t *testing.T, key, profile, harness string) string {
	t.Helper()
	c := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(key))
	resp, err := c.CreateTask(t.Context(), connect.NewRequest(&appv1.CreateTaskRequest{ProfileId: profile, Harness: &harness, DeferInitialPrompt: true}))
	if err != nil {
		t.Fatalf("task on %s with %s: %v", profile, harness, err)
	}
	return resp.Msg.GetTask().GetSessions()[0].GetSessionId()
}

// reaches says whether session's sandbox gets an answer from the harness's host, which its
// proxy otherwise refuses with a 403.
func (s *sandboxStack) reaches(t *testing.T, session string) bool {
	t.Helper()
	out := s.sh(t, session, `wget -q -O- http://api.anthropic.com/v1/messages 2>&1; echo "exit=$?"`)
	switch {
	case strings.Contains(out, `{"stolen":true}`):
		return true
	case strings.Contains(out, "403"):
		return false
	}
	t.Fatalf("the dial to the harness's host answered %q: neither reached nor refused", out)
	return false
}

// The attack: bob registers a harness whose descriptor opens a host of his, and runs a task on
// alice's profile with it; his harness's egress used to join the session's network, widening
// what her profile (and whatever secrets it holds) may reach. Now it does not: the dial is
// refused and audited, and nothing reaches the host. His own sessions and tasks on his own
// profiles keep his harness's egress, as his own profile could open those hosts anyway.
func TestSecurityAnotherUsersHarnessEgressDoesNotWidenAProfilesNetwork(t *testing.T) {
	s, exfil, ref := harnessEgressStack(t)
	aliceKey, bobKey := s.mintKey(t, "alice@example.com", false), s.mintKey(t, "bob@example.com", false)
	alices, bobs := s.profileOf(t, aliceKey, "alice's"), s.profileOf(t, bobKey, "bob's")
	if _, err := s.harnesses(bobKey).RegisterHarness(t.Context(), connect.NewRequest(&appv1.RegisterHarnessRequest{Name: "bobs-agent", OciRef: ref})); err != nil {
		t.Fatalf("bob registers his harness: %v", err)
	}

	attack := s.taskSession(t, bobKey, alices, "bobs-agent")
	if s.reaches(t, attack) {
		t.Fatal("bob's task on alice's profile reached his harness's host")
	}
	if n := len(exfil.requests()); n != 0 {
		t.Fatalf("bob's host got %d requests from a session of alice's profile", n)
	}
	s.eventsUntil(t, attack, func(events []*appv1.SessionEvent) bool {
		for _, e := range events {
			var c egressproxy.Connection
			if json.Unmarshal([]byte(e.GetPayloadJson()), &c) == nil && c.Host == "api.anthropic.com" && c.Decision == egressproxy.Denied {
				return true
			}
		}
		return false
	}, "net.connection")

	for _, tc := range []struct {
		name    string
		session func() string
	}{
		{"bob's own session", func() string {
			resp, err := s.sessions(bobKey).CreateSession(context.Background(), connect.NewRequest(&appv1.CreateSessionRequest{Harness: ptr("bobs-agent")}))
			if err != nil {
				t.Fatal(err)
			}
			return resp.Msg.GetSessionId()
		}},
		{"bob's task on his own profile", func() string { return s.taskSession(t, bobKey, bobs, "bobs-agent") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(exfil.requests())
			if !s.reaches(t, tc.session()) || len(exfil.requests()) != before+1 {
				t.Fatal("bob's harness's egress does not open where bob decides the network")
			}
		})
	}
}

// The attack: a non-admin registers a harness with egress, and everyone who picks it from the
// catalog gets a session open to its registrant's hosts. Now that egress is pending until an
// admin approves it, by registering it again from the same artifact: before that, carol's
// session with bob's harness and bob's task on alice's profile do not reach its host; after,
// both do. An approval of anything but the artifact registered is refused with a clear error.
func TestSecurityANonAdminsHarnessEgressIsPendingUntilAnAdminApprovesIt(t *testing.T) {
	s, exfil, ref := harnessEgressStack(t)
	ctx := t.Context()
	aliceKey, bobKey, carolKey := s.mintKey(t, "alice@example.com", false), s.mintKey(t, "bob@example.com", false), s.mintKey(t, "carol@example.com", false)
	alices := s.profileOf(t, aliceKey, "alice's")
	register := func(key, name, ref string) error {
		_, err := s.harnesses(key).RegisterHarness(ctx, connect.NewRequest(&appv1.RegisterHarnessRequest{Name: name, OciRef: ref}))
		return err
	}
	if err := register(bobKey, "bobs-agent", ref); err != nil {
		t.Fatalf("bob registers his harness: %v", err)
	}
	carolSession := func() string {
		resp, err := s.sessions(carolKey).CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{Harness: ptr("bobs-agent")}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.GetSessionId()
	}
	if s.reaches(t, carolSession()) || s.reaches(t, s.taskSession(t, bobKey, alices, "bobs-agent")) {
		t.Fatal("a pending harness's egress opened outside its registrant's own network")
	}
	if n := len(exfil.requests()); n != 0 {
		t.Fatalf("the pending harness's host got %d requests", n)
	}

	// What is approved is what was registered.
	mods := testenv.RequirePlugins(t)
	moved := s.sb.Registry + "/plugins/moved:v1"
	if _, err := oci.Publish(ctx, mods["claude-code"].Wasm, moved); err != nil {
		t.Fatal(err)
	}
	if err := register(bobKey, "moved-agent", moved); err != nil {
		t.Fatal(err)
	}
	if _, err := oci.Publish(ctx, mods["bash"].Wasm, moved); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key, harness, ref string
		code                    connect.Code
		says                    string
	}{
		{"bob approving his own", bobKey, "bobs-agent", ref, connect.CodeAlreadyExists, "registered already"},
		{"another artifact", s.admin, "bobs-agent", moved, connect.CodeAlreadyExists, "registering it again from that oci_ref"},
		{"a tag moved since", s.admin, "moved-agent", moved, connect.CodeFailedPrecondition, "register it again"},
		{"a built-in", s.admin, "claude-code", ref, connect.CodeAlreadyExists, "built-in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := register(tc.key, tc.harness, tc.ref)
			testenv.WantCode(t, err, tc.code)
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("the refusal does not say %q: %v", tc.says, err)
			}
		})
	}

	if err := register(s.admin, "bobs-agent", ref); err != nil {
		t.Fatalf("the admin approves bob's harness: %v", err)
	}
	if err := register(s.admin, "bobs-agent", ref); err != nil {
		t.Fatalf("approving again: %v", err)
	}
	if !s.reaches(t, carolSession()) || !s.reaches(t, s.taskSession(t, bobKey, alices, "bobs-agent")) {
		t.Fatal("an approved harness's egress does not open")
	}
}
