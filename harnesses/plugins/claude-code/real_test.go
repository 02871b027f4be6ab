package claudecode

import (
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/internal/modelfake"
)

// The real Claude Code CLI, run with the plan's argv and environment against the loopback fake
// of the Messages API, does what the scripted model asks (the file edited, the commit pushed),
// sends the key it was given, and prints what the parser turns into the scenario's events. Its
// stdout is the recording testdata/real-*.jsonl, rewritten with -update-captures.
func TestRealClaudeCodeAgainstTheFakeAPI(t *testing.T) {
	cases := []struct {
		name    string
		capture string
		scripts func(dir string) []modelfake.Script
		tools   []string // the tools called, in order
	}{
		{"edits, commits and pushes", "real-edit.jsonl", func(dir string) []modelfake.Script {
			return []modelfake.Script{modelfake.ClaudeCodeEdit(dir)}
		}, []string{"Read", "Edit", "Bash"}},
		{"a subagent on another model edits", "real-subagent.jsonl", modelfake.ClaudeCodeSubagent, []string{"Task", "Read", "Edit", "Bash"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bin := modelfake.CLI(t, "claude")
			repo := modelfake.NewRepo(t)
			fake := modelfake.Start(tc.scripts(repo.Dir)...)
			defer fake.Close()
			const key = "sk-ant-api03-the-real-key"
			plan, err := Harness{}.Plan(abi.PlanRequest{Prompt: modelfake.Prompt, Env: map[string]string{"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": fake.URL}})
			if err != nil {
				t.Fatal(err)
			}
			run := modelfake.RunCLI(t, bin, plan.Argv, plan.Env, plan.Stdin, repo.Dir, "")
			modelfake.CheckRun(t, Harness{}, run, repo, fake, key, tc.tools, tc.capture)
		})
	}
}
