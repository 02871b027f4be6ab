package e2e

import (
	"context"
	"errors"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
)

// putOrgSecret puts an org secret as the stack's admin.
func (s *stack) putOrgSecret(t testing.TB, name, value string) {
	t.Helper()
	c := appv1connect.NewOrgSecretServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	if _, err := c.PutOrgSecret(context.Background(), connect.NewRequest(&appv1.PutOrgSecretRequest{Name: name, Value: value})); err != nil {
		t.Fatal(err)
	}
}

// noEventHolds fails when any event of the session carries secret.
func (s *sandboxStack) noEventHolds(t *testing.T, session, secret string) {
	t.Helper()
	for _, e := range s.listEvents(t, session) {
		if strings.Contains(e.GetPayloadJson(), secret) {
			t.Fatalf("event %s carries the secret: %s", e.GetKind(), e.GetPayloadJson())
		}
	}
}

func TestRouterKeysReachTheHarnessEnv(t *testing.T) {
	testenv.RequirePlugins(t)
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) {
		sb.Config.ModelRouters = []config.ModelRouter{
			{ID: "lab", Label: "Lab", BaseURL: "http://127.0.0.1:9/v1", Protocols: []string{"anthropic"}, CredentialSecret: "lab/key"},
			{ID: "oa", Label: "OA", BaseURL: "http://127.0.0.1:9/oa", Protocols: []string{"openai-responses"}, CredentialSecret: "oa/key"},
			{ID: "keyless", Label: "Keyless", BaseURL: "http://127.0.0.1:9/k", Protocols: []string{"anthropic"}, CredentialSecret: "not/put"},
		}
	})
	s.putOrgSecret(t, "lab/key", "sk-lab-secret")
	s.putOrgSecret(t, "oa/key", "sk-oa-secret")

	// An org Anthropic key among the session's secrets is not sent to the router.
	id := s.create(t, &appv1.CreateSessionRequest{Harness: ptr("claude-code"), ModelRouter: ptr("lab"), Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-org"}})
	// The key reaches the sandbox only as a placeholder, which the egress proxy swaps for it.
	if got := s.sh(t, id, `echo "$ANTHROPIC_BASE_URL $ANTHROPIC_AUTH_TOKEN [$ANTHROPIC_API_KEY]"`); !regexp.MustCompile(`^http://127\.0\.0\.1:9/v1 hangar-placeholder-[0-9a-f]{32} \[\]\n$`).MatchString(got) {
		t.Fatalf("anthropic router env: %q", got)
	}
	s.noEventHolds(t, id, "sk-lab-secret")
	id = s.create(t, &appv1.CreateSessionRequest{Harness: ptr("codex"), ModelRouter: ptr("oa")})
	if got := s.sh(t, id, `echo "$OPENAI_BASE_URL $OPENAI_API_KEY"`); !regexp.MustCompile(`^http://127\.0\.0\.1:9/oa hangar-placeholder-[0-9a-f]{32}\n$`).MatchString(got) {
		t.Fatalf("openai router env: %q", got)
	}
	_, err := s.svc.CreateSession(context.Background(), connect.NewRequest(&appv1.CreateSessionRequest{Harness: ptr("claude-code"), ModelRouter: ptr("keyless")}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	if !strings.Contains(err.Error(), `"not/put"`) {
		t.Fatalf("the error does not name the missing secret: %v", err)
	}
}

func TestProfileSecretsReachTheTaskSession(t *testing.T) {
	testenv.RequirePlugins(t)
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	s.putOrgSecret(t, "gh/token", "ghp-profile-secret")
	profiles := appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	tasks := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	profile := func(name string, secrets ...*appv1.ProfileSecret) string {
		p, err := profiles.CreateProfile(ctx, connect.NewRequest(&appv1.CreateProfileRequest{Name: name, ImageId: s.sb.Image, Harness: ptr("bash"), Secrets: secrets}))
		if err != nil {
			t.Fatal(err)
		}
		return p.Msg.GetProfile().GetId()
	}

	created, err := tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{
		ProfileId: profile("with a secret", &appv1.ProfileSecret{Ref: "gh/token", EnvVar: "GH_TOKEN"}),
		Prompt:    ptr(`echo "token=$GH_TOKEN"`),
	}))
	if err != nil {
		t.Fatal(err)
	}
	sid := created.Msg.GetTask().GetSessions()[0].GetSessionId()
	events := s.waitEvent(t, sid, "turn.done", promptOf(t, s, sid))
	if !strings.Contains(kindsOf(events), "assistant.message") || events[2].Text != "token=ghp-profile-secret" {
		t.Fatalf("the task's session did not get the profile's secret: %+v", events)
	}
	if strings.Contains(created.Msg.GetTask().GetSourceJson(), "ghp-profile-secret") {
		t.Fatal("the task's source_json holds the secret's value")
	}

	// A secret in mode "proxy" reaches the session only as a placeholder.
	created, err = tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{
		ProfileId: profile("with a proxied secret", &appv1.ProfileSecret{Ref: "gh/token", EnvVar: "GH_TOKEN", Mode: "proxy", AllowHosts: []string{"api.github.com"}}),
		Prompt:    ptr(`echo "token=$GH_TOKEN"`),
	}))
	if err != nil {
		t.Fatal(err)
	}
	sid = created.Msg.GetTask().GetSessions()[0].GetSessionId()
	events = s.waitEvent(t, sid, "turn.done", promptOf(t, s, sid))
	if len(events) < 3 || !strings.HasPrefix(events[2].Text, "token=hangar-placeholder-") {
		t.Fatalf("the task's session did not get a placeholder for the proxied secret: %+v", events)
	}
	s.noEventHolds(t, sid, "ghp-profile-secret")

	for _, tc := range []struct {
		name   string
		secret *appv1.ProfileSecret
		says   string
	}{
		{"a secret nobody put", &appv1.ProfileSecret{Ref: "npm/missing", EnvVar: "NPM_TOKEN"}, `"npm/missing"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{ProfileId: profile(tc.name, tc.secret), Prompt: ptr("true")}))
			testenv.WantCode(t, err, connect.CodeFailedPrecondition)
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %v does not say %s", err, tc.says)
			}
		})
	}
}

// fakeClaude stands in for Claude Code: it answers, in its stream-json, with the OAuth token
// and API key it was started with.
const fakeClaude = `#!/bin/sh
cat >/dev/null
printf '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"token=%s key=[%s]"}]}}\n' "$CLAUDE_CODE_OAUTH_TOKEN" "$ANTHROPIC_API_KEY"
`

// fakeCodex stands in for Codex: it answers, in its JSONL, with its auth.json (quotes and braces
// dropped, to stay one JSON string).
const fakeCodex = `#!/bin/sh
cat >/dev/null
printf '{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"%s"}}\n' "$(tr -d '"{}\n' < "$CODEX_HOME/auth.json")"
`

func TestOAuthCredentialsReachTheHarness(t *testing.T) {
	testenv.RequirePlugins(t)
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	aliceKey, bobKey := s.mintKey(t, "alice@example.com", false), s.mintKey(t, "bob@example.com", false)
	creds := appv1connect.NewOAuthCredentialServiceClient(httpClient, s.rpcURL(), auth.WithKey(aliceKey))
	me := &appv1.OAuthSubject{Kind: appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_USER}
	put, err := creds.PutCredential(ctx, connect.NewRequest(&appv1.PutCredentialRequest{Subject: me, Provider: "anthropic", Secret: "sk-ant-oat01-e2e"}))
	if err != nil {
		t.Fatal(err)
	}
	const codexBundle = `{"tokens": {"access_token": "codex-e2e-secret"}}`
	if _, err := creds.PutCredential(ctx, connect.NewRequest(&appv1.PutCredentialRequest{Subject: me, Provider: "openai", Secret: codexBundle})); err != nil {
		t.Fatal(err)
	}
	alice, bob := s.sessions(aliceKey), s.sessions(bobKey)
	bind := func(provider string) *appv1.OAuthCredentialBinding {
		return &appv1.OAuthCredentialBinding{Subject: me, Provider: provider}
	}
	exe := uint32(0o755)

	// The built-in providers name their API hosts, so the harness and the sandbox get a
	// placeholder the egress proxy swaps (see oauth_proxy_test.go for the swap itself).
	t.Run("claude-code gets the token's placeholder as CLAUDE_CODE_OAUTH_TOKEN in its plan only", func(t *testing.T) {
		resp, err := alice.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{
			Harness: ptr("claude-code"), OauthCredential: bind("anthropic"), Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-org"},
		}))
		if err != nil {
			t.Fatal(err)
		}
		id := resp.Msg.GetSessionId()
		s.write(t, id, "/bin/claude", []byte(fakeClaude), &exe)
		if _, err := alice.SendPrompt(ctx, connect.NewRequest(&appv1.SendPromptRequest{SessionId: id, Text: "who am I", PromptId: "p1"})); err != nil {
			t.Fatal(err)
		}
		events := s.waitEvent(t, id, "assistant.message", "p1")
		if got := events[len(events)-1].Text; !regexp.MustCompile(`^token=hangar-placeholder-[0-9a-f]{32} key=\[\]$`).MatchString(got) {
			t.Fatalf("the harness saw %q", got)
		}
		if got := s.sh(t, id, `echo "[$CLAUDE_CODE_OAUTH_TOKEN]"`); got != "[]\n" {
			t.Fatalf("the credential leaked into the sandbox's environment: %q", got)
		}
	})

	t.Run("the sandbox reaches its placeholder bundle through the broker with the token in its environment", func(t *testing.T) {
		resp, err := alice.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{Harness: ptr("claude-code"), OauthCredential: bind("anthropic")}))
		if err != nil {
			t.Fatal(err)
		}
		id := resp.Msg.GetSessionId()
		sessionID := strings.TrimSpace(s.sh(t, id, `echo "$HANGAR_SESSION_ID"`))
		token := strings.TrimSpace(s.sh(t, id, `echo "$HANGAR_OAUTH_BROKER_TOKEN"`))
		if sessionID != id || !strings.HasPrefix(token, "hob_") {
			t.Fatalf("the sandbox's environment holds session %q and token %q", sessionID, token)
		}
		// No API key: the broker token is the credential.
		broker := appv1connect.NewOAuthCredentialServiceClient(httpClient, s.rpcURL())
		got, err := broker.FetchSessionCredential(ctx, connect.NewRequest(&appv1.FetchSessionCredentialRequest{SessionId: id, BrokerToken: token}))
		if err != nil || !strings.HasPrefix(string(got.Msg.GetOpaqueBundle()), "hangar-placeholder-") || got.Msg.GetProvider() != "anthropic" {
			t.Fatalf("fetch: %v, %v", got, err)
		}
		// Hangar refreshes a proxied credential; the sandbox holds nothing to save.
		_, err = broker.UpdateSessionCredential(ctx, connect.NewRequest(&appv1.UpdateSessionCredentialRequest{SessionId: id, BrokerToken: token, ExpectedVersion: got.Msg.GetVersion(), OpaqueBundle: []byte("sk-ant-oat01-refreshed")}))
		testenv.WantCode(t, err, connect.CodeFailedPrecondition)
		if _, err := alice.DeleteSession(ctx, connect.NewRequest(&appv1.DeleteSessionRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
		_, err = broker.FetchSessionCredential(ctx, connect.NewRequest(&appv1.FetchSessionCredentialRequest{SessionId: id, BrokerToken: token}))
		testenv.WantCode(t, err, connect.CodeUnauthenticated)
	})

	t.Run("codex gets auth.json as a secret file no snapshot holds", func(t *testing.T) {
		resp, err := alice.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{Harness: ptr("codex"), OauthCredential: bind("openai")}))
		if err != nil {
			t.Fatal(err)
		}
		id := resp.Msg.GetSessionId()
		s.write(t, id, "/bin/codex", []byte(fakeCodex), &exe)
		if _, err := alice.SendPrompt(ctx, connect.NewRequest(&appv1.SendPromptRequest{SessionId: id, Text: "who am I", PromptId: "p1"})); err != nil {
			t.Fatal(err)
		}
		events := s.waitEvent(t, id, "assistant.message", "p1")
		if got := events[len(events)-1].Text; strings.Contains(got, "codex-e2e-secret") || !strings.Contains(got, "access_token:hangar-placeholder-") {
			t.Fatalf("the harness saw %q", got)
		}
		if got := s.sh(t, id, `readlink /root/.codex/auth.json`); !strings.HasPrefix(got, "/.hangar/run/secrets/") {
			t.Fatalf("auth.json is not a link to the secret dir: %q", got)
		}
		// File reads and artifacts see the sandbox's disk, where only the link is.
		if _, err := readAll(ctx, alice, id, "/root/.codex/auth.json"); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("ReadFile of the secret file: %v", err)
		}
		if _, err := alice.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
		s.noBlobHolds(t, "codex-e2e-secret")
		if _, err := alice.EvictLocal(ctx, connect.NewRequest(&appv1.EvictLocalRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
		if _, err := alice.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: id})); err != nil {
			t.Fatal(err)
		}
		if got := s.sh(t, id, `cat /root/.codex/auth.json 2>/dev/null || echo gone`); got != "gone\n" {
			t.Fatalf("the restored sandbox holds the credential: %q", got)
		}
	})

	t.Run("a link planted in the secret dir does not lead the host out of the sandbox's run dir", func(t *testing.T) {
		resp, err := alice.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{Harness: ptr("codex"), OauthCredential: bind("openai")}))
		if err != nil {
			t.Fatal(err)
		}
		id := resp.Msg.GetSessionId()
		// Inside the sandbox /.hangar/run is a host directory: a link there to /tmp would be the
		// host's /tmp if the host followed it.
		probe := t.TempDir()
		s.sh(t, id, "rm -rf /.hangar/run/secrets && ln -s "+probe+" /.hangar/run/secrets")
		if _, err := alice.SendPrompt(ctx, connect.NewRequest(&appv1.SendPromptRequest{SessionId: id, Text: "hi", PromptId: "p1"})); err != nil {
			t.Fatal(err)
		}
		s.waitEvent(t, id, "error", "p1")
		if entries, err := os.ReadDir(probe); err != nil || len(entries) != 0 {
			t.Fatalf("the host wrote through the planted link: %v %v", entries, err)
		}
	})

	for _, tc := range []struct {
		name   string
		client appv1connect.SessionServiceClient
		req    *appv1.CreateSessionRequest
		code   connect.Code
	}{
		{"another provider than the harness takes", alice, &appv1.CreateSessionRequest{Harness: ptr("claude-code"), OauthCredential: bind("openai")}, connect.CodeFailedPrecondition},
		{"a harness that takes no credential", alice, &appv1.CreateSessionRequest{Harness: ptr("bash"), OauthCredential: bind("anthropic")}, connect.CodeFailedPrecondition},
		{"a subject with no such credential", bob, &appv1.CreateSessionRequest{Harness: ptr("claude-code"), OauthCredential: bind("anthropic")}, connect.CodeFailedPrecondition},
		{"another user's credential", bob, &appv1.CreateSessionRequest{Harness: ptr("claude-code"), OauthCredential: &appv1.OAuthCredentialBinding{
			Subject: &appv1.OAuthSubject{Kind: appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_USER, Id: put.Msg.GetCredential().GetSubjectId()}, Provider: "anthropic",
		}}, connect.CodeNotFound},
		{"a sandbox session", alice, &appv1.CreateSessionRequest{Mode: "sandbox", OauthCredential: bind("anthropic")}, connect.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.client.CreateSession(ctx, connect.NewRequest(tc.req))
			testenv.WantCode(t, err, tc.code)
		})
	}
}

// readAll reads a sandbox file through the API.
func readAll(ctx context.Context, svc appv1connect.SessionServiceClient, session, path string) ([]byte, error) {
	stream, err := svc.ReadFile(ctx, connect.NewRequest(&appv1.ReadFileRequest{SessionId: session, Path: path}))
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	var out []byte
	for stream.Receive() {
		out = append(out, stream.Msg().GetChunk()...)
	}
	return out, stream.Err()
}

// noBlobHolds fails when any object of the blob store (chunks, manifests, artifacts) holds
// secret; chunks are stored uncompressed, so a byte search finds what a snapshot carries.
func (s *sandboxStack) noBlobHolds(t *testing.T, secret string) {
	t.Helper()
	ctx := context.Background()
	it := s.sb.Bucket.List(nil)
	n := 0
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.sb.Bucket.ReadAll(ctx, obj.Key)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) {
			t.Fatalf("blob %s holds the secret", obj.Key)
		}
		n++
	}
	if n == 0 {
		t.Fatal("the blob store holds nothing: no snapshot was written")
	}
}
