package claudecode

import (
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/sdk/sdktest"
)

func TestPlan(t *testing.T) {
	base := []string{"claude", "-p", "--output-format", "stream-json", "--verbose"}
	// A request naming no model runs the descriptor's default.
	dflt := []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--model", "claude-sonnet-4-6"}
	quiet := map[string]string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
	sandboxed := map[string]string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "IS_SANDBOX": "1"}
	sdktest.CheckPlans(t, Harness{}, []sdktest.PlanCase{
		{
			Name: "first turn in the default mode",
			Req:  abi.PlanRequest{Prompt: "fix the build"},
			Want: abi.Plan{Argv: append(dflt, "--permission-mode", "bypassPermissions"), Env: sandboxed, Stdin: "fix the build"},
		},
		{
			Name: "model, effort, mode and resume",
			Req:  abi.PlanRequest{Prompt: "-v is a prompt", Model: "claude-opus-4-7", Effort: "high", Mode: "plan", Resume: "s1"},
			Want: abi.Plan{
				Argv:  append(base, "--model", "claude-opus-4-7", "--effort", "high", "--permission-mode", "plan", "--resume", "s1"),
				Env:   quiet,
				Stdin: "-v is a prompt",
			},
		},
		{
			Name: "a resume hint carrying totals resumes its session id",
			Req:  abi.PlanRequest{Prompt: "p", Mode: "plan", Resume: `s1 usage={"input_tokens":5}`},
			Want: abi.Plan{Argv: append(dflt, "--permission-mode", "plan", "--resume", "s1"), Env: quiet, Stdin: "p"},
		},
		{
			Name: "a model the descriptor does not list, as a router offers",
			Req:  abi.PlanRequest{Prompt: "p", Model: "router/claude-next", Mode: "acceptEdits"},
			Want: abi.Plan{Argv: append(base, "--model", "router/claude-next", "--permission-mode", "acceptEdits"), Env: quiet, Stdin: "p"},
		},
		{
			Name: "the caller's environment wins",
			Req:  abi.PlanRequest{Prompt: "p", Env: map[string]string{"ANTHROPIC_API_KEY": "k", "IS_SANDBOX": "0"}},
			Want: abi.Plan{
				Argv:  append(dflt, "--permission-mode", "bypassPermissions"),
				Env:   map[string]string{"ANTHROPIC_API_KEY": "k", "IS_SANDBOX": "0", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
				Stdin: "p",
			},
		},
		{
			Name: "an OAuth token, over an org key",
			Req:  abi.PlanRequest{Prompt: "p", Mode: "plan", Env: map[string]string{"ANTHROPIC_API_KEY": "k"}, Credential: "sk-ant-oat01-tok\n"},
			Want: abi.Plan{
				Argv:  append(dflt, "--permission-mode", "plan"),
				Env:   map[string]string{"CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-tok", "ANTHROPIC_API_KEY": "", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
				Stdin: "p",
			},
		},
		{
			Name: "Claude Code's credentials file",
			Req:  abi.PlanRequest{Prompt: "p", Mode: "plan", Credential: `{"claudeAiOauth": {"accessToken": "sk-ant-oat01-acc", "refreshToken": "r"}}`},
			Want: abi.Plan{
				Argv:  append(dflt, "--permission-mode", "plan"),
				Env:   map[string]string{"CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-acc", "ANTHROPIC_API_KEY": "", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
				Stdin: "p",
			},
		},
		{Name: "JSON that is no credentials file", Req: abi.PlanRequest{Prompt: "p", Credential: `{"token": "secret-value"}`}, WantErr: "not Claude Code's credentials file"},
		{Name: "empty prompt", Req: abi.PlanRequest{Prompt: " \n"}, WantErr: "the prompt is empty"},
		{Name: "unknown mode", Req: abi.PlanRequest{Prompt: "p", Mode: "yolo"}, WantErr: `no mode "yolo"`},
		{Name: "unknown effort", Req: abi.PlanRequest{Prompt: "p", Effort: "ultra"}, WantErr: `no effort level "ultra"`},
	})
}

func TestDescriptorDefaultsAreListed(t *testing.T) {
	d := Harness{}.Describe()
	if d.Name != "claude-code" {
		t.Fatalf("name %q, want the plugin's directory name", d.Name)
	}
	defaults := 0
	for _, m := range d.Modes {
		if m.Default {
			defaults++
		}
	}
	models := 0
	for _, m := range d.Models {
		if m.Default {
			models++
		}
	}
	if defaults != 1 || models != 1 {
		t.Fatalf("%d default modes and %d default models, want one each", defaults, models)
	}
}
