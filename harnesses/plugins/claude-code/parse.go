package claudecode

import (
	"encoding/json"
	"strings"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/sdk"
)

// Claude Code's stream-json output is one JSON object a line on stdout, told apart by "type":
//
//	system     subtype "init" carries session_id, the id --resume takes
//	assistant  message.content: text blocks -> assistant.message, tool_use -> tool.call;
//	           thinking blocks are not reported (abi v1 has no kind for them)
//	user       message.content: tool_result blocks -> tool.result
//	result     the run's end: usage (cost included), an error when is_error or subtype
//	           "error_*", then turn.done with Resume = session_id
//
// Other types (stream_event, rate_limit_event, system subtypes but init, and any added later)
// are not reported. A line that is not a JSON object of a known shape is not an error event
// either: a stray line (a wrapper's notice, a truncated line) must not fail a turn. It is kept,
// like stderr, as a diagnostic, reported when the process fails without a result line saying
// why.
//
// A subagent's messages and tool calls are reported like the main agent's, with
// ParentToolCallID set to the Task tool call that started it (the line's parent_tool_use_id).
// A subagent's prompt arrives as a user line of text and is not reported: its Task call's input
// holds it.
//
// Usage is of every model in the result's modelUsage (the result's own usage is the main
// model's only, while subagents may run on others), its cache reads and writes apart from the
// other input tokens. A result's modelUsage and total_cost_usd count the whole conversation: a
// resumed one's earlier turns too, and a run whose background subagent finishes after the first
// result prints a second one that counts the run again. So each result reports what its totals
// add to the totals before, which the state keeps and turn.done's resume hint (sdk.Hint)
// carries to the next turn.
type state struct {
	sdk.ResumedOutput
}

func (Harness) Parse(req abi.ParseRequest) (abi.ParseResult, error) {
	return sdk.ParseLines[state](req)
}

// line is one line of Claude Code's stream-json.
type line struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	// assistant and user
	Message struct {
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	ParentToolUseID string `json:"parent_tool_use_id"`
	// result
	IsError      bool            `json:"is_error"`
	Result       json.RawMessage `json:"result"`
	Errors       json.RawMessage `json:"errors"`
	TotalCostUSD float64         `json:"total_cost_usd"`
	Usage        *struct {
		InputTokens              int64 `json:"input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
	} `json:"usage"`
	ModelUsage map[string]struct {
		InputTokens              int64   `json:"inputTokens"`
		CacheCreationInputTokens int64   `json:"cacheCreationInputTokens"`
		CacheReadInputTokens     int64   `json:"cacheReadInputTokens"`
		OutputTokens             int64   `json:"outputTokens"`
		CostUSD                  float64 `json:"costUSD"`
	} `json:"modelUsage"`
}

// block is one content block of a message.
type block struct {
	Type string `json:"type"`
	// text
	Text string `json:"text"`
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// tool_result: Content is a string or a list of blocks
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// Read reports what one line of stdout says.
func (st *state) Read(text string) []abi.Event {
	if strings.TrimSpace(text) == "" {
		return nil
	}
	var l line
	if err := json.Unmarshal([]byte(text), &l); err != nil {
		st.Turn.Note(text)
		return nil
	}
	switch l.Type {
	case "system":
		if l.Subtype == "init" && l.SessionID != "" {
			st.ResumeWith(l.SessionID)
		}
	case "assistant":
		return underParent(assistant(blocks(l.Message.Content)), l.ParentToolUseID)
	case "user":
		return underParent(toolResults(blocks(l.Message.Content)), l.ParentToolUseID)
	case "result":
		return st.result(l)
	}
	return nil
}

// underParent marks events as a subagent's, started by the tool call parent ("" for the main
// agent).
func underParent(events []abi.Event, parent string) []abi.Event {
	for i := range events {
		events[i].ParentToolCallID = parent
	}
	return events
}

// blocks decodes message content; content that is a plain string (a user's prompt) has none.
func blocks(content json.RawMessage) []block {
	var bs []block
	if json.Unmarshal(content, &bs) != nil {
		return nil
	}
	return bs
}

func assistant(bs []block) []abi.Event {
	var events []abi.Event
	for _, b := range bs {
		switch b.Type {
		case "text":
			if strings.TrimSpace(b.Text) != "" {
				events = append(events, abi.Event{Kind: abi.KindAssistantMessage, Text: b.Text})
			}
		case "tool_use":
			events = append(events, abi.Event{Kind: abi.KindToolCall, ToolCallID: b.ID, ToolName: b.Name, Input: b.Input})
		}
	}
	return events
}

func toolResults(bs []block) []abi.Event {
	var events []abi.Event
	for _, b := range bs {
		if b.Type == "tool_result" {
			events = append(events, abi.Event{Kind: abi.KindToolResult, ToolCallID: b.ToolUseID, Text: resultText(b.Content), IsError: b.IsError})
		}
	}
	return events
}

// resultText is a tool result's content as text: the string, or its text blocks one after the
// other (an image block has no text to show).
func resultText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var texts []string
	for _, b := range blocks(content) {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}

func (st *state) result(l line) []abi.Event {
	var events []abi.Event
	total := runTotal(l)
	if usage := sdk.UsageSince(total, st.Totals); usage != (abi.Usage{}) {
		events = append(events, abi.Event{Kind: abi.KindUsage, Usage: &usage})
	}
	st.Totals = total
	if l.IsError || strings.HasPrefix(l.Subtype, "error") {
		events = append(events, st.Turn.Error(failure(l))...)
	}
	id := l.SessionID
	if id == "" {
		id = sdk.ParseHint(st.Turn.Resume).ID
	}
	st.ResumeWith(id)
	return append(events, st.Turn.Finish()...)
}

// runTotal is the usage of the conversation so far as a result line counts it: the sum over the
// models of its modelUsage, or its usage when it has none (as Claude Code before modelUsage
// printed). The cost is total_cost_usd, which counts every model.
func runTotal(l line) abi.Usage {
	total := abi.Usage{CostUSD: l.TotalCostUSD}
	if len(l.ModelUsage) > 0 {
		for _, m := range l.ModelUsage {
			total = total.Add(abi.Usage{
				InputTokens: m.InputTokens, OutputTokens: m.OutputTokens,
				CacheReadTokens: m.CacheReadInputTokens, CacheWriteTokens: m.CacheCreationInputTokens,
			})
		}
	} else if u := l.Usage; u != nil {
		total = total.Add(abi.Usage{
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens,
		})
	}
	return total
}

// failure says why a run failed: its result text, else its errors, else its subtype (such as
// error_max_turns).
func failure(l line) string {
	var result string
	if json.Unmarshal(l.Result, &result) == nil && strings.TrimSpace(result) != "" {
		return result
	}
	var errs []string
	if json.Unmarshal(l.Errors, &errs) == nil && len(errs) > 0 {
		return strings.Join(errs, "\n")
	}
	return "claude-code ended with " + l.Subtype
}
