package claudecode

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/sdk"
	"github.com/hangar-dev/hangar/internal/modelfake"
)

var updateCaptures = flag.Bool("update-captures", false, "rewrite testdata/real-*.jsonl from the real CLI's output")

// The real Claude Code CLI, run with the plan's argv and environment against the loopback fake
// of the Messages API, does what the scripted model asks (the file edited, the commit pushed),
// sends the key it was given, and prints what the parser turns into the scenario's events. Its
// stdout is the recording testdata/real-*.jsonl, rewritten with -update-captures.
func TestRealClaudeCodeAgainstTheFakeAPI(t *testing.T) {
	cases := []struct {
		name    string
		file    string
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
			run := modelfake.RunCLI(t, bin, plan.Argv, plan.Env, plan.Stdin, repo.Dir)
			if run.ExitStatus != 0 {
				t.Fatalf("claude exited %d; stderr:\n%s", run.ExitStatus, run.Stderr)
			}
			if subject, content := repo.Pushed(t); subject != modelfake.CommitMessage || content != modelfake.After {
				t.Errorf("pushed %q with %q, want %q with %q", subject, content, modelfake.CommitMessage, modelfake.After)
			}
			if creds := fake.Credentials(); !slices.Equal(creds, []string{key}) {
				t.Errorf("the fake was sent credentials %q, want only the key", creds)
			}
			events, err := sdk.Replay(Harness{}, append(sdk.Chunked("stdout", run.Stdout, 4096), sdk.Exited(run.ExitStatus))...)
			if err != nil {
				t.Fatal(err)
			}
			var tools []string
			for _, e := range events {
				switch {
				case e.Kind == abi.KindError:
					t.Errorf("error event %q", e.Text)
				case e.Kind == abi.KindToolCall:
					tools = append(tools, e.ToolName)
				case e.Kind == abi.KindToolResult && e.IsError:
					t.Errorf("tool result of %s is an error: %s", e.ToolCallID, e.Text)
				}
			}
			if !slices.Equal(tools, tc.tools) {
				t.Errorf("tools called %q, want %q", tools, tc.tools)
			}
			if last := events[len(events)-1]; last.Kind != abi.KindTurnDone || last.Resume == "" {
				t.Errorf("the last event is %+v, want turn.done with a session to resume", last)
			}
			if *updateCaptures {
				if err := os.WriteFile(filepath.Join("testdata", tc.file), []byte(run.Stdout), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
