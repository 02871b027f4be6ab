package e2e

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/modelfake"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
)

// realMark is in every real secret value of the real-agent test and in no placeholder, so that a
// search of the sandbox for it finds any real value without the search's own command line
// holding one (an exec's command is logged).
const realMark = "R3AL"

// agentRun is one real CLI's run in the real-agent test.
type agentRun struct {
	harness string
	// api is the host the CLI reaches its model at by default, and secret the org secret of its
	// key: its name, the variable the CLI reads it from, the value.
	api                 string
	secret, envVar, key string
	// router, when set, is the model router (at api) the key is the credential of; otherwise
	// the key is a proxy-mode secret of the profile.
	router string
	// others are the other hosts the harness's egress opens (its descriptor's native_egress):
	// the test resolver maps them to the fake too, so that nothing the CLI asks for is dialed
	// off this machine.
	others []string
	script modelfake.Script
	// tools are the tools the scripted model calls, as the harness's parser names them.
	tools []string
}

// Each real CLI of the agent image runs a task's prompt in a session through its built-in
// harness plugin, exactly as a user's would: the task's profile names the agent image, the
// harness, a repo, a proxy-mode secret for the git host, and the model API's key: Claude Code's
// as the credential of a model router at api.anthropic.com, Codex's as a proxy-mode secret.
// The session's
// start clones the repo over the egress proxy (the git host's token injected by the proxy); the
// CLI talks to its real default host (api.anthropic.com, api.openai.com) over TLS, which the
// proxy intercepts, swapping the placeholder the sandbox holds for the key, and reaches the
// loopback fake of its API only through the proxy's test resolver. The scripted model has the
// CLI edit the repo's file with its own tools, commit and push (the push carried by the proxy
// too), then answer. The test then checks what each party saw: the fake and the git server got
// the real values and never a placeholder, the git server got the commit, the sandbox's
// environment and files hold placeholders and never a real value, the log's net.connection
// events name the injected secrets (never their values), and the log holds what the CLI's real
// output says: its messages, tool calls and results, usage and the turn's end, without errors.
func TestRealAgentsEditCommitAndPushThroughTheEgressProxy(t *testing.T) {
	testenv.RequirePlugins(t)
	img := modelfake.AgentImage(t)
	runs := []agentRun{
		{
			harness: "claude-code", api: claudeHosts[0], router: anthropicRouter.ID,
			secret: anthropicRouter.CredentialSecret, envVar: "ANTHROPIC_AUTH_TOKEN", key: "sk-ant-api03-" + realMark + "-claude-key",
			others: claudeHosts[1:],
			script: modelfake.ClaudeCodeEdit(repoPath("claude-code")), tools: []string{"Read", "Edit", "Bash"},
		},
		{
			harness: "codex", api: "api.openai.com",
			secret: "openai/key", envVar: "OPENAI_API_KEY", key: "sk-proj-" + realMark + "-codex-key",
			others: []string{"chatgpt.com", "auth.openai.com"},
			script: modelfake.CodexEdit(), tools: []string{"shell", "apply_patch", "shell"},
		},
	}
	git := gitServer(t, "claude-code", "codex")
	// One fake per API: both scenarios answer the same prompt.
	fakes := map[string]*modelfake.Server{}
	for _, r := range runs {
		fakes[r.harness] = modelfake.StartTLS(append([]string{r.api}, r.others...), r.script)
		defer fakes[r.harness].Close()
	}
	var image string
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) {
		image = agentImage(t, sb, img)
		forRealAgents(sb)
		sb.Config.ModelRouters = []config.ModelRouter{anthropicRouter}
		sb.EgressResolve = map[string]string{gitHostName + ":443": git.Listener.Addr().String()}
		sb.EgressRootCAs = testkit.Roots(git.Server)
		for _, r := range runs {
			reachFake(sb, fakes[r.harness], append([]string{r.api}, r.others...)...)
		}
	})
	s.putOrgSecret(t, "gh/token", gitToken)
	// The router's default model, enabled as an admin would before sessions may use it.
	s.routerModel(t, anthropicRouter.ID, anthropicRouter.DefaultModel, true, true)
	for _, r := range runs {
		s.putOrgSecret(t, r.secret, r.key)
	}
	// The first task's session starts a sandbox of the image (~1.4 GB, seeded) and clones
	// before CreateTask answers, under -race on a loaded machine: more than a call usually takes.
	slow := &http.Client{Timeout: 10 * time.Minute}
	profiles := appv1connect.NewProfileServiceClient(slow, s.rpcURL(), auth.WithKey(s.admin))
	tasks := appv1connect.NewTaskServiceClient(slow, s.rpcURL(), auth.WithKey(s.admin))

	for _, r := range runs {
		t.Run(r.harness, func(t *testing.T) {
			secrets := []*appv1.ProfileSecret{{Ref: "gh/token", EnvVar: "GH_TOKEN", Mode: "proxy", AllowHosts: []string{gitHostName}}}
			var router *string
			if r.router != "" {
				router = &r.router
			} else {
				secrets = append(secrets, &appv1.ProfileSecret{Ref: r.secret, EnvVar: r.envVar, Mode: "proxy", AllowHosts: []string{r.api}})
			}
			p, err := profiles.CreateProfile(t.Context(), connect.NewRequest(&appv1.CreateProfileRequest{
				Name: r.harness, ImageId: image, Harness: ptr(r.harness), ModelRouter: router,
				Repos:   []*appv1.ProfileRepo{{Path: repoPath(r.harness), RemoteUrl: git.URL(r.harness)}},
				Secrets: secrets,
				// Who the agent's commits are by.
				EnvVars: map[string]string{
					"GIT_AUTHOR_NAME": "Agent", "GIT_AUTHOR_EMAIL": "agent@example.com",
					"GIT_COMMITTER_NAME": "Agent", "GIT_COMMITTER_EMAIL": "agent@example.com",
				},
			}))
			if err != nil {
				t.Fatal(err)
			}
			created, err := tasks.CreateTask(t.Context(), connect.NewRequest(&appv1.CreateTaskRequest{
				ProfileId: p.Msg.GetProfile().GetId(), Prompt: ptr(modelfake.Prompt),
			}))
			if err != nil {
				s.logFailedSessions(t)
				t.Fatal(err)
			}
			sid := created.Msg.GetTask().GetSessions()[0].GetSessionId()
			events := s.waitTurn(t, sid, promptOf(t, s, sid), 5*time.Minute)
			for _, e := range events {
				t.Logf("%s %s %s %q exit=%v usage=%s", e.Kind, e.ToolName, e.ToolCallID, e.Text, e.ExitCode, e.Usage)
			}
			for _, e := range s.listEvents(t, sid, "net.connection", "repo.cloned", "repo.clone.started") {
				t.Logf("%s %s", e.GetKind(), e.GetPayloadJson())
			}
			checkTurn(t, r, events)
			s.sessionUsageIsItsEvents(t, sid, events)

			if creds := fakes[r.harness].Credentials(); !slices.Equal(creds, []string{r.key}) {
				t.Errorf("the %s fake was sent credentials %q, want only the real key", r.api, creds)
			}
			if subject, content := git.Pushed(t, r.harness); subject != modelfake.CommitMessage || content != strings.TrimSpace(modelfake.After) {
				t.Errorf("the git server holds %q with %q, want %q with %q", subject, content, modelfake.CommitMessage, modelfake.After)
			}
			for _, a := range git.Auths() {
				if strings.Contains(a, "hangar-placeholder") || strings.Contains(decodeBasic(a), "hangar-placeholder") {
					t.Errorf("the git server was sent the placeholder: %q", a)
				}
			}
			s.sandboxHoldsOnlyPlaceholders(t, sid, r)
			s.injectionsAudited(t, sid, map[string]string{r.api: r.secret, gitHostName: "gh/token"}, s.sb.EgressResolve)
			for _, v := range []string{r.key, gitToken} {
				s.noEventHolds(t, sid, v)
			}
		})
	}
}

