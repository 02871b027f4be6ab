package codex

import (
	"fmt"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/sdk/sdktest"
)

// Recorded runs tell the same story however their output is cut into chunks. The real-*
// recordings are the real CLI's, written by TestRealCodexAgainstTheFakeAPI and
// TestRealCodexKilledWhileReconnecting: in real-edit a failed command keeps its exit code and a
// reconnect notice is no error of the turn; real-killed ends, killed, after a reconnect notice
// and reports its exit status with its last output.
func TestParseRecordedRuns(t *testing.T) {
	// Codex's input_tokens count the cached ones, which usage keeps apart.
	fixTest := abi.Usage{InputTokens: 24763 - 24448, CacheReadTokens: 24448, OutputTokens: 422}
	const unauthorized = "unexpected status 401 Unauthorized: Incorrect API key provided: sk-proj-****. You can find your API key at https://platform.openai.com/account/api-keys."
	sdktest.CheckRecordings(t, Harness{}, []sdktest.Recording{
		{
			File: "real-edit.jsonl",
			Want: []abi.Event{
				sdktest.Message("Let me look for notes first."),
				sdktest.ToolCall("item_1", "shell", `{"command":"/bin/bash -lc 'cat NOTES.md'"}`),
				sdktest.CommandResult("item_1", "shell", "cat: NOTES.md: No such file or directory\n", true, 1),
				sdktest.ToolCall("item_2", "apply_patch", `{"changes":[{"path":"/tmp/TestRealCodexAgainstTheFakeAPI3682161747/001/work/greeting.txt","kind":"update"}]}`),
				sdktest.ToolResult("item_2", "apply_patch", "update /tmp/TestRealCodexAgainstTheFakeAPI3682161747/001/work/greeting.txt", false),
				sdktest.ToolCall("item_3", "shell", `{"command":"/bin/bash -lc \"git commit -qam 'Fix the greeting' \u0026\u0026 git push -q origin HEAD\""}`),
				sdktest.CommandResult("item_3", "shell", "", false, 0),
				sdktest.Message("Fixed the greeting and pushed the commit."),
				sdktest.Usage(5400, 112, 0),
				sdktest.DoneWith("01a214f8-ff90-7a02-8be9-632b0cddd32a", abi.Usage{InputTokens: 5400, OutputTokens: 112}),
			},
		},
		{
			File:   "real-killed.jsonl",
			Stderr: "real-killed.stderr",
			Status: 137,
			Want: []abi.Event{
				sdktest.Error("exit status 137\nReconnecting... 1/5 (stream disconnected before completion: Transport error: network error: error decoding response body)\n2026-11-25T23:09:54.395660Z ERROR codex_api::endpoint::responses_websocket: failed to connect to Responses WebSocket stage=Unknown"),
				sdktest.Done("01a214f9-071a-7480-8474-fc8e3b36bcac"),
			},
		},
		{
			File: "fix-test.jsonl",
			Want: []abi.Event{
				sdktest.ToolCall("item_1", "shell", `{"command":"/bin/bash -lc 'go test ./...'"}`),
				sdktest.CommandResult("item_1", "shell", "--- FAIL: TestAdd (0.00s)\n    add_test.go:9: Add(2, 2) = 5, want 4\nFAIL\nFAIL\texample.com/add\t0.003s\nFAIL\n", true, 1),
				sdktest.ToolCall("item_3", "apply_patch", `{"changes":[{"path":"/workspace/add.go","kind":"update"}]}`),
				sdktest.ToolResult("item_3", "apply_patch", "update /workspace/add.go", false),
				sdktest.ToolCall("item_4", "docs/search", `{"query":"table-driven tests"}`),
				sdktest.ToolResult("item_4", "docs/search", "Prefer table-driven tests.", false),
				sdktest.ToolCall("item_5", "shell", `{"command":"/bin/bash -lc 'go test ./...'"}`),
				sdktest.CommandResult("item_5", "shell", "ok  \texample.com/add\t0.002s\n", false, 0),
				sdktest.Message("Fixed `Add` in `add.go`: it returned `a + b + 1`. The tests pass now."),
				sdktest.UsageOf(fixTest),
				sdktest.DoneWith("019a7c3e-5b21-7d40-9e8f-3c2a1b0d4e5f", fixTest),
			},
		},
		{
			File:   "auth-failed.jsonl",
			Status: 1,
			Want: []abi.Event{
				sdktest.Error("Model metadata for `gpt-next` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."),
				sdktest.Error(unauthorized),
				sdktest.Done("019a7c41-0e9d-7a12-b3c4-d5e6f7a8b9c0"),
			},
		},
	})
}

