package e2e

import (
	"strings"
	"testing"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/modelfake"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// The real Claude Code CLI of the agent image runs in a session through its built-in harness
// plugin, pointed by ANTHROPIC_BASE_URL at the loopback fake of the Messages API. A sandbox has
// no path out yet but the one the egress proxy will give it, so the CLI cannot reach the fake:
// the turn ends with the CLI's own error, parsed from its real output, and the fake hears
// nothing from the sandbox. Once the proxy lands, the same session reaches the fake through it
// (with the key injected, the commit pushed), and this test grows into that.
func TestRealClaudeCodeRunsInASessionOfTheAgentImage(t *testing.T) {
	testenv.RequirePlugins(t)
	img := modelfake.AgentImage(t)
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) {
		// Claude Code is a native binary of a few hundred MB of address space.
		sb.Config.Host.SandboxMemoryBytes = 2 << 30
	})
	ref := imagestest.Push(t, s.sb.Registry, "hangar/agent", img)
	fake := modelfake.Start(modelfake.ClaudeCodeEdit("/home/agent"))
	defer fake.Close()

	id := s.create(t, &appv1.CreateSessionRequest{
		ImageUri: ref, Mode: "agent", Harness: ptr("claude-code"),
		Prompt: ptr(modelfake.Prompt), PromptId: ptr("p1"),
		HarnessEnv: map[string]string{
			"ANTHROPIC_API_KEY":  "sk-ant-placeholder",
			"ANTHROPIC_BASE_URL": fake.URL,
			// One try, not Claude Code's ten with backoff: the API is out of reach.
			"CLAUDE_CODE_MAX_RETRIES": "0",
		},
	})
	events := s.waitEvent(t, id, "turn.done", "p1")
	var errs []string
	for _, e := range events {
		if e.Kind == "error" {
			errs = append(errs, e.Text)
		}
	}
	if len(errs) == 0 {
		t.Fatalf("the turn ended without the CLI's error: %s", kindsOf(events))
	}
	if strings.Contains(strings.Join(errs, "\n"), "not found") {
		t.Fatalf("the CLI did not run in the agent image: %q", errs)
	}
	if reqs := fake.Requests(); len(reqs) != 0 {
		t.Fatalf("the fake heard %d requests from a sandbox without network", len(reqs))
	}
	t.Logf("the CLI said: %q", errs)
}
