// Package echo is the logic of the test echo harness, apart from the ABI so that the benchmarks
// can run the very same work natively as a baseline for the plugin.
package echo

import (
	"errors"
	"strconv"
	"strings"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

// Descriptor describes the echo harness.
func Descriptor() abi.Descriptor {
	return abi.Descriptor{
		Name:   "echo",
		Label:  "Echo",
		Models: []abi.Option{{ID: "plain", Default: true}},
		Modes:  []abi.Mode{{ID: "run", Default: true}},
	}
}

// Plan runs the prompt as a shell command.
func Plan(req abi.PlanRequest) (abi.Plan, error) {
	if req.Prompt == "" {
		return abi.Plan{}, errors.New("the echo harness needs a prompt")
	}
	return abi.Plan{Argv: []string{"sh", "-c", req.Prompt}, Env: req.Env}, nil
}

// Parse reports each complete line of stdout as an assistant message and carries a partial
// line in the state; the final call flushes it and ends the turn.
func Parse(req abi.ParseRequest) abi.ParseResult {
	if req.Stream != "stdout" && !req.Final {
		return abi.ParseResult{State: req.State}
	}
	var res abi.ParseResult
	pending := req.State + req.Chunk
	for {
		line, rest, found := strings.Cut(pending, "\n")
		if !found {
			break
		}
		res.Events = append(res.Events, abi.Event{Kind: abi.KindAssistantMessage, Text: line})
		pending = rest
	}
	if !req.Final {
		res.State = pending
		return res
	}
	if pending != "" {
		res.Events = append(res.Events, abi.Event{Kind: abi.KindAssistantMessage, Text: pending})
	}
	done := abi.Event{Kind: abi.KindTurnDone}
	if req.ExitStatus != 0 {
		done.IsError = true
		done.Text = "exit status " + strconv.Itoa(req.ExitStatus)
	}
	res.Events = append(res.Events, done)
	return res
}

// ToolResult delivers a client's result as a line of stdin and counts deliveries in the state.
func ToolResult(req abi.ToolResultRequest) (abi.ToolResult, error) {
	if req.ToolCallID == "" {
		return abi.ToolResult{}, errors.New("the echo harness needs a tool_call_id")
	}
	return abi.ToolResult{Stdin: req.ToolCallID + " " + req.ResultJSON + "\n", State: req.State + "+"}, nil
}
