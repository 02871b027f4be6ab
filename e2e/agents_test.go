package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/modelfake"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// Each real CLI of the agent image runs in a session through its built-in harness plugin, with
// the loopback fake of its model API as its base URL where the CLI takes one from the
// environment (Claude Code's ANTHROPIC_BASE_URL; Codex has no such variable and asks
// api.openai.com). A sandbox has no path out yet but the one the egress proxy will give it, so
// neither reaches an API: Claude Code's turn ends with its own error, parsed from its real
// output; Codex, which waits for the network as long as it is let, says it falls back from
// WebSockets, is interrupted, and ends with its exit status and last words, among which its
// reconnect notices, which are no errors of their own. The fake hears nothing from the sandboxes. Once the proxy lands, the same sessions reach the fake through it, with the key
// injected and the commit pushed, and this test grows into that.
func TestRealAgentsRunInSessionsOfTheAgentImage(t *testing.T) {
	testenv.RequirePlugins(t)
	img := modelfake.AgentImage(t)
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) {
		// The CLIs are native binaries of a few hundred MB of address space.
		sb.Config.Host.SandboxMemoryBytes = 2 << 30
	})
	ref := imagestest.Push(t, s.sb.Registry, "hangar/agent", img)
	fake := modelfake.Start(modelfake.ClaudeCodeEdit("/home/agent"), modelfake.CodexEdit())
	defer fake.Close()

	// The first session pulls and unpacks the image (~1.4 GB): more than a call usually takes.
	slow := appv1connect.NewSessionServiceClient(&http.Client{Timeout: 10 * time.Minute}, s.rpcURL(), auth.WithKey(s.admin))
	for _, tc := range []struct {
		harness string
		env     map[string]string
		// interruptOn, when set, is an error the turn is interrupted after, for a CLI that
		// would wait on.
		interruptOn string
	}{
		{"claude-code", map[string]string{
			"ANTHROPIC_API_KEY": "sk-ant-placeholder", "ANTHROPIC_BASE_URL": fake.URL,
			// One try, not Claude Code's ten with backoff: the API is out of reach.
			"CLAUDE_CODE_MAX_RETRIES": "0",
		}, ""},
		{"codex", map[string]string{"OPENAI_API_KEY": "sk-placeholder"}, "Falling back from WebSockets"},
	} {
		t.Run(tc.harness, func(t *testing.T) {
			resp, err := slow.CreateSession(t.Context(), connect.NewRequest(&appv1.CreateSessionRequest{
				ImageUri: ref, Mode: "agent", Harness: ptr(tc.harness),
				Prompt: ptr(modelfake.Prompt), PromptId: ptr("p1"), HarnessEnv: tc.env,
			}))
			if err != nil {
				t.Fatalf("create session: %v", err)
			}
			id := resp.Msg.GetSessionId()
			var errs []string
			interrupted := false
			testkit.Eventually(t, 3*time.Minute, "the turn's end", func() (bool, string) {
				errs = nil
				done := false
				for _, e := range s.listEvents(t, id) {
					var p promptEvent
					_ = json.Unmarshal([]byte(e.GetPayloadJson()), &p)
					switch e.GetKind() {
					case "error":
						errs = append(errs, p.Text)
					case "turn.done":
						done = true
					}
				}
				if tc.interruptOn != "" && !interrupted && strings.Contains(strings.Join(errs, "\n"), tc.interruptOn) {
					if _, err := s.svc.Interrupt(t.Context(), connect.NewRequest(&appv1.InterruptRequest{SessionId: id, Source: "test"})); err != nil {
						t.Fatal(err)
					}
					interrupted = true
				}
				return done, fmt.Sprintf("errors so far %q", errs)
			})
			if len(errs) == 0 || strings.Contains(strings.Join(errs, "\n"), "not found") {
				t.Fatalf("errors %q, want the CLI's own failure to reach its API", errs)
			}
			for _, e := range errs {
				if strings.HasPrefix(e, "Reconnecting...") {
					t.Errorf("a reconnect notice is an error of the turn: %q", e)
				}
			}
			// An interrupted CLI is killed: its turn ends with its exit status and last words.
			if interrupted && !strings.HasPrefix(errs[len(errs)-1], "exit status ") {
				t.Errorf("the interrupted turn's last error is %q, want its exit status", errs[len(errs)-1])
			}
			t.Logf("%s said: %q", tc.harness, errs)
		})
	}
	if reqs := fake.Requests(); len(reqs) != 0 {
		t.Fatalf("the fake heard %d requests from sandboxes without network", len(reqs))
	}
}
