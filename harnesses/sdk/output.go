package sdk

import (
	"fmt"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

// Output is the part of a parser's State that follows a harness which reports on stdout a line
// at a time (JSON lines, typically) and writes to stderr only what may explain a failure. A
// parser embeds it in its State and reads the lines; ParseLines does the rest.
type Output struct {
	Stdout LineBuffer `json:"stdout,omitzero"`
	Stderr LineBuffer `json:"stderr,omitzero"`
	Turn   Turn       `json:"turn,omitzero"`
	// Calls are the names of the tool calls reported and not answered yet, by id: a tool.result
	// is reported with its call's name (abi.Event.ToolName), so filters by tool find results too.
	Calls map[string]string `json:"calls,omitempty"`
}

// named gives each tool.result without a ToolName that of its call, reported in this run.
func (o *Output) named(events []abi.Event) []abi.Event {
	for i, e := range events {
		switch e.Kind {
		case abi.KindToolCall:
			if o.Calls == nil {
				o.Calls = map[string]string{}
			}
			o.Calls[e.ToolCallID] = e.ToolName
		case abi.KindToolResult:
			if e.ToolName == "" {
				events[i].ToolName = o.Calls[e.ToolCallID]
			}
			delete(o.Calls, e.ToolCallID)
		}
	}
	return events
}

func (o *Output) output() *Output { return o }

// Starter is a LineReader that, at the first request of a run, is told the run's resume hint
// (abi.ParseRequest.Resume), such as the totals a Hint carries.
type Starter interface {
	Start(resume string)
}

// LineReader is the State of a parser for ParseLines: an Output (embedded) and what Read needs.
type LineReader interface {
	output() *Output
	// Read reports what one line of stdout says; it may change the State, Turn included.
	Read(line string) []abi.Event
}

// ParseLines is Harness.Parse for a parser whose State is S: it decodes S from req.State, hands
// Read each stdout line req completes (and the unfinished last one once the process exited),
// its JSON strings clipped to abi.MaxString (abi.ClipStrings) as a host does,
// tells a Starter the resume hint at the run's first request, names each tool.result after
// its tool.call (Output.Calls), keeps stderr lines as diagnostics of the Turn, ends the Turn with the exit status when the run
// is over, and encodes S again.
func ParseLines[S any, P interface {
	*S
	LineReader
}](req abi.ParseRequest) (abi.ParseResult, error) {
	var st S
	p := P(&st)
	if err := DecodeState(req.State, p); err != nil {
		return abi.ParseResult{}, err
	}
	if s, ok := any(p).(Starter); ok && req.State == "" {
		s.Start(req.Resume)
	}
	events, err := p.output().parse(req, p.Read)
	if err != nil {
		return abi.ParseResult{}, err
	}
	state, err := EncodeState(p)
	return abi.ParseResult{Events: events, State: state}, err
}

// parse feeds req to the streams; see ParseLines.
func (o *Output) parse(req abi.ParseRequest, read func(line string) []abi.Event) ([]abi.Event, error) {
	var events []abi.Event
	switch req.Stream {
	case "stdout":
		for _, line := range o.Stdout.Feed(req.Chunk) {
			events = append(events, o.named(read(abi.ClipStrings(line, abi.MaxString)))...)
		}
	case "stderr":
		for _, line := range o.Stderr.Feed(req.Chunk) {
			o.Turn.Note(line)
		}
	default:
		if req.Chunk != "" {
			return nil, fmt.Errorf("unknown stream %q", req.Stream)
		}
	}
	if req.Final {
		if line, ok := o.Stdout.Flush(); ok {
			events = append(events, o.named(read(abi.ClipStrings(line, abi.MaxString)))...)
		}
		if line, ok := o.Stderr.Flush(); ok {
			o.Turn.Note(line)
		}
		events = append(events, o.Turn.Exit(req.ExitStatus)...)
	}
	return events, nil
}
