package codex

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/sdk"
)

// `codex exec --json` prints one event a line on stdout, told apart by "type":
//
//	thread.started   thread_id, the id `codex exec resume` takes
//	item.started     a tool item begins -> tool.call
//	item.completed   agent_message and plan -> assistant.message; a tool item -> tool.result
//	                 (after its tool.call when it did not start first); error -> error
//	turn.completed   usage, then turn.done with Resume = thread_id
//	turn.failed      error, then turn.done
//	error            error, but for a reconnect notice
//
// Tool items are command_execution (tool "shell"), mcp_tool_call ("<server>/<tool>"),
// file_change ("apply_patch") and web_search ("web_search"); the last two are reported when they
// complete, since their arguments are only known then. reasoning, todo_list, item.updated and
// types added later are not reported. An "error" item is a warning (a deprecation, a model
// rerouted) and is reported as an error event without failing the turn, which turn.failed does.
// A line that is not an event is kept as a diagnostic, as stderr is, and reported only when the
// process fails without saying why. So is a reconnect notice (an "error" event whose message
// starts "Reconnecting..."), which Codex prints while it retries a dropped stream: a turn that
// then succeeds had no error, one that fails says why in turn.failed, and a process that dies
// meanwhile (killed, crashed) ends with its exit status and the notice among its last output.
//
// A command's result keeps its exit code (ExitCode) beside its output.
//
// turn.completed's usage counts the whole conversation, a resumed one's earlier turns too: so
// each reports what it adds to the totals before, which the state keeps and turn.done's resume
// hint (sdk.Hint) carries to the next turn. Codex's input_tokens count its cached (read) ones
// and cache writes, which usage keeps apart.
type state struct {
	sdk.ResumedOutput
	// Open holds the ids of tool items that started and have not completed.
	Open map[string]bool `json:"open,omitempty"`
}

func (Harness) Parse(req abi.ParseRequest) (abi.ParseResult, error) {
	return sdk.ParseLines[state](req)
}

type event struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Item     item   `json:"item"`
	Usage    struct {
		InputTokens           int64 `json:"input_tokens"`
		CachedInputTokens     int64 `json:"cached_input_tokens"`
		CacheWriteInputTokens int64 `json:"cache_write_input_tokens"`
		OutputTokens          int64 `json:"output_tokens"`
	} `json:"usage"`
	// turn.failed
	Error struct {
		Message string `json:"message"`
	} `json:"error"`
	// error, and an error item
	Message string `json:"message"`
}

type item struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	// agent_message, plan
	Text string `json:"text"`
	// command_execution
	Command          string `json:"command"`
	AggregatedOutput string `json:"aggregated_output"`
	ExitCode         *int   `json:"exit_code"`
	// command_execution, file_change, mcp_tool_call
	Status string `json:"status"`
	// file_change
	Changes []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"changes"`
	// mcp_tool_call
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Result    *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	// web_search
	Query string `json:"query"`
	// error
	Message string `json:"message"`
}

// Read reports what one line of stdout says.
func (st *state) Read(line string) []abi.Event {
	if strings.TrimSpace(line) == "" {
		return nil
	}
	var e event
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		st.Turn.Note(line)
		return nil
	}
	switch e.Type {
	case "thread.started":
		st.ResumeWith(e.ThreadID)
	case "item.started":
		return st.started(e.Item)
	case "item.completed":
		return st.completed(e.Item)
	case "turn.completed":
		var events []abi.Event
		u := e.Usage
		total := abi.Usage{
			InputTokens:  max(u.InputTokens-u.CachedInputTokens-u.CacheWriteInputTokens, 0),
			OutputTokens: u.OutputTokens, CacheReadTokens: u.CachedInputTokens, CacheWriteTokens: u.CacheWriteInputTokens,
		}
		if usage := sdk.UsageSince(total, st.Totals); usage != (abi.Usage{}) {
			events = append(events, abi.Event{Kind: abi.KindUsage, Usage: &usage})
		}
		st.Totals = total
		st.ResumeWith(sdk.ParseHint(st.Turn.Resume).ID)
		return append(events, st.Turn.Finish()...)
	case "turn.failed":
		return append(st.Turn.Error(e.Error.Message), st.Turn.Finish()...)
	case "error":
		if strings.HasPrefix(e.Message, reconnecting) {
			st.Turn.Note(e.Message)
			return nil
		}
		return st.Turn.Error(e.Message)
	}
	return nil
}

// reconnecting starts Codex's notices of a stream it retries.
const reconnecting = "Reconnecting..."

// callsAtStart are the tool items whose arguments are known when they start.
var callsAtStart = map[string]bool{"command_execution": true, "mcp_tool_call": true}

func (st *state) started(it item) []abi.Event {
	if !callsAtStart[it.Type] || st.Open[it.ID] {
		return nil
	}
	if st.Open == nil {
		st.Open = map[string]bool{}
	}
	st.Open[it.ID] = true
	return []abi.Event{toolCall(it)}
}

func (st *state) completed(it item) []abi.Event {
	switch it.Type {
	case "agent_message", "plan":
		if strings.TrimSpace(it.Text) == "" {
			return nil
		}
		return []abi.Event{{Kind: abi.KindAssistantMessage, Text: it.Text}}
	case "error":
		return []abi.Event{{Kind: abi.KindError, Text: it.Message}}
	case "command_execution", "mcp_tool_call", "file_change", "web_search":
		var events []abi.Event
		if !st.Open[it.ID] {
			events = append(events, toolCall(it))
		}
		delete(st.Open, it.ID)
		return append(events, toolResult(it))
	}
	return nil
}

func toolCall(it item) abi.Event {
	e := abi.Event{Kind: abi.KindToolCall, ToolCallID: it.ID}
	switch it.Type {
	case "command_execution":
		e.ToolName, e.Input = "shell", object("command", it.Command)
	case "mcp_tool_call":
		e.ToolName, e.Input = it.Server+"/"+it.Tool, it.Arguments
	case "file_change":
		e.ToolName, e.Input = "apply_patch", object("changes", it.Changes)
	case "web_search":
		e.ToolName, e.Input = "web_search", object("query", it.Query)
	}
	return e
}

func toolResult(it item) abi.Event {
	e := abi.Event{Kind: abi.KindToolResult, ToolCallID: it.ID}
	switch it.Type {
	case "command_execution":
		e.Text, e.ExitCode = it.AggregatedOutput, it.ExitCode
		e.IsError = it.Status != "completed" || it.ExitCode != nil && *it.ExitCode != 0
		if e.Text == "" && it.Status == "declined" {
			e.Text = "declined"
		}
	case "mcp_tool_call":
		if it.Error != nil {
			e.Text = it.Error.Message
		} else if it.Result != nil {
			var texts []string
			for _, c := range it.Result.Content {
				if c.Type == "text" {
					texts = append(texts, c.Text)
				}
			}
			e.Text = strings.Join(texts, "\n")
		}
		e.IsError = it.Status == "failed" || it.Error != nil
	case "file_change":
		var lines []string
		for _, c := range it.Changes {
			lines = append(lines, c.Kind+" "+c.Path)
		}
		e.Text = strings.Join(lines, "\n")
		e.IsError = it.Status == "failed"
	}
	return e
}

// object is the JSON object {key: value}.
func object(key string, value any) json.RawMessage {
	b, err := json.Marshal(map[string]any{key: value})
	if err != nil {
		// Strings and the decoded changes always encode.
		panic(fmt.Sprintf("encode tool input: %v", err))
	}
	return b
}
