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
//
// # Client tools
//
// A script can call a tool that the API's client answers (CompleteToolCall), which makes client
// tools testable offline:
//
//	forecast=$(hangar_tool weather '{"city":"Paris"}')
//
// hangar_tool NAME [JSON] (NAME: letters, digits, '_', '.', ':', '-'; JSON on one line, default
// {}) prints the line "::hangar-tool-call::ID NAME JSON" to the turn's stdout, which Parse
// reports as a tool.call with client set (not as a message), waits for the client's result on a
// line of the turn's stdin, and prints it. The ID is a fresh UUID from the kernel, since a
// counter could not outlive the subshell of $(…) without a file in the sandbox; JSON that does
// not parse is reported as a JSON string. ToolResult writes the client's result_json, compacted
// onto one line, and a newline. The plan keeps stdin open for it (KeepStdin); the script itself
// still reads /dev/null, as before: the launcher moves the turn's stdin to fd 9 and keeps its
// stdout on fd 8 for the call lines (so that $(…) does not capture them), so a script must leave
// fds 8 and 9 alone. Calls are answered in the order they are made: a script should make one at
// a time, as concurrent calls from background jobs may read each other's results. hangar_tool is
// defined on the script's first line, ahead of the prompt, so line numbers in messages stay the
// prompt's own.
package bash

import (
	"bytes"
	"encoding/json"
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
		Description: "Runs each prompt as a shell script in the sandbox (bash when the image has it, sh otherwise). Needs no model and no credentials. A script calls a client-side tool with hangar_tool NAME JSON.",
	}
}

// launcher picks bash when the image has it and runs toolPrelude followed by the script, its
// first argument ("--" so that a script starting with "-" is not read as options), with the
// turn's stdout also on fd 8 and its stdin moved to fd 9 (see "Client tools").
const launcher = `exec 8>&1 9<&0 </dev/null; command -v bash >/dev/null 2>&1 && exec bash -c -- "$2$1"; exec /bin/sh -c -- "$2$1"`

// toolCallMarker starts the stdout line of a client tool call.
const toolCallMarker = "::hangar-tool-call::"

// toolPrelude defines hangar_tool in POSIX sh, on one line so the script's lines keep their
// numbers.
const toolPrelude = `hangar_tool() { ` +
	`case ${1-} in ''|*[!A-Za-z0-9_.:-]*) echo "usage: hangar_tool NAME [JSON] (NAME of letters, digits, _ . : -)" >&2; return 2;; esac; ` +
	`_hangar_tool_input=${2-}; [ -n "$_hangar_tool_input" ] || _hangar_tool_input='{}'; ` +
	`read -r _hangar_tool_id </proc/sys/kernel/random/uuid || return; ` +
	`printf '` + toolCallMarker + `%s %s %s\n' "$_hangar_tool_id" "$1" "$_hangar_tool_input" >&8 || return; ` +
	`IFS= read -r _hangar_tool_result <&9 || { echo "hangar_tool: no result for $1 (the turn's stdin closed)" >&2; return 1; }; ` +
	`printf '%s\n' "$_hangar_tool_result"; }; `

func (Harness) Plan(req abi.PlanRequest) (abi.Plan, error) {
	return abi.Plan{
		Argv:      []string{"/bin/sh", "-c", launcher, "hangar-bash", req.Prompt, toolPrelude},
		Env:       sdk.Env(req.Env, nil),
		KeepStdin: true,
	}, nil
}

// ToolResult hands the script its result as one line of stdin, which hangar_tool reads.
func (Harness) ToolResult(req abi.ToolResultRequest) (abi.ToolResult, error) {
	var line bytes.Buffer
	if err := json.Compact(&line, []byte(req.ResultJSON)); err != nil {
		return abi.ToolResult{}, fmt.Errorf("result_json of %s: %w", req.ToolCallID, err)
	}
	line.WriteByte('\n')
	return abi.ToolResult{Stdin: line.String()}, nil
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
		events = append(events, read(req.Stream, out.Feed(req.Chunk))...)
	}
	if req.Final {
		for _, stream := range []string{"stdout", "stderr"} {
			out, _ := st.stream(stream)
			if last, ok := out.Flush(); ok {
				events = append(events, read(stream, []string{last})...)
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

// read reports complete lines of a stream: each run of ordinary lines is one message, and a
// tool call line on stdout a client tool call.
func read(stream string, lines []string) []abi.Event {
	var events []abi.Event
	var run []string
	for _, line := range lines {
		if call, ok := toolCall(line); ok && stream == "stdout" {
			events = append(append(events, message(run)...), call)
			run = nil
			continue
		}
		run = append(run, line)
	}
	return append(events, message(run)...)
}

// toolCall reads a line hangar_tool printed: "::hangar-tool-call::ID NAME JSON".
func toolCall(line string) (abi.Event, bool) {
	rest, ok := strings.CutPrefix(line, toolCallMarker)
	if !ok {
		return abi.Event{}, false
	}
	id, rest, _ := strings.Cut(rest, " ")
	name, input, _ := strings.Cut(rest, " ")
	if id == "" || name == "" {
		return abi.Event{}, false
	}
	raw := json.RawMessage(input)
	if !json.Valid(raw) {
		// A string always encodes.
		raw, _ = json.Marshal(input)
	}
	return abi.Event{Kind: abi.KindToolCall, ToolCallID: id, ToolName: name, Input: raw, Client: true}, true
}

// message is one assistant.message of lines, none when they are blank.
func message(lines []string) []abi.Event {
	text := strings.Join(lines, "\n")
	if strings.TrimSpace(text) == "" {
		return nil
	}
	return []abi.Event{{Kind: abi.KindAssistantMessage, Text: text}}
}