// claudeHosts are the hosts Claude Code reaches (its descriptor's native egress), its API's
// first: a fake of the API answers at all of them, so that nothing the CLI asks for is dialed
// off this machine.
var claudeHosts = []string{"api.anthropic.com", "console.anthropic.com", "platform.claude.com"}

// anthropicRouter is the model router at api.anthropic.com whose credential is the real Claude
// Code's key.
var anthropicRouter = config.ModelRouter{
	ID: "anthropic", Label: "Anthropic", BaseURL: "https://" + claudeHosts[0], Protocols: []string{"anthropic"},
	CredentialSecret: "anthropic/key", DefaultModel: "claude-sonnet-4-6",
}

// forRealAgents gives a stack's sandboxes the room the real CLIs of the agent image need:
// Node.js and native binaries of a few hundred MB each.
func forRealAgents(sb *testenv.Sandboxes) {
	sb.Config.Host.SandboxMemoryBytes = 2 << 30
}

// reachFake has the hosts' egress proxy resolve hosts (port 443) to fake and trust its
// certificate, so that a CLI reaches the fake at its API's real name.
func reachFake(sb *testenv.Sandboxes, fake *modelfake.Server, hosts ...string) {
	if sb.EgressResolve == nil {
		sb.EgressResolve = map[string]string{}
	}
	if sb.EgressRootCAs == nil {
		sb.EgressRootCAs = x509.NewCertPool()
	}
	for _, h := range hosts {
		sb.EgressResolve[h+":443"] = fake.Addr()
	}
	sb.EgressRootCAs.AddCert(fake.Certificate())
}

