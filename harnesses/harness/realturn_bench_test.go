package harness_test

import (
	"context"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/harness"
	claudecode "github.com/hangar-dev/hangar/harnesses/plugins/claude-code"
	"github.com/hangar-dev/hangar/internal/modelfake"
	"github.com/hangar-dev/hangar/runtimes/wasm"
)

// BenchmarkClaudeCodeToolTurn is a tool turn of the real Claude Code CLI against the loopback
// fake of the Messages API (read, edit, commit and push, answer) with what the harness plugin
// adds to it outside a sandbox: the plan asked of the plugin, and the CLI's output carried and
// parsed through it, after the run (an upper bound: a host parses while the CLI runs): the
// plugin's share alone. The whole of Hangar's share, in a session of the agent image through the
// egress proxy, is e2e's BenchmarkClaudeCodeToolTurnInSession.
func BenchmarkClaudeCodeToolTurn(b *testing.B) {
	p := load(b, newRuntime(b, wasm.Options{}), "claude-code")
	ctx := context.Background()
	realTurns(b, func(req abi.PlanRequest) abi.Plan {
		plan, err := p.Plan(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		return plan
	}, func(run modelfake.Run) {
		var carry harness.Carry
		state := ""
		for _, req := range []abi.ParseRequest{
			{Stream: "stdout", Chunk: string(carry.Next([]byte(run.Stdout)))},
			{Stream: "stdout", Chunk: string(carry.Rest())},
			{Final: true, ExitStatus: run.ExitStatus},
		} {
			req.State = state
			res, err := p.Parse(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			state = res.State
		}
	})
}

// BenchmarkRawClaudeCodeToolTurn is its baseline: the same turn of the CLI alone.
func BenchmarkRawClaudeCodeToolTurn(b *testing.B) {
	realTurns(b, func(req abi.PlanRequest) abi.Plan {
		plan, err := claudecode.Harness{}.Plan(req)
		if err != nil {
			b.Fatal(err)
		}
		return plan
	}, func(modelfake.Run) {})
}

// realTurns runs b.N turns of the real CLI, each in a new repository (made off the clock),
// planned by plan and their output handed to parse.
func realTurns(b *testing.B, plan func(abi.PlanRequest) abi.Plan, parse func(modelfake.Run)) {
	bin := modelfake.CLI(b, "claude")
	for b.Loop() {
		b.StopTimer()
		repo := modelfake.NewRepo(b)
		fake := modelfake.Start(modelfake.ClaudeCodeEdit(repo.Dir))
		b.StartTimer()
		pl := plan(abi.PlanRequest{Prompt: modelfake.Prompt, Env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-bench", "ANTHROPIC_BASE_URL": fake.URL}})
		run := modelfake.RunCLI(b, bin, pl.Argv, pl.Env, pl.Stdin, repo.Dir, "")
		parse(run)
		b.StopTimer()
		fake.Close()
		if run.ExitStatus != 0 {
			b.Fatalf("claude exited %d: %s", run.ExitStatus, run.Stderr)
		}
		b.StartTimer()
	}
}
