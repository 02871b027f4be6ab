package codex

import (
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/sdk/sdktest"
)

func TestPlan(t *testing.T) {
	base := []string{"codex", "exec", "--json", "--skip-git-repo-check"}
	// A request naming no model runs the descriptor's default.
	dflt := []string{"codex", "exec", "--json", "--skip-git-repo-check", "-m", "gpt-5.5"}
	bypass := "--dangerously-bypass-approvals-and-sandbox"
	sdktest.CheckPlans(t, Harness{}, []sdktest.PlanCase{
		{
			Name: "first turn in the default mode",
			Req:  abi.PlanRequest{Prompt: "fix the build"},
			Want: abi.Plan{Argv: append(dflt, bypass, "-"), Stdin: "fix the build"},
		},
		{
			Name: "model, effort and mode",
			Req:  abi.PlanRequest{Prompt: "p", Model: "gpt-5.4-mini", Effort: "xhigh", Mode: "read-only"},
			Want: abi.Plan{Argv: append(base, "-m", "gpt-5.4-mini", "-c", `model_reasoning_effort="xhigh"`, "--sandbox", "read-only", "-"), Stdin: "p"},
		},
		{
			Name: "resume of a hint's thread comes after every flag",
			Req:  abi.PlanRequest{Prompt: "-x is a prompt", Mode: "workspace-write", Resume: `019a7c3e-5b21-7d40-9e8f-3c2a1b0d4e5f usage={"input_tokens":5}`},
			Want: abi.Plan{
				Argv:  append(dflt, "--sandbox", "workspace-write", "resume", "019a7c3e-5b21-7d40-9e8f-3c2a1b0d4e5f", "-"),
				Stdin: "-x is a prompt",
			},
		},
		{
			Name: "an OAuth credential is a secret auth.json in CODEX_HOME, over an org key",
			Req:  abi.PlanRequest{Prompt: "p", Env: map[string]string{"OPENAI_API_KEY": "sk-1"}, Credential: `{"tokens": {"access_token": "a"}}`},
			Want: abi.Plan{
				Argv: append(dflt, bypass, "-"), Env: map[string]string{"OPENAI_API_KEY": "sk-1", "CODEX_HOME": "/root/.codex"}, Stdin: "p",
				Files: []abi.File{{Path: "/root/.codex/auth.json", Content: `{"tokens": {"access_token": "a"}}`, Mode: 0o600, Secret: true}},
			},
		},
		{
			Name: "the caller's CODEX_HOME holds the auth.json",
			Req:  abi.PlanRequest{Prompt: "p", Env: map[string]string{"CODEX_HOME": "/work/.codex/"}, Credential: `{}`},
			Want: abi.Plan{
				Argv: append(dflt, bypass, "-"), Env: map[string]string{"CODEX_HOME": "/work/.codex/"}, Stdin: "p",
				Files: []abi.File{{Path: "/work/.codex/auth.json", Content: `{}`, Mode: 0o600, Secret: true}},
			},
		},
		{Name: "a credential that is no auth.json", Req: abi.PlanRequest{Prompt: "p", Credential: "sk-secret"}, WantErr: "not Codex's auth.json"},
		{Name: "a relative CODEX_HOME", Req: abi.PlanRequest{Prompt: "p", Env: map[string]string{"CODEX_HOME": "codex"}, Credential: `{}`}, WantErr: "not an absolute path"},
		{
			Name: "an org's OpenAI key reaches codex exec",
			Req:  abi.PlanRequest{Prompt: "p", Env: map[string]string{"OPENAI_API_KEY": "sk-1"}},
			Want: abi.Plan{Argv: append(dflt, bypass, "-"), Env: map[string]string{"OPENAI_API_KEY": "sk-1", "CODEX_API_KEY": "sk-1"}, Stdin: "p"},
		},
		{
			Name: "a CODEX_API_KEY of the caller wins",
			Req:  abi.PlanRequest{Prompt: "p", Env: map[string]string{"OPENAI_API_KEY": "sk-1", "CODEX_API_KEY": "sk-2"}},
			Want: abi.Plan{Argv: append(dflt, bypass, "-"), Env: map[string]string{"OPENAI_API_KEY": "sk-1", "CODEX_API_KEY": "sk-2"}, Stdin: "p"},
		},
		{
			Name: "a router's OPENAI_BASE_URL, which Codex ignores, becomes a model provider of its config, with the key's variable",
			Req: abi.PlanRequest{Prompt: "p", Model: "gpt-5.4", Env: map[string]string{
				"OPENAI_BASE_URL": "https://litellm.corp.internal:4000/v1", "OPENAI_API_KEY": "hangar-placeholder-1", "HANGAR_MODEL_ROUTER": "corp"}},
			Want: abi.Plan{
				Argv: append(base, "-m", "gpt-5.4", "-c", `model_provider="hangar"`, "-c", `model_providers.hangar.name="corp"`,
					"-c", `model_providers.hangar.base_url="https://litellm.corp.internal:4000/v1"`, "-c", `model_providers.hangar.wire_api="responses"`,
					"-c", `model_providers.hangar.env_key="OPENAI_API_KEY"`, bypass, "-"),
				Env: map[string]string{"OPENAI_BASE_URL": "https://litellm.corp.internal:4000/v1", "OPENAI_API_KEY": "hangar-placeholder-1",
					"HANGAR_MODEL_ROUTER": "corp", "CODEX_API_KEY": "hangar-placeholder-1"},
				Stdin: "p",
			},
		},
		{
			Name: "a keyless gateway's base URL, quoted so that it cannot add a key of its own",
			Req:  abi.PlanRequest{Prompt: "p", Env: map[string]string{"OPENAI_BASE_URL": "http://gw/v1\"\nmodel=\"x"}},
			Want: abi.Plan{
				Argv: append(base, "-m", "gpt-5.5", "-c", `model_provider="hangar"`, "-c", `model_providers.hangar.name="OPENAI_BASE_URL"`,
					"-c", `model_providers.hangar.base_url="http://gw/v1\"\nmodel=\"x"`, "-c", `model_providers.hangar.wire_api="responses"`, bypass, "-"),
				Env:   map[string]string{"OPENAI_BASE_URL": "http://gw/v1\"\nmodel=\"x"},
				Stdin: "p",
			},
		},
		{Name: "empty prompt", Req: abi.PlanRequest{Prompt: " \n"}, WantErr: "the prompt is empty"},
		{Name: "unknown mode", Req: abi.PlanRequest{Prompt: "p", Mode: "plan"}, WantErr: `no mode "plan"`},
		{Name: "unknown effort", Req: abi.PlanRequest{Prompt: "p", Effort: "max"}, WantErr: `no effort level "max"`},
	})
}

func TestEveryModeHasFlags(t *testing.T) {
	d := Harness{}.Describe()
	if d.Name != "codex" {
		t.Fatalf("name %q, want the plugin's directory name", d.Name)
	}
	for _, m := range d.Modes {
		if len(sandboxFlags[m.ID]) == 0 {
			t.Errorf("mode %q has no flags", m.ID)
		}
	}
}