// agentImage puts the agent image into the image cache of the hosts sb starts from now on, and
// returns its reference: the tests of the real CLIs are about what runs in its sessions, not
// about pulling it (see testenv.SeedImage).
func agentImage(t testing.TB, sb *testenv.Sandboxes, img v1.Image) string {
	t.Helper()
	return sb.SeedImage(t, "hangar/agent", img)
}

// repoPath is where the real-agent test's profile of harness clones its repo.
func repoPath(harness string) string { return "/work/" + harness }

// turnEvent is an agent event of the log as the real-agent test reads it.
type turnEvent struct {
	Kind       string
	Text       string          `json:"text"`
	ToolCallID string          `json:"tool_call_id"`
	ToolName   string          `json:"tool_name"`
	IsError    bool            `json:"is_error"`
	ExitCode   *int            `json:"exit_code"`
	Usage      json.RawMessage `json:"usage"`
	PromptID   string          `json:"prompt_id"`
}

// waitTurn waits until prompt's turn is done and returns its events.
func (s *sandboxStack) waitTurn(t *testing.T, session, prompt string, within time.Duration) []turnEvent {
	t.Helper()
	var mine []turnEvent
	testkit.Eventually(t, within, "the end of the turn of prompt "+prompt, func() (bool, string) {
		mine = nil
		done := false
		for _, e := range s.listEvents(t, session) {
			var ev turnEvent
			_ = json.Unmarshal([]byte(e.GetPayloadJson()), &ev)
			ev.Kind = e.GetKind()
			if ev.PromptID != prompt {
				continue
			}
			mine = append(mine, ev)
			done = done || ev.Kind == "turn.done"
		}
		return done, fmt.Sprintf("its events: %+v", mine)
	})
	return mine
}

// checkTurn checks that a real CLI's turn logged what its scenario makes it do: the tools in
// order, each with its result, the final answer, usage, and no error.
func checkTurn(t *testing.T, r agentRun, events []turnEvent) {
	t.Helper()
	var called, answered, said []string
	usage := 0
	names := map[string]string{} // tool calls' names by id
	for _, e := range events {
		switch e.Kind {
		case "tool.call":
			called = append(called, e.ToolName)
			names[e.ToolCallID] = e.ToolName
		case "tool.result":
			answered = append(answered, e.ToolCallID)
			if e.ToolName == "" || e.ToolName != names[e.ToolCallID] {
				t.Errorf("the result of %s names tool %q, want its call's %q", e.ToolCallID, e.ToolName, names[e.ToolCallID])
			}
		case "assistant.message":
			said = append(said, e.Text)
		case "usage":
			var u struct {
				InputTokens int64 `json:"input_tokens"`
			}
			if json.Unmarshal(e.Usage, &u) == nil && u.InputTokens > 0 {
				usage++
			}
		case "error":
			t.Errorf("the turn logged an error: %q", e.Text)
		}
	}
	if !slices.Equal(called, r.tools) {
		t.Errorf("tools called %q, want %q; events %+v", called, r.tools, events)
	}
	if len(answered) != len(called) {
		t.Errorf("%d tool results for %d calls", len(answered), len(called))
	}
	if !slices.Contains(said, modelfake.Final) {
		t.Errorf("the assistant said %q, want the final answer %q", said, modelfake.Final)
	}
	if usage == 0 {
		t.Errorf("no usage with input tokens: %+v", events)
	}
	if last := events[len(events)-1]; last.Kind != "turn.done" {
		t.Errorf("the last event is %s, want turn.done", last.Kind)
	}
}

