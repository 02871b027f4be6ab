// Package codex is the harness for OpenAI's Codex CLI, run headless:
//
//	codex exec --json --skip-git-repo-check -m M [-c model_reasoning_effort=E] SANDBOX
//	      [resume THREAD] - < prompt
//
// M is the session's model, else the descriptor's default, so that a session runs on the model
// it shows rather than on whatever the CLI's release defaults to.
//
// The prompt goes to stdin ("-"), so a prompt that starts with "-" stays a prompt, none is
// bounded by the kernel's 128 KiB limit on one argument, and `codex exec` does not wait for a
// stdin to append to an argument. Every flag comes before `resume`, where `codex exec` accepts
// all of them. --skip-git-repo-check because a session's directory need not be a repository.
//
// The sandbox is the isolation, so the default mode runs commands without Codex's own sandbox
// (which needs kernel features a container seldom grants); the other modes ask Codex to sandbox
// its commands too. Exec mode never asks for approval.
//
// An org's OPENAI_API_KEY reaches Codex as CODEX_API_KEY, the variable `codex exec` reads a key
// from, unless the caller sets that one itself.
//
// A session's OAuth credential (provider openai) is Codex's auth.json, which Codex reads only as
// a file: the plan places it at $CODEX_HOME/auth.json as a secret file (the host keeps its
// content off the sandbox's disk and links it there), sets CODEX_HOME (default /root/.codex, as
// sandboxes run as root) so that Codex looks where the file is, and passes no CODEX_API_KEY,
// which `codex exec` would prefer to the subscription the session asked for.
//
// Codex ignores OPENAI_BASE_URL: it takes its endpoint from its configuration. A session pointed
// at a model router (or a profile pointing it at an OpenAI-compatible gateway) sets
// OPENAI_BASE_URL, which the plan turns into a model provider of Codex's own, selected with -c
// overrides of its config.toml: model_provider and model_providers.hangar's base_url, wire_api
// "responses" (the Responses API, the only one Codex speaks) and env_key OPENAI_API_KEY, the
// variable the router's key (or its placeholder) is in.
//
// parse.go reads the JSONL events.
package codex

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/sdk"
)

// Harness implements the plugin; harnesses/plugins/<name>/plugin registers it.
type Harness struct{}

var descriptor = abi.Descriptor{
	Name:        "codex",
	Label:       "Codex",
	Description: "OpenAI's Codex CLI, run headless in the sandbox.",
	Auth: &abi.Auth{
		OrgEnv:     "OPENAI_API_KEY",
		OrgEnvHint: "An OpenAI API key (sk-…)",
		UserOAuth:  &abi.OAuth{Provider: "openai", Delivery: "OAUTH_DELIVERY_OPAQUE_BUNDLE"},
	},
	Models: []abi.Option{
		{ID: "gpt-5.5", Label: "GPT-5.5", Default: true},
		{ID: "gpt-5.4", Label: "GPT-5.4"},
		{ID: "gpt-5.4-mini", Label: "GPT-5.4 mini"},
	},
	Effort: []abi.Option{
		{ID: "low", Label: "Low"},
		{ID: "medium", Label: "Medium"},
		{ID: "high", Label: "High"},
		{ID: "xhigh", Label: "Extra high"},
	},
	Modes: []abi.Mode{
		{ID: "full-access", Label: "Full access", Default: true},
		{ID: "workspace-write", Label: "Sandboxed, may write the workspace"},
		{ID: "read-only", Label: "Sandboxed, read-only"},
	},
	RouterProtocols: []string{"openai-responses"},
	NativeEgress: &abi.Egress{
		// The API for a key; ChatGPT's backend and OpenAI's auth server for a subscription.
		AllowHosts: []string{"api.openai.com", "chatgpt.com", "auth.openai.com"},
	},
}

// sandboxFlags are the flags of each mode.
var sandboxFlags = map[string][]string{
	"full-access":     {"--dangerously-bypass-approvals-and-sandbox"},
	"workspace-write": {"--sandbox", "workspace-write"},
	"read-only":       {"--sandbox", "read-only"},
}

