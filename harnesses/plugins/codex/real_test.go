package codex

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/sdk"
	"github.com/hangar-dev/hangar/internal/modelfake"
)

const key = "sk-proj-the-real-key"

// realRun runs the real codex with the plan for prompt against fake. Codex has no environment
// variable for its API's base URL; the test gives it with -c openai_base_url, its setting for
// that, where a session's sandbox reaches api.openai.com through the egress proxy instead.
func realRun(t *testing.T, fake *modelfake.Server, dir, killOn string) modelfake.Run {
	t.Helper()
	bin := modelfake.CLI(t, "codex")
	plan, err := Harness{}.Plan(abi.PlanRequest{Prompt: modelfake.Prompt, Model: "gpt-5.5", Env: map[string]string{"OPENAI_API_KEY": key}})
	if err != nil {
		t.Fatal(err)
	}
	argv := slices.Insert(slices.Clone(plan.Argv), len(plan.Argv)-1, "-c", `openai_base_url="`+fake.URL+`/v1"`)
	return modelfake.RunCLI(t, bin, argv, plan.Env, plan.Stdin, dir, killOn)
}

// The real Codex CLI, run with the plan's argv and environment against the loopback fake of the
// Responses API, does what the scripted model asks (a command that fails, the file patched, the
// commit pushed) through a dropped stream it reconnects after, sends the key it was given, and
// prints what the parser turns into the scenario's events: the failed command's result keeps
// its exit code and output, and the reconnect notice is no error. Its stdout is the recording
// testdata/real-edit.jsonl, rewritten with -update-captures.
func TestRealCodexAgainstTheFakeAPI(t *testing.T) {
	repo := modelfake.NewRepo(t)
	fake := modelfake.Start(modelfake.CodexEdit())
	defer fake.Close()
	run := realRun(t, fake, repo.Dir, "")
	if !strings.Contains(run.Stdout, "Reconnecting") {
		t.Errorf("codex did not say it reconnected after the dropped stream:\n%s", run.Stdout)
	}
	events := modelfake.CheckRun(t, Harness{}, run, repo, fake, key, []string{"shell", "apply_patch", "shell"}, "real-edit.jsonl")
	for _, e := range events {
		if e.Kind == abi.KindToolResult && strings.Contains(e.Text, "NOTES.md") {
			if !e.IsError || e.ExitCode == nil || *e.ExitCode != 1 {
				t.Errorf("the failed command's result is %+v, want an error with exit code 1", e)
			}
			return
		}
	}
	t.Errorf("no result says why `cat NOTES.md` failed: %+v", events)
}

