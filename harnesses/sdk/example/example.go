// Package example is the smallest useful harness plugin, the one docs/harnesses.md's "Write a harness
// plugin" walks through: the "echo" harness prints its prompt back, and every line it prints is
// an assistant message. plugin/ is its WebAssembly build.
package example

import (
	"errors"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/sdk"
)

// Harness implements the echo harness.
type Harness struct{}

// Describe says what the harness is; Hangar shows it in the harness catalog.
func (Harness) Describe() abi.Descriptor {
	return abi.Descriptor{Name: "echo", Label: "Echo", Description: "Prints the prompt back."}
}

// Plan runs echo with the prompt as its argument.
func (Harness) Plan(req abi.PlanRequest) (abi.Plan, error) {
	if req.Prompt == "" {
		return abi.Plan{}, errors.New("the prompt is empty")
	}
	return abi.Plan{Argv: []string{"echo", req.Prompt}, Env: req.Env}, nil
}

// Parse turns each line of stdout into an assistant message; ParseLines carries partial lines
// and ends the turn when the process exits.
func (Harness) Parse(req abi.ParseRequest) (abi.ParseResult, error) {
	return sdk.ParseLines[state](req)
}

// state is what Parse carries from one chunk to the next.
type state struct {
	sdk.Output
}

// Read reports one line of stdout.
func (s *state) Read(line string) []abi.Event {
	return []abi.Event{{Kind: abi.KindAssistantMessage, Text: line}}
}
