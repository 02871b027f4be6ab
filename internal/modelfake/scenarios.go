package modelfake

import (
	"fmt"
	"path/filepath"
)

// The scenarios the tests of the real CLIs play: the model edits a file of a git repository
// with the CLI's own tools, commits and pushes, then answers. Each is keyed on Prompt.

// Prompt is the prompt the scenarios answer.
const Prompt = "Please fix the greeting in greeting.txt, then commit and push."

// The file the scenarios edit, what it holds before and after, and the commit's message.
const (
	EditedFile    = "greeting.txt"
	Before        = "hello wrld\n"
	After         = "hello world\n"
	CommitMessage = "Fix the greeting"
)

// Final is the model's last answer in every scenario.
const Final = "Fixed the greeting and pushed the commit."

// commit is the shell command that commits and pushes the edit.
const commit = "git commit -qam '" + CommitMessage + "' && git push -q origin HEAD"

// ClaudeCodeEdit is the scenario for Claude Code working in dir: Read (Edit refuses a file it
// has not read), Edit, Bash to commit and push, answer.
func ClaudeCodeEdit(dir string) Script {
	path := filepath.Join(dir, EditedFile)
	return Script{Match: Prompt, Steps: []Step{
		{Text: "Let me read the file first.", Tool: &ToolCall{Name: "Read", Input: map[string]any{"file_path": path}}, InputTokens: 1200, OutputTokens: 30},
		{Tool: &ToolCall{Name: "Edit", Input: map[string]any{"file_path": path, "old_string": "wrld", "new_string": "world"}}, InputTokens: 1300, OutputTokens: 40},
		{Tool: &ToolCall{Name: "Bash", Input: map[string]any{"command": commit, "description": "Commit and push the fix"}}, InputTokens: 1400, OutputTokens: 30},
		{Text: Final, InputTokens: 1500, OutputTokens: 12},
	}}
}

// SubagentPrompt is what ClaudeCodeSubagent's main agent asks its subagent.
const SubagentPrompt = "Subagent task: fix the greeting in greeting.txt."

// ClaudeCodeSubagent is the scenario in which Claude Code's main agent hands the edit to a
// subagent on another model (haiku) in the foreground, then commits, pushes and answers; the
// subagent reads and edits. So the run's usage spans two models.
func ClaudeCodeSubagent(dir string) []Script {
	path := filepath.Join(dir, EditedFile)
	return []Script{
		{Match: SubagentPrompt, Steps: []Step{
			{Text: "Reading it.", Tool: &ToolCall{Name: "Read", Input: map[string]any{"file_path": path}}, InputTokens: 300, OutputTokens: 9},
			{Tool: &ToolCall{Name: "Edit", Input: map[string]any{"file_path": path, "old_string": "wrld", "new_string": "world"}}, InputTokens: 350, OutputTokens: 11},
			{Text: "The greeting is fixed.", InputTokens: 400, OutputTokens: 6},
		}},
		{Match: Prompt, Steps: []Step{
			{Text: "I'll delegate the edit.", Tool: &ToolCall{Name: "Task", Input: map[string]any{
				"description": "Fix the greeting", "prompt": SubagentPrompt, "subagent_type": "general-purpose",
				"model": "haiku", "run_in_background": false,
			}}, InputTokens: 1200, OutputTokens: 40},
			{Tool: &ToolCall{Name: "Bash", Input: map[string]any{"command": commit, "description": "Commit and push the fix"}}, InputTokens: 1400, OutputTokens: 30},
			{Text: Final, InputTokens: 1500, OutputTokens: 12},
		}},
	}
}

// CodexEdit is the scenario for Codex: a command that fails (the model looks for a file that is
// not there), apply_patch, a command to commit and push, answer. The answer to the failed
// command is cut off once mid-stream, so Codex reconnects and says so.
func CodexEdit() Script {
	patch := "*** Begin Patch\n*** Update File: " + EditedFile + "\n@@\n-hello wrld\n+hello world\n*** End Patch\n"
	return Script{Match: Prompt, Steps: []Step{
		{Text: "Let me look for notes first.", Tool: &ToolCall{Name: "exec_command", Input: map[string]any{"cmd": "cat NOTES.md"}}, InputTokens: 1200, OutputTokens: 30},
		{Tool: &ToolCall{Name: "apply_patch", Custom: true, Input: patch}, InputTokens: 1300, OutputTokens: 40, DropTimes: 1},
		{Tool: &ToolCall{Name: "exec_command", Input: map[string]any{"cmd": commit}}, InputTokens: 1400, OutputTokens: 30},
		{Text: Final, InputTokens: 1500, OutputTokens: 12},
	}}
}

// ToolTurnPrompt is the prompt ClaudeCodeToolTurn answers.
const ToolTurnPrompt = "Which system is this? Read /etc/os-release."

// ToolTurnAnswer is the model's answer in ClaudeCodeToolTurn.
const ToolTurnAnswer = "This is Linux."

// ToolTurnFile is the file ClaudeCodeToolTurn reads: one every Linux system has, the agent
// image's and the machine's alike, so the turn runs the same in a sandbox and on the host.
const ToolTurnFile = "/etc/os-release"

// ClaudeCodeToolTurn is the smallest turn with a tool for Claude Code: one tool call (Read),
// its result, the answer. The benchmarks of a real turn play it.
func ClaudeCodeToolTurn() Script {
	return Script{Match: ToolTurnPrompt, Steps: []Step{
		{Text: "Let me read it.", Tool: &ToolCall{Name: "Read", Input: map[string]any{"file_path": ToolTurnFile}}, InputTokens: 1200, OutputTokens: 20},
		{Text: ToolTurnAnswer, InputTokens: 1300, OutputTokens: 8},
	}}
}

// ResumedPrompts are the prompts of ResumedTurns, one a turn of one conversation.
var ResumedPrompts = []string{"Resumed turn one: say hello.", "Resumed turn two: say it again.", "Resumed turn three: and once more."}

// ResumedTurns answers each of ResumedPrompts with text and no tool, each turn with usage of its
// own (cache reads and writes too), so that a CLI resuming the conversation shows how it counts
// a later turn. A resumed conversation holds the earlier prompts, so the latest turn's script
// comes first.
func ResumedTurns() []Script {
	var scripts []Script
	for i, p := range ResumedPrompts {
		n := int64(i + 1)
		scripts = append([]Script{{Match: p, Steps: []Step{{
			Text: fmt.Sprintf("Hello number %d.", n), InputTokens: 1000 * n, OutputTokens: 10 * n,
			CacheReadTokens: 100 * n, CacheWriteTokens: 20 * n,
		}}}}, scripts...)
	}
	return scripts
}