// A Codex process killed while it reconnects (its stream dropped again and again) leaves no
// closing line: the turn ends with its exit status and what it printed last, not with the
// reconnect notice as its error. The run is kept as testdata/real-killed.jsonl and .stderr.
func TestRealCodexKilledWhileReconnecting(t *testing.T) {
	repo := modelfake.NewRepo(t)
	script := modelfake.CodexEdit()
	script.Steps[0].DropTimes = 1000
	fake := modelfake.Start(script)
	defer fake.Close()
	run := realRun(t, fake, repo.Dir, "Reconnecting")
	if run.ExitStatus != 137 {
		t.Fatalf("exit status %d, want 137 (killed); stderr:\n%s", run.ExitStatus, run.Stderr)
	}
	reqs := append(sdk.Chunked("stdout", run.Stdout, 4096), sdk.Chunked("stderr", run.Stderr, 4096)...)
	events, err := sdk.Replay(Harness{}, append(reqs, sdk.Exited(run.ExitStatus))...)
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	for _, e := range events {
		if e.Kind == abi.KindError {
			errs = append(errs, e.Text)
		}
	}
	if len(errs) != 1 || !strings.HasPrefix(errs[0], "exit status 137\n") || !strings.Contains(errs[0], "Reconnecting") {
		t.Errorf("errors %q, want one with the exit status and the last output (the reconnect notice among it)", errs)
	}
	if last := events[len(events)-1]; last.Kind != abi.KindTurnDone {
		t.Errorf("the last event is %+v, want turn.done", last)
	}
	if *modelfake.UpdateCaptures {
		for file, out := range map[string]string{"real-killed.jsonl": run.Stdout, "real-killed.stderr": run.Stderr} {
			if err := os.WriteFile(filepath.Join("testdata", file), []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The real Codex CLI, resumed turn after turn (`codex exec resume`), prints the whole
// conversation's totals in every turn.completed; each turn's usage event is that turn's own, as
// the fake model reported it, its cached input apart. Its stdout is testdata/real-resumed-N.jsonl,
// rewritten with -update-captures, which TestParseResumedRecordings… replays. The plans name no
// model, so the CLI runs the descriptor's default.
func TestRealCodexResumedTurnsReportTheirOwnUsage(t *testing.T) {
	bin := modelfake.CLI(t, "codex")
	fake := modelfake.Start(modelfake.ResumedTurns()...)
	defer fake.Close()
	runs, events := modelfake.RunResumed(t, Harness{}, bin, modelfake.ResumedPrompts, func(prompt, resume string) abi.Plan {
		plan, err := Harness{}.Plan(abi.PlanRequest{Prompt: prompt, Resume: resume, Env: map[string]string{"OPENAI_API_KEY": key}})
		if err != nil {
			t.Fatal(err)
		}
		plan.Argv = slices.Insert(slices.Clone(plan.Argv), 2, "-c", `openai_base_url="`+fake.URL+`/v1"`)
		return plan
	}, t.TempDir())
	// The plans named no model: the descriptor's default reached the CLI.
	if models := fake.Models(); !slices.Equal(models, []string{"gpt-5.5"}) {
		t.Errorf("the CLI asked for models %q, want only the descriptor's default", models)
	}
	for i, evs := range events {
		n := int64(i + 1)
		// OpenAI's input_tokens count the cached ones.
		want := abi.Usage{InputTokens: 1000*n - 100*n, OutputTokens: 10 * n, CacheReadTokens: 100 * n}
		var got abi.Usage
		for _, e := range evs {
			if e.Kind == abi.KindUsage {
				got = got.Add(*e.Usage)
			}
		}
		if got != want {
			t.Errorf("turn %d usage %+v, want %+v\nstdout:\n%s", n, got, want, runs[i].Stdout)
		}
		if *modelfake.UpdateCaptures {
			if err := os.WriteFile(filepath.Join("testdata", fmt.Sprintf("real-resumed-%d.jsonl", n)), []byte(runs[i].Stdout), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A model router for Codex is given as OPENAI_BASE_URL, which Codex itself ignores: the real
// Codex CLI, run with the plan alone (no override of the test's), reaches the router's fake at
// that URL through the model provider the plan configures, sends the router's key from
// OPENAI_API_KEY, and does the scenario's work.
func TestRealCodexReachesAModelRouterAtOPENAI_BASE_URL(t *testing.T) {
	repo := modelfake.NewRepo(t)
	fake := modelfake.Start(modelfake.CodexEdit())
	defer fake.Close()
	bin := modelfake.CLI(t, "codex")
	plan, err := Harness{}.Plan(abi.PlanRequest{Prompt: modelfake.Prompt, Model: "gpt-5.5", Env: map[string]string{
		"OPENAI_API_KEY": key, "OPENAI_BASE_URL": fake.URL + "/v1", "HANGAR_MODEL_ROUTER": "fake-router"}})
	if err != nil {
		t.Fatal(err)
	}
	run := modelfake.RunCLI(t, bin, plan.Argv, plan.Env, plan.Stdin, repo.Dir, "")
	modelfake.CheckRun(t, Harness{}, run, repo, fake, key, []string{"shell", "apply_patch", "shell"}, "real-router.jsonl")
}
