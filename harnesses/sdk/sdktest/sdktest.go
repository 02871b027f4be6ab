// Package sdktest helps test a harness plugin natively, before it is ever built to WebAssembly:
// constructors of the events a parser reports, and a runner for tables of plans.
package sdktest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/sdk"
)

// Message is an assistant message.
func Message(text string) abi.Event { return abi.Event{Kind: abi.KindAssistantMessage, Text: text} }

// ToolCall is a call of tool name with the JSON input.
func ToolCall(id, name, input string) abi.Event {
	return abi.Event{Kind: abi.KindToolCall, ToolCallID: id, ToolName: name, Input: json.RawMessage(input)}
}

// ClientToolCall is a call of tool name that waits for the API's client to answer it.
func ClientToolCall(id, name, input string) abi.Event {
	e := ToolCall(id, name, input)
	e.Client = true
	return e
}

// ToolResult is what tool call id, of the tool name, gave.
func ToolResult(id, name, text string, isError bool) abi.Event {
	return abi.Event{Kind: abi.KindToolResult, ToolCallID: id, ToolName: name, Text: text, IsError: isError}
}

// Under is e as a subagent's event, started by the tool call parent.
func Under(parent string, e abi.Event) abi.Event {
	e.ParentToolCallID = parent
	return e
}

// CommandResult is what tool call id, a command of the tool name, gave, with its exit code.
func CommandResult(id, name, text string, isError bool, exitCode int) abi.Event {
	e := ToolResult(id, name, text, isError)
	e.ExitCode = &exitCode
	return e
}

// Usage is a turn's cost.
func Usage(in, out int64, cost float64) abi.Event {
	return abi.Event{Kind: abi.KindUsage, Usage: &abi.Usage{InputTokens: in, OutputTokens: out, CostUSD: cost}}
}

// UsageOf is a turn's usage, cache reads and writes included.
func UsageOf(u abi.Usage) abi.Event { return abi.Event{Kind: abi.KindUsage, Usage: &u} }

// DoneWith ends a turn of conversation id, whose usage totals are now totals (sdk.Hint).
func DoneWith(id string, totals abi.Usage) abi.Event {
	return Done(sdk.Hint{ID: id, Totals: totals}.String())
}

// Error is an error the harness reported.
func Error(text string) abi.Event { return abi.Event{Kind: abi.KindError, Text: text} }

// Done ends a turn; resume continues its conversation.
func Done(resume string) abi.Event { return abi.Event{Kind: abi.KindTurnDone, Resume: resume} }

// PlanCase is one row of a plan table: the plan Req must give, or the error it must give.
type PlanCase struct {
	Name    string
	Req     abi.PlanRequest
	Want    abi.Plan
	WantErr string // a part of the error's message
}

// CheckPlans runs each case against h as a subtest.
func CheckPlans(t *testing.T, h sdk.Harness, cases []PlanCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) { checkCall(t, h.Plan, tc.Req, tc.Want, tc.WantErr) })
	}
}

// checkCall checks one row of a table: call(req) gives want, or an error containing wantErr.
func checkCall[Req, Res any](t *testing.T, call func(Req) (Res, error), req Req, want Res, wantErr string) {
	t.Helper()
	got, err := call(req)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%T\n%+v\nwant\n%+v", got, got, want)
	}
}

// ToolResultCase is one row of a tool result table: what Req must write to the harness's
// stdin (and the parse state it must leave), or the error it must give.
type ToolResultCase struct {
	Name    string
	Req     abi.ToolResultRequest
	Want    abi.ToolResult
	WantErr string // a part of the error's message
}

// CheckToolResults runs each case against h as a subtest.
func CheckToolResults(t *testing.T, h sdk.ToolResulter, cases []ToolResultCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) { checkCall(t, h.ToolResult, tc.Req, tc.Want, tc.WantErr) })
	}
}

// Recording is a run of a harness recorded in a file of stdout, with its exit status, and the
// events it must give.
type Recording struct {
	File string // under testdata/
	// Stderr is a file of what the run printed on stderr, under testdata/ ("" for none); it is
	// replayed after stdout.
	Stderr string
	Status int
	// Resume is the resume hint of the turn before ("" for a first turn).
	Resume string
	Want   []abi.Event
}

// CheckRecordings replays each recording into h in chunks of 1, 7 and 100 bytes and whole: a
// parser must tell the same story however its output is cut.
func CheckRecordings(t *testing.T, h sdk.Harness, recs []Recording) {
	t.Helper()
	for _, rec := range recs {
		t.Run(rec.File, func(t *testing.T) {
			stdout, err := os.ReadFile(filepath.Join("testdata", rec.File))
			if err != nil {
				t.Fatal(err)
			}
			var stderr []byte
			if rec.Stderr != "" {
				if stderr, err = os.ReadFile(filepath.Join("testdata", rec.Stderr)); err != nil {
					t.Fatal(err)
				}
			}
			for _, size := range []int{1, 7, 100, max(len(stdout), len(stderr))} {
				reqs := append(sdk.Chunked("stdout", string(stdout), size), sdk.Chunked("stderr", string(stderr), size)...)
				got, err := sdk.ReplayResumed(h, rec.Resume, append(reqs, sdk.Exited(rec.Status))...)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, rec.Want) {
					t.Fatalf("in chunks of %d:\n%+v\nwant\n%+v", size, got, rec.Want)
				}
			}
		})
	}
}

// Output is a run given inline: what it printed on each stream, its exit status and the events
// it must give.
type Output struct {
	Name           string
	Stdout, Stderr string
	Status         int
	Want           []abi.Event
}

// CheckOutputs replays each output into h, both streams in chunks of 5 bytes.
func CheckOutputs(t *testing.T, h sdk.Harness, outs []Output) {
	t.Helper()
	for _, out := range outs {
		t.Run(out.Name, func(t *testing.T) {
			reqs := append(sdk.Chunked("stdout", out.Stdout, 5), sdk.Chunked("stderr", out.Stderr, 5)...)
			got, err := sdk.Replay(h, append(reqs, sdk.Exited(out.Status))...)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, out.Want) {
				t.Fatalf("events\n%+v\nwant\n%+v", got, out.Want)
			}
		})
	}
}