func (Harness) Describe() abi.Descriptor { return descriptor }

func (Harness) Plan(req abi.PlanRequest) (abi.Plan, error) {
	mode, err := sdk.ResolveMode(descriptor, req.Mode)
	if err != nil {
		return abi.Plan{}, err
	}
	if err := sdk.CheckEffort(descriptor, req.Effort); err != nil {
		return abi.Plan{}, err
	}
	if strings.TrimSpace(req.Prompt) == "" {
		return abi.Plan{}, errors.New("the prompt is empty")
	}
	argv := []string{"codex", "exec", "--json", "--skip-git-repo-check"}
	if model := sdk.ResolveModel(descriptor, req.Model); model != "" {
		argv = append(argv, "-m", model)
	}
	if req.Effort != "" {
		argv = append(argv, "-c", `model_reasoning_effort="`+req.Effort+`"`)
	}
	argv = append(argv, providerFlags(req.Env)...)
	argv = append(argv, sandboxFlags[mode]...)
	if id := sdk.ParseHint(req.Resume).ID; id != "" {
		argv = append(argv, "resume", id)
	}
	argv = append(argv, "-")
	if req.Credential != "" {
		return withAuthFile(abi.Plan{Argv: argv, Stdin: req.Prompt}, req)
	}
	var defaults map[string]string
	if key := req.Env["OPENAI_API_KEY"]; key != "" {
		defaults = map[string]string{"CODEX_API_KEY": key}
	}
	return abi.Plan{Argv: argv, Env: sdk.Env(req.Env, defaults), Stdin: req.Prompt}, nil
}

// providerID is the model provider the plan defines for OPENAI_BASE_URL: not one of Codex's
// reserved built-in ids (openai, ollama, lmstudio...), whose base URL its config cannot change.
const providerID = "hangar"

// providerFlags are the -c overrides that point Codex at env's OPENAI_BASE_URL, with the key in
// OPENAI_API_KEY when there is one; none without OPENAI_BASE_URL.
func providerFlags(env map[string]string) []string {
	base := strings.TrimSpace(env["OPENAI_BASE_URL"])
	if base == "" {
		return nil
	}
	p := "model_providers." + providerID + "."
	name := env["HANGAR_MODEL_ROUTER"]
	if name == "" {
		name = "OPENAI_BASE_URL"
	}
	flags := []string{"-c", "model_provider=" + tomlString(providerID), "-c", p + "name=" + tomlString(name),
		"-c", p + "base_url=" + tomlString(base), "-c", p + "wire_api=" + tomlString("responses")}
	if env["OPENAI_API_KEY"] != "" {
		flags = append(flags, "-c", p+"env_key="+tomlString("OPENAI_API_KEY"))
	}
	return flags
}

// tomlString is s as a TOML basic string, which -c values are read as: JSON's escapes are
// TOML's, so a quote or a newline in s cannot end the value or add another key.
func tomlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// defaultHome is Codex's home for root, whom sandboxes run commands as.
const defaultHome = "/root/.codex"

// withAuthFile delivers the session's credential as Codex's auth.json.
func withAuthFile(plan abi.Plan, req abi.PlanRequest) (abi.Plan, error) {
	// The error says nothing of the bundle's content: it is a credential.
	if !json.Valid([]byte(req.Credential)) {
		return abi.Plan{}, errors.New("the OAuth credential is not Codex's auth.json (it is not JSON)")
	}
	plan.Env = sdk.Env(req.Env, map[string]string{"CODEX_HOME": defaultHome})
	home := strings.TrimSuffix(plan.Env["CODEX_HOME"], "/")
	if !strings.HasPrefix(home, "/") {
		return abi.Plan{}, fmt.Errorf("CODEX_HOME %q is not an absolute path", home)
	}
	plan.Files = []abi.File{{Path: home + "/auth.json", Content: req.Credential, Mode: 0o600, Secret: true}}
	return plan, nil
}
