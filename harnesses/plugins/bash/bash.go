// Package bash is the harness that needs no model: a prompt is a shell script, run in the
// sandbox, and what it prints is the answer. It is the harness `hangar dev` uses by default, so
// that a session works offline on a fresh machine.
//
// Plan runs the script with bash when the image has it and with sh otherwise, passing it as an
// argument: nothing is written into the sandbox, so nothing of the harness ends up in a
// snapshot. (An argument is bounded by the kernel to 128 KiB, plenty for a script typed as a
// prompt.)
//
// Parse reports, for each chunk, the complete lines it brings as one assistant.message per
// stream, so a burst of output is one message rather than one per line; an unfinished line waits
// in State for the rest, and blank output is not reported. stderr is ordinary output of a script
// and is reported the same way. When the script exits, its unfinished lines are reported, then
// an error "exit status N" if it failed, then turn.done.
package bash

import (
	"fmt"
	"strings"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/sdk"
)

// Harness implements the plugin; harnesses/plugins/<name>/plugin registers it.
type Harness struct{}

func (Harness) Describe() abi.Descriptor {
	return abi.Descriptor{
		Name:        "bash",
		Label:       "Bash",
		Description: "Runs each prompt as a shell script in the sandbox (bash when the image has it, sh otherwise). Needs no model and no credentials.",
	}
}

// launcher picks bash when the image has it; the script is its first argument ("--" so that a
// script starting with "-" is not read as options).
const launcher = `command -v bash >/dev/null 2>&1 && exec bash -c -- "$1"; exec /bin/sh -c -- "$1"`

func (Harness) Plan(req abi.PlanRequest) (abi.Plan, error) {
	return abi.Plan{
		Argv: []string{"/bin/sh", "-c", launcher, "hangar-bash", req.Prompt},
		Env:  sdk.Env(req.Env, nil),
	}, nil
}

type state struct {
	Stdout sdk.LineBuffer `json:"stdout,omitzero"`
	Stderr sdk.LineBuffer `json:"stderr,omitzero"`
	Turn   sdk.Turn       `json:"turn,omitzero"`
}

func (Harness) Parse(req abi.ParseRequest) (abi.ParseResult, error) {
	var st state
	if err := sdk.DecodeState(req.State, &st); err != nil {
		return abi.ParseResult{}, err
	}
	var events []abi.Event
	if req.Chunk != "" {
		out, err := st.stream(req.Stream)
		if err != nil {
			return abi.ParseResult{}, err
		}
		events = append(events, message(out.Feed(req.Chunk))...)
	}
	if req.Final {
		for _, out := range []*sdk.LineBuffer{&st.Stdout, &st.Stderr} {
			if last, ok := out.Flush(); ok {
				events = append(events, message([]string{last})...)
			}
		}
		events = append(events, st.Turn.Exit(req.ExitStatus)...)
	}
	s, err := sdk.EncodeState(st)
	return abi.ParseResult{Events: events, State: s}, err
}

func (st *state) stream(name string) (*sdk.LineBuffer, error) {
	switch name {
	case "stdout":
		return &st.Stdout, nil
	case "stderr":
		return &st.Stderr, nil
	}
	return nil, fmt.Errorf("unknown stream %q", name)
}

// message is one assistant.message of lines, none when they are blank.
func message(lines []string) []abi.Event {
	text := strings.Join(lines, "\n")
	if strings.TrimSpace(text) == "" {
		return nil
	}
	return []abi.Event{{Kind: abi.KindAssistantMessage, Text: text}}
}