// sessionUsageIsItsEvents checks that the session's usage, as GetSession shows it, is the sum
// of its turn's usage events, cache tokens apart.
func (s *sandboxStack) sessionUsageIsItsEvents(t *testing.T, session string, events []turnEvent) {
	t.Helper()
	type usage struct {
		InputTokens      int64 `json:"input_tokens"`
		OutputTokens     int64 `json:"output_tokens"`
		CacheReadTokens  int64 `json:"cache_read_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	}
	var sum usage
	for _, e := range events {
		if e.Kind != "usage" {
			continue
		}
		var u usage
		if err := json.Unmarshal(e.Usage, &u); err != nil {
			t.Fatalf("usage %s: %v", e.Usage, err)
		}
		sum = usage{sum.InputTokens + u.InputTokens, sum.OutputTokens + u.OutputTokens, sum.CacheReadTokens + u.CacheReadTokens, sum.CacheWriteTokens + u.CacheWriteTokens}
	}
	got, err := s.svc.GetSession(t.Context(), connect.NewRequest(&appv1.GetSessionRequest{SessionId: session}))
	if err != nil {
		t.Fatal(err)
	}
	u := got.Msg.GetSession().GetUsage()
	if u.GetInputTokens() != sum.InputTokens || u.GetOutputTokens() != sum.OutputTokens ||
		u.GetCacheReadTokens() != sum.CacheReadTokens || u.GetCacheWriteTokens() != sum.CacheWriteTokens {
		t.Errorf("the session's usage is %v, want its events' sum %+v", u, sum)
	}
}

// sandboxHoldsOnlyPlaceholders checks that the session's environment has the secrets'
// placeholders, and that no real value is anywhere the sandbox's processes' environments or
// its writable files are.
func (s *sandboxStack) sandboxHoldsOnlyPlaceholders(t *testing.T, session string, r agentRun) {
	t.Helper()
	env := s.sh(t, session, "env")
	for _, v := range []string{r.envVar, "GH_TOKEN"} {
		if !strings.Contains(env, v+"=hangar-placeholder-") {
			t.Errorf("the sandbox's %s is not a placeholder:\n%s", v, env)
		}
	}
	// Every process's environment, and every file the session could have written (the image's
	// own are read-only and never held a value).
	found := s.sh(t, session, `cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c `+realMark+`;
		grep -rlF `+realMark+` /home /work /tmp /etc /root /var /run /opt 2>/dev/null; true`)
	if strings.TrimSpace(found) != "0" {
		t.Errorf("a real secret value is in the sandbox (environment count, then files):\n%s", found)
	}
}

// injectionsAudited checks that the session's net.connection events show the proxy injecting
// into each host the secret named for it (a connection's event comes once it closes, and the
// log batches its writes), and that every connection the proxy let through went to a host the
// test resolver maps to loopback: none was dialed off this machine.
func (s *sandboxStack) injectionsAudited(t *testing.T, session string, want, resolve map[string]string) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, "net.connection events naming the injected secrets", func() (bool, string) {
		seen := map[string][]string{}
		for _, e := range s.listEvents(t, session, "net.connection") {
			var c struct {
				Host     string   `json:"host"`
				Port     int      `json:"port"`
				Decision string   `json:"decision"`
				Mode     string   `json:"mode"`
				Injected []string `json:"secrets_injected"`
				Error    string   `json:"error"`
			}
			if err := json.Unmarshal([]byte(e.GetPayloadJson()), &c); err != nil {
				t.Fatal(err)
			}
			if _, mapped := resolve[fmt.Sprintf("%s:%d", c.Host, c.Port)]; !mapped && (c.Decision == "allow" || c.Error != "") {
				t.Fatalf("the proxy dialed %s:%d, which the test resolver does not map to loopback: %s", c.Host, c.Port, e.GetPayloadJson())
			}
			if c.Mode == "intercepted" {
				seen[c.Host] = append(seen[c.Host], c.Injected...)
			}
		}
		for host, secret := range want {
			if !slices.Contains(seen[host], secret) {
				return false, fmt.Sprintf("no intercepted connection to %s names %s injected; intercepted: %v", host, secret, seen)
			}
		}
		return true, ""
	})
}

// decodeBasic is the user:password of a Basic Authorization header ("" for another).
func decodeBasic(header string) string {
	b, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(header, "Basic "))
	return string(b)
}

// logFailedSessions logs the repo and network events of the stack's failed sessions: what a
// session that could not start (a clone over the proxy that failed) leaves to go on.
func (s *sandboxStack) logFailedSessions(t *testing.T) {
	t.Helper()
	for id, events := range s.failedSessionEvents(t, "repo.clone.failed", "net.connection") {
		for _, e := range events {
			t.Logf("failed session %s: %s %s", id, e.GetKind(), e.GetPayloadJson())
		}
	}
}

// failedSessionEvents are the events of kinds of each of the stack's failed sessions, by id.
func (s *sandboxStack) failedSessionEvents(t *testing.T, kinds ...string) map[string][]*appv1.SessionEvent {
	t.Helper()
	list, err := s.svc.ListSessions(t.Context(), connect.NewRequest(&emptypb.Empty{}))
	if err != nil {
		t.Fatalf("list sessions: %v", err)
	}
	out := map[string][]*appv1.SessionEvent{}
	for _, item := range list.Msg.GetSessions() {
		if id := item.GetSession().GetId(); item.GetSession().GetStatus() == "failed" {
			out[id] = s.listEvents(t, id, kinds...)
		}
	}
	return out
}
