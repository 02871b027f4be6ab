package claudecode

import (
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/sdk/sdktest"
)

// replay runs recorded stdout through Parse in chunks of size and ends the run with status.
// Recorded runs tell the same story however their output is cut into chunks.
func TestParseRecordedRuns(t *testing.T) {
	sdktest.CheckRecordings(t, Harness{}, []sdktest.Recording{
		{
			File: "tool-use.jsonl",
			Want: []abi.Event{
				sdktest.Message("I'll count the Go files first."),
				sdktest.ToolCall("toolu_01A9bQ3rT6uVwXyZ1a2b3c4d", "Bash", `{"command":"find . -name '*.go' | wc -l","description":"Count Go files"}`),
				sdktest.ToolResult("toolu_01A9bQ3rT6uVwXyZ1a2b3c4d", "212", false),
				sdktest.ToolCall("toolu_01Bc5dE7fG9hJ1kL3mN5pQ7r", "Read", `{"file_path":"/workspace/go.mod","limit":3}`),
				sdktest.ToolResult("toolu_01Bc5dE7fG9hJ1kL3mN5pQ7r", "     1\tmodule github.com/hangar-dev/hangar\n     2\t\n     3\tgo 1.26.0", false),
				sdktest.Message("There are **212** Go files, and the module is `github.com/hangar-dev/hangar`."),
				sdktest.Usage(16+5618+46879, 206, 0.0354621),
				sdktest.Done("5f0c3c1e-8f1d-4c55-9a51-2b7f3d0e6a41"),
			},
		},
		{
			File:   "max-turns.jsonl",
			Status: 1,
			Want: []abi.Event{
				sdktest.ToolCall("toolu_01Mn2oP4qR6sT8uV0wX2yZ4a", "Bash", `{"command":"go test ./...","timeout":600000}`),
				sdktest.ToolResult("toolu_01Mn2oP4qR6sT8uV0wX2yZ4a", "Exit code 1\n--- FAIL: TestParse (0.00s)\nFAIL", true),
				sdktest.Usage(7+18240, 130, 0.00412),
				sdktest.Error("claude-code ended with error_max_turns"),
				sdktest.Done("9d2e7a40-1b6c-4f3e-8d5a-7c0b1e2f3d4c"),
			},
		},
		{
			File:   "auth-error.jsonl",
			Status: 1,
			Want: []abi.Event{
				sdktest.Message("Invalid API key · Fix external API key"),
				sdktest.Error("Invalid API key · Fix external API key"),
				sdktest.Done("1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"),
			},
		},
	})
}

func TestParseOddOutput(t *testing.T) {
	const init = `{"type":"system","subtype":"init","session_id":"s1"}` + "\n"
	const success = `{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s1"}` + "\n"
	sdktest.CheckOutputs(t, Harness{}, []sdktest.Output{
		{
			Name:   "unknown types and blank lines are ignored",
			Stdout: init + `{"type":"stream_event","event":{"type":"message_start"}}` + "\n\n" + `{"type":"system","subtype":"hook_started"}` + "\n" + success,
			Want:   []abi.Event{sdktest.Done("s1")},
		},
		{
			Name:   "garbage is no error while the run succeeds",
			Stdout: "npm notice: update available\n" + init + "[1,2]\n" + success,
			Want:   []abi.Event{sdktest.Done("s1")},
		},
		{
			Name:   "garbage and stderr explain a run that dies",
			Stdout: init + "Segmentation fault\n",
			Stderr: "node: out of memory\n",
			Status: 139,
			Want:   []abi.Event{sdktest.Error("exit status 139\nSegmentation fault\nnode: out of memory"), sdktest.Done("s1")},
		},
		{
			Name:   "a run killed before init has nothing to resume",
			Status: 137,
			Want:   []abi.Event{sdktest.Error("exit status 137"), sdktest.Done("")},
		},
		{
			Name:   "a last line without newline is read at exit",
			Stdout: init + `{"type":"result","subtype":"success","session_id":"s1"}`,
			Want:   []abi.Event{sdktest.Done("s1")},
		},
		{
			Name:   "a failed result says its errors",
			Stdout: `{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["tool crashed","gave up"],"session_id":"s2"}` + "\n",
			Status: 1,
			Want:   []abi.Event{sdktest.Error("tool crashed\ngave up"), sdktest.Done("s2")},
		},
		{
			Name:   "a user message of plain text reports nothing",
			Stdout: init + `{"type":"user","message":{"role":"user","content":"hello"}}` + "\n" + success,
			Want:   []abi.Event{sdktest.Done("s1")},
		},
	})
}