func TestParseOddOutput(t *testing.T) {
	const started = `{"type":"thread.started","thread_id":"t1"}` + "\n"
	const completed = `{"type":"turn.completed","usage":{"input_tokens":0,"cached_input_tokens":0,"output_tokens":0}}` + "\n"
	sdktest.CheckOutputs(t, Harness{}, []sdktest.Output{
		{
			Name:   "unknown events and items are ignored",
			Stdout: started + `{"type":"item.plan.delta","item_id":"item_0","delta":"1."}` + "\n" + `{"type":"item.completed","item":{"id":"item_1","type":"collab_tool_call","tool":"wait"}}` + "\n" + completed,
			Want:   []abi.Event{sdktest.Done("t1")},
		},
		{
			Name:   "stderr chatter is no error while the run succeeds",
			Stdout: started + completed,
			Stderr: "Reading prompt from stdin...\n",
			Want:   []abi.Event{sdktest.Done("t1")},
		},
		{
			Name:   "garbage and stderr explain a run that dies",
			Stdout: started + "thread 'main' panicked at core/src/codex.rs:1:1\n",
			Stderr: "Error: stream disconnected\n",
			Status: 101,
			Want:   []abi.Event{sdktest.Error("exit status 101\nthread 'main' panicked at core/src/codex.rs:1:1\nError: stream disconnected"), sdktest.Done("t1")},
		},
		{
			Name:   "a tool running when the process dies stays a call",
			Stdout: started + `{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"sleep 100","aggregated_output":"","exit_code":null,"status":"in_progress"}}` + "\n",
			Status: 137,
			Want:   []abi.Event{sdktest.ToolCall("item_0", "shell", `{"command":"sleep 100"}`), sdktest.Error("exit status 137"), sdktest.Done("t1")},
		},
		{
			Name: "a web search is reported when it completes",
			Stdout: started + `{"type":"item.started","item":{"id":"item_0","type":"web_search","query":"","action":{"type":"other"}}}` + "\n" +
				`{"type":"item.completed","item":{"id":"item_0","type":"web_search","query":"wazero memory limit","action":{"type":"search","query":"wazero memory limit"}}}` + "\n" + completed,
			Want: []abi.Event{sdktest.ToolCall("item_0", "web_search", `{"query":"wazero memory limit"}`), sdktest.ToolResult("item_0", "web_search", "", false), sdktest.Done("t1")},
		},
		{
			Name: "a declined command and a failed MCP call are errors",
			Stdout: started + `{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"rm -rf /","aggregated_output":"","exit_code":null,"status":"declined"}}` + "\n" +
				`{"type":"item.completed","item":{"id":"item_1","type":"mcp_tool_call","server":"gh","tool":"pr","arguments":{},"result":null,"error":{"message":"timed out"},"status":"failed"}}` + "\n" + completed,
			Want: []abi.Event{
				sdktest.ToolCall("item_0", "shell", `{"command":"rm -rf /"}`), sdktest.ToolResult("item_0", "shell", "declined", true),
				sdktest.ToolCall("item_1", "gh/pr", `{}`), sdktest.ToolResult("item_1", "gh/pr", "timed out", true),
				sdktest.Done("t1"),
			},
		},
	})
}

// The real CLI's three resumed turns of one thread (TestRealCodexResumedTurns… records them),
// each replayed with the hint the turn before ended with: every turn.completed counts the whole
// thread, and every usage event is its own turn's.
func TestParseResumedRecordingsReportEachTurnsOwnUsage(t *testing.T) {
	const id = "01a2378b-9531-7400-b889-f7cc911800ba"
	var recs []sdktest.Recording
	resume := ""
	for i := range 3 {
		n := int64(i + 1)
		// The fake model's turn n: 1000n input tokens, 100n of them cached, and 10n output.
		turn := abi.Usage{InputTokens: 900 * n, CacheReadTokens: 100 * n, OutputTokens: 10 * n}
		total := abi.Usage{InputTokens: 900 * n * (n + 1) / 2, CacheReadTokens: 100 * n * (n + 1) / 2, OutputTokens: 10 * n * (n + 1) / 2}
		done := sdktest.DoneWith(id, total)
		recs = append(recs, sdktest.Recording{
			File:   fmt.Sprintf("real-resumed-%d.jsonl", n),
			Resume: resume,
			Want:   []abi.Event{sdktest.Message(fmt.Sprintf("Hello number %d.", n)), sdktest.UsageOf(turn), done},
		})
		resume = done.Resume
	}
	sdktest.CheckRecordings(t, Harness{}, recs)
}
