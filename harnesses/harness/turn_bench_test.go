package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/harness"
	claudecode "github.com/hangar-dev/hangar/harnesses/plugins/claude-code"
	"github.com/hangar-dev/hangar/runtimes/wasm"
)

// toolResultBytes is the size of the tool result in the benchmarked turn, and outputChunk the
// largest piece of output the sandbox's supervisor sends at a time.
const (
	toolResultBytes = 10 << 20
	outputChunk     = 64 << 10
)

// bigTurn is Claude Code's stream-json of a turn whose one tool result (a log file read with
// Bash) is toolResultBytes long: what the harness plugin parses.
var bigTurn = sync.OnceValue(func() string {
	var log strings.Builder
	for i := 0; log.Len() < toolResultBytes; i++ {
		fmt.Fprintf(&log, "{\"level\":\"info\",\"msg\":\"request served\",\"path\":\"/api/v1/items/%d\",\"status\":200,\"took\":\"\\t%dms\"}\n", i, i%97)
	}
	return turnStart + toolTurn("toolu_1", "cat server.log", log.String()) + turnEnd
})

// smallEventsTurn is a turn of many small events, smallEventsBytes of stream-json: short tool
// calls, their short results and a line of text after each, as an agent reading around a
// repository writes them.
var smallEventsTurn = sync.OnceValue(func() string {
	var b strings.Builder
	b.WriteString(turnStart)
	for i := 0; b.Len() < smallEventsBytes; i++ {
		id := fmt.Sprintf("toolu_%d", i)
		b.WriteString(toolTurn(id, fmt.Sprintf("sed -n %d,%dp main.go", i, i+2), fmt.Sprintf("func f%d() {}\n", i)))
		b.WriteString(jsonLine(claudeMessage("assistant", map[string]any{"type": "text", "text": fmt.Sprintf("Step %d looks fine.", i)})))
	}
	b.WriteString(turnEnd)
	return b.String()
})

const smallEventsBytes = 1 << 20

// The lines of a turn of Claude Code's stream-json.
var (
	turnStart = jsonLine(map[string]any{"type": "system", "subtype": "init", "session_id": "s1", "model": "claude-sonnet-4-6"})
	turnEnd   = jsonLine(claudeMessage("assistant", map[string]any{"type": "text", "text": "The log shows every request served."})) +
		jsonLine(map[string]any{"type": "result", "subtype": "success", "session_id": "s1", "total_cost_usd": 0.01,
			"modelUsage": map[string]any{"claude-sonnet-4-6": map[string]any{"inputTokens": 100, "outputTokens": 20, "costUSD": 0.01}}})
)

// toolTurn is a Bash tool call and its result.
func toolTurn(id, command, result string) string {
	return jsonLine(claudeMessage("assistant", map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{"command": command}})) +
		jsonLine(claudeMessage("user", map[string]any{"type": "tool_result", "tool_use_id": id, "content": result}))
}

func claudeMessage(role string, content ...any) map[string]any {
	return map[string]any{"type": role, "message": map[string]any{"role": role, "content": content}, "parent_tool_use_id": nil, "session_id": "s1"}
}

func jsonLine(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b) + "\n"
}

// parseTurn hands turn to parse the way a sandbox's host does: in the supervisor's chunks,
// through a Carry, then the end of the run, and returns the turn's events.
func parseTurn(b *testing.B, turn string, parse func(abi.ParseRequest) (abi.ParseResult, error)) []abi.Event {
	var carry harness.Carry
	var events []abi.Event
	state := ""
	call := func(req abi.ParseRequest) {
		req.State = state
		res, err := parse(req)
		if err != nil {
			b.Fatal(err)
		}
		state, events = res.State, append(events, res.Events...)
	}
	for off := 0; off < len(turn); off += outputChunk {
		if chunk := carry.Next([]byte(turn[off:min(off+outputChunk, len(turn))])); len(chunk) > 0 {
			call(abi.ParseRequest{Stream: "stdout", Chunk: string(chunk)})
		}
	}
	if rest := carry.Rest(); len(rest) > 0 {
		call(abi.ParseRequest{Stream: "stdout", Chunk: string(rest)})
	}
	call(abi.ParseRequest{Final: true})
	return events
}

// parseBigTurn parses bigTurn and checks its events.
func parseBigTurn(b *testing.B, parse func(abi.ParseRequest) (abi.ParseResult, error)) {
	events := parseTurn(b, bigTurn(), parse)
	kinds := make([]string, len(events))
	for i, e := range events {
		kinds[i] = e.Kind
	}
	if want := "tool.call tool.result assistant.message usage turn.done"; strings.Join(kinds, " ") != want {
		b.Fatalf("events %q, want %q", kinds, want)
	}
}

// parseSmallEvents parses smallEventsTurn and checks that every line became an event.
func parseSmallEvents(b *testing.B, parse func(abi.ParseRequest) (abi.ParseResult, error)) {
	turn := smallEventsTurn()
	// Every line is an event but the init, and the result is two (usage, turn.done).
	if got, want := len(parseTurn(b, turn, parse)), strings.Count(turn, "\n"); got != want {
		b.Fatalf("%d events, want %d", got, want)
	}
}

// BenchmarkParseToolResult10MiB parses a turn of Claude Code's output whose tool result is
// 10 MiB through the claude-code harness plugin, as a host does.
func BenchmarkParseToolResult10MiB(b *testing.B) {
	p := load(b, newRuntime(b, wasm.Options{CallTimeout: time.Minute}), "claude-code")
	ctx := context.Background()
	b.SetBytes(int64(len(bigTurn())))
	for b.Loop() {
		parseBigTurn(b, func(req abi.ParseRequest) (abi.ParseResult, error) { return p.Parse(ctx, req) })
	}
}

// BenchmarkNativeToolResult10MiB is its baseline: the same parser run natively, with no wasm
// and no JSON between host and plugin.
func BenchmarkNativeToolResult10MiB(b *testing.B) {
	b.SetBytes(int64(len(bigTurn())))
	for b.Loop() {
		parseBigTurn(b, claudecode.Harness{}.Parse)
	}
}

// BenchmarkParseSmallEvents parses a turn of 1 MiB of small events (tool calls, results, text)
// through the claude-code harness plugin, as a host does; BenchmarkNativeSmallEvents is its
// baseline, the same parser run natively.
func BenchmarkParseSmallEvents(b *testing.B) {
	p := load(b, newRuntime(b, wasm.Options{CallTimeout: time.Minute}), "claude-code")
	ctx := context.Background()
	b.SetBytes(int64(len(smallEventsTurn())))
	for b.Loop() {
		parseSmallEvents(b, func(req abi.ParseRequest) (abi.ParseResult, error) { return p.Parse(ctx, req) })
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(strings.Count(smallEventsTurn(), "\n")), "ns/event")
}

func BenchmarkNativeSmallEvents(b *testing.B) {
	b.SetBytes(int64(len(smallEventsTurn())))
	for b.Loop() {
		parseSmallEvents(b, claudecode.Harness{}.Parse)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(strings.Count(smallEventsTurn(), "\n")), "ns/event")
}
