// Package claudecode is the harness for Anthropic's Claude Code CLI, run headless:
//
//	claude -p --output-format stream-json --verbose --model M [--effort E]
//	       --permission-mode MODE [--resume SESSION] < prompt
//
// M is the session's model, else the descriptor's default, so that a session runs on the model
// it shows rather than on whatever the CLI's release defaults to.
//
// The prompt goes to stdin, which `claude -p` reads when it is given no prompt argument: a
// prompt that starts with "-" stays a prompt, none is bounded by the kernel's 128 KiB limit on
// one argument, and none shows in the sandbox's process list.
//
// The sandbox is the isolation, so the default mode is bypassPermissions (headless, no one could
// approve a tool anyway). Claude Code refuses that mode as root unless IS_SANDBOX=1, which the
// plan sets; it also sets CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, as a sandbox's egress is
// the model API only. Both give way to what the caller sets.
//
// A session's OAuth credential (provider anthropic) reaches Claude Code as
// CLAUDE_CODE_OAUTH_TOKEN, the variable it reads a subscription's token from: the bundle is the
// token (`claude setup-token` prints one) or Claude Code's own credentials file
// ({"claudeAiOauth": {"accessToken": …}}), whose access token is taken. The session asked for
// that subscription, so ANTHROPIC_API_KEY, which Claude Code would prefer, is emptied.
//
// parse.go reads the stream-json output.
package claudecode

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/sdk"
)

// Harness implements the plugin; harnesses/plugins/<name>/plugin registers it.
type Harness struct{}

const bypassPermissions = "bypassPermissions"

var descriptor = abi.Descriptor{
	Name:        "claude-code",
	Label:       "Claude Code",
	Description: "Anthropic's Claude Code CLI, run headless in the sandbox.",
	Auth: &abi.Auth{
		OrgEnv:      "ANTHROPIC_API_KEY",
		OrgEnvHint:  "An Anthropic API key (sk-ant-…)",
		UserEnv:     "CLAUDE_CODE_OAUTH_TOKEN",
		UserEnvHint: "A long-lived token from `claude setup-token`, billed to your Claude subscription",
		UserOAuth:   &abi.OAuth{Provider: "anthropic", Delivery: "OAUTH_DELIVERY_OPAQUE_BUNDLE"},
	},
	Models: []abi.Option{
		{ID: "claude-sonnet-4-6", Label: "Claude Sonnet 4.6", Default: true},
		{ID: "claude-opus-4-7", Label: "Claude Opus 4.7"},
		{ID: "claude-haiku-4-5", Label: "Claude Haiku 4.5"},
	},
	Effort: []abi.Option{
		{ID: "low", Label: "Low"},
		{ID: "medium", Label: "Medium"},
		{ID: "high", Label: "High"},
		{ID: "xhigh", Label: "Extra high"},
		{ID: "max", Label: "Max"},
	},
	Modes: []abi.Mode{
		{ID: bypassPermissions, Label: "Full access", Default: true},
		{ID: "acceptEdits", Label: "Accept edits (other tools denied)"},
		{ID: "plan", Label: "Plan only"},
		{ID: "default", Label: "Ask (tools needing approval are denied)"},
	},
	RouterProtocols: []string{"anthropic"},
	NativeEgress: &abi.Egress{
		// The API, and the hosts Claude Code refreshes a subscription's OAuth token at.
		AllowHosts: []string{"api.anthropic.com", "console.anthropic.com", "platform.claude.com"},
	},
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
	argv := []string{"claude", "-p", "--output-format", "stream-json", "--verbose"}
	if model := sdk.ResolveModel(descriptor, req.Model); model != "" {
		argv = append(argv, "--model", model)
	}
	if req.Effort != "" {
		argv = append(argv, "--effort", req.Effort)
	}
	argv = append(argv, "--permission-mode", mode)
	if id := sdk.ParseHint(req.Resume).ID; id != "" {
		argv = append(argv, "--resume", id)
	}
	defaults := map[string]string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
	if mode == bypassPermissions {
		defaults["IS_SANDBOX"] = "1"
	}
	env := sdk.Env(req.Env, defaults)
	if req.Credential != "" {
		token, err := oauthToken(req.Credential)
		if err != nil {
			return abi.Plan{}, err
		}
		env["CLAUDE_CODE_OAUTH_TOKEN"], env["ANTHROPIC_API_KEY"] = token, ""
	}
	return abi.Plan{Argv: argv, Env: env, Stdin: req.Prompt}, nil
}

// oauthToken is the access token of a credential bundle: the bundle itself, or the access
// token of Claude Code's credentials file.
func oauthToken(bundle string) (string, error) {
	bundle = strings.TrimSpace(bundle)
	if !strings.HasPrefix(bundle, "{") {
		return bundle, nil
	}
	var file struct {
		ClaudeAiOauth struct {
			AccessToken string `json:"accessToken"`
		} `json:"claudeAiOauth"`
	}
	// The error says nothing of the bundle's content: it is a credential.
	if json.Unmarshal([]byte(bundle), &file) != nil || file.ClaudeAiOauth.AccessToken == "" {
		return "", errors.New("the OAuth credential is JSON but not Claude Code's credentials file (claudeAiOauth.accessToken)")
	}
	return file.ClaudeAiOauth.AccessToken, nil
}
