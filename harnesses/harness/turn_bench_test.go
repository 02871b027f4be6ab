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
	line := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return string(b) + "\n"
	}
	msg := func(role string, content ...any) map[string]any {
		return map[string]any{"type": role, "message": map[string]any{"role": role, "content": content}, "parent_tool_use_id": nil, "session_id": "s1"}
	}
	return line(map[string]any{"type": "system", "subtype": "init", "session_id": "s1", "model": "claude-sonnet-4-6"}) +
		line(msg("assistant", map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{"command": "cat server.log"}})) +
		line(msg("user", map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": log.String()})) +
		line(msg("assistant", map[string]any{"type": "text", "text": "The log shows every request served."})) +
		line(map[string]any{"type": "result", "subtype": "success", "session_id": "s1", "total_cost_usd": 0.01,
			"modelUsage": map[string]any{"claude-sonnet-4-6": map[string]any{"inputTokens": 100, "outputTokens": 20, "costUSD": 0.01}}})
})

// parseTurn hands bigTurn to parse the way a sandbox's host does: in the supervisor's chunks,
// through a Carry, then the end of the run; it checks the turn's events.
func parseTurn(b *testing.B, parse func(abi.ParseRequest) (abi.ParseResult, error)) {
	turn := bigTurn()
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
	kinds := make([]string, len(events))
	for i, e := range events {
		kinds[i] = e.Kind
	}
	if want := "tool.call tool.result assistant.message usage turn.done"; strings.Join(kinds, " ") != want {
		b.Fatalf("events %q, want %q", kinds, want)
	}
}

// BenchmarkParseToolResult10MiB parses a turn of Claude Code's output whose tool result is
// 10 MiB through the claude-code harness plugin, as a host does.
func BenchmarkParseToolResult10MiB(b *testing.B) {
	p := load(b, newRuntime(b, wasm.Options{CallTimeout: time.Minute}), "claude-code")
	ctx := context.Background()
	b.SetBytes(int64(len(bigTurn())))
	for b.Loop() {
		parseTurn(b, func(req abi.ParseRequest) (abi.ParseResult, error) { return p.Parse(ctx, req) })
	}
}

// BenchmarkNativeToolResult10MiB is its baseline: the same parser run natively, with no wasm
// and no JSON between host and plugin.
func BenchmarkNativeToolResult10MiB(b *testing.B) {
	b.SetBytes(int64(len(bigTurn())))
	for b.Loop() {
		parseTurn(b, claudecode.Harness{}.Parse)
	}
}
