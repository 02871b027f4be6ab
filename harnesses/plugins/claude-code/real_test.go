package claudecode

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// The real Claude Code CLI, resumed turn after turn, prints the whole conversation's totals in
// every result; each turn's usage event is that turn's own, as the fake model reported it, with
// its cache reads and writes apart. Its stdout is testdata/real-resumed-N.jsonl, rewritten with
// -update-captures, which TestParseResumedRecordings replays. The plans name no model, so the
// CLI runs the descriptor's default.
func TestRealClaudeCodeResumedTurnsReportTheirOwnUsage(t *testing.T) {
	bin := modelfake.CLI(t, "claude")
	fake := modelfake.Start(modelfake.ResumedTurns()...)
	defer fake.Close()
	runs, events := modelfake.RunResumed(t, Harness{}, bin, modelfake.ResumedPrompts, func(prompt, resume string) abi.Plan {
		plan, err := Harness{}.Plan(abi.PlanRequest{Prompt: prompt, Resume: resume, Env: map[string]string{"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake.URL}})
		if err != nil {
			t.Fatal(err)
		}
		return plan
	}, t.TempDir())
	// The plans named no model: the descriptor's default reached the CLI.
	if models := fake.Models(); !slices.Equal(models, []string{"claude-sonnet-4-6"}) {
		t.Errorf("the CLI asked for models %q, want only the descriptor's default", models)
	}
	for i, evs := range events {
		n := int64(i + 1)
		want := abi.Usage{InputTokens: 1000 * n, OutputTokens: 10 * n, CacheReadTokens: 100 * n, CacheWriteTokens: 20 * n}
		if got := turnUsage(evs); got.InputTokens != want.InputTokens || got.OutputTokens != want.OutputTokens ||
			got.CacheReadTokens != want.CacheReadTokens || got.CacheWriteTokens != want.CacheWriteTokens || got.CostUSD <= 0 {
			t.Errorf("turn %d usage %+v, want %+v and a cost\nstdout:\n%s", n, got, want, runs[i].Stdout)
		}
		if *modelfake.UpdateCaptures {
			if err := os.WriteFile(filepath.Join("testdata", fmt.Sprintf("real-resumed-%d.jsonl", n)), []byte(runs[i].Stdout), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// turnUsage is the sum of a turn's usage events.
func turnUsage(events []abi.Event) abi.Usage {
	var u abi.Usage
	for _, e := range events {
		if e.Kind == abi.KindUsage {
			u = u.Add(*e.Usage)
		}
	}
	return u
}
