package harness_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/harness"
	"github.com/hangar-dev/hangar/runtimes/wasm"
)

func TestEchoPluginRoundTrip(t *testing.T) {
	ctx := context.Background()
	p := load(t, newRuntime(t, wasm.Options{}), "good")

	want := abi.Descriptor{
		Name:   "echo",
		Label:  "Echo",
		Models: []abi.Option{{ID: "plain", Default: true}},
		Modes:  []abi.Mode{{ID: "run", Default: true}},
	}
	if got := p.Descriptor(); !reflect.DeepEqual(got, want) {
		t.Errorf("Descriptor() = %+v, want %+v", got, want)
	}
	if got, err := p.Describe(ctx); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Describe() = %+v, %v; want %+v", got, err, want)
	}

	plan, err := p.Plan(ctx, abi.PlanRequest{Prompt: "echo hi", Env: map[string]string{"A": "b"}})
	wantPlan := abi.Plan{Argv: []string{"sh", "-c", "echo hi"}, Env: map[string]string{"A": "b"}}
	if err != nil || !reflect.DeepEqual(plan, wantPlan) {
		t.Errorf("Plan() = %+v, %v; want %+v", plan, err, wantPlan)
	}

	// Output arrives in chunks that split lines anywhere; the state carries the partial line.
	msg := func(text string) abi.Event { return abi.Event{Kind: abi.KindAssistantMessage, Text: text} }
	steps := []struct {
		req  abi.ParseRequest
		want []abi.Event
	}{
		{abi.ParseRequest{Stream: "stdout", Chunk: "hel"}, nil},
		{abi.ParseRequest{Stream: "stdout", Chunk: "lo\nwor"}, []abi.Event{msg("hello")}},
		{abi.ParseRequest{Stream: "stderr", Chunk: "noise\n"}, nil},
		{abi.ParseRequest{Stream: "stdout", Chunk: "ld\n\nlast"}, []abi.Event{msg("world"), msg("")}},
		{abi.ParseRequest{Stream: "stdout", Chunk: " line"}, nil},
		{abi.ParseRequest{Final: true, ExitStatus: 3}, []abi.Event{
			msg("last line"),
			{Kind: abi.KindTurnDone, IsError: true, Text: "exit status 3"},
		}},
	}
	state := ""
	for i, step := range steps {
		step.req.State = state
		res, err := p.Parse(ctx, step.req)
		if err != nil {
			t.Fatalf("step %d: Parse(%+v): %v", i, step.req, err)
		}
		if !reflect.DeepEqual(res.Events, step.want) {
			t.Errorf("step %d: Parse(%+v) events = %+v, want %+v", i, step.req, res.Events, step.want)
		}
		state = res.State
	}
	if state != "" {
		t.Errorf("state after the final parse = %q, want none", state)
	}
}

func TestPluginRefusalIsErrRefused(t *testing.T) {
	p := load(t, newRuntime(t, wasm.Options{}), "good")
	_, err := p.Plan(context.Background(), abi.PlanRequest{})
	if !errors.Is(err, wasm.ErrRefused) || !strings.Contains(err.Error(), "the echo harness needs a prompt") {
		t.Fatalf("Plan without a prompt: %v, want ErrRefused with the plugin's message", err)
	}
	if _, err := p.Plan(context.Background(), abi.PlanRequest{Prompt: "true"}); err != nil {
		t.Fatalf("Plan after a refusal: %v", err)
	}
}

// hostileRuntime runs plugins with one instance each, so that every call after a failure needs
// the instance the failure left to have been replaced, and with a memory cap small enough that
// running out of memory is quick.
func hostileRuntime(t *testing.T) *wasm.Runtime {
	return newRuntime(t, wasm.Options{CallTimeout: 3 * time.Second, MemoryLimitBytes: 16 << 20, Instances: 1})
}

// hostileCases are misbehaviours of the hostile plugin, named by the input that triggers them.
var hostileCases = []struct {
	input string
	want  error
	says  string // part of the message
}{
	{"loop", wasm.ErrTimeout, "ran past its 3s deadline"},
	{"oom", wasm.ErrMemory, "exhausted its 16 MiB of memory"},
	{"panic", wasm.ErrTrap, "hostile plugin panics as asked"},
	{"trap", wasm.ErrTrap, "out of bounds memory access"},
	{"oob", wasm.ErrBadAnswer, "outside its"},
	{"huge", wasm.ErrBadAnswer, "more than the"},
	{"empty", wasm.ErrBadAnswer, "answered nothing"},
	{"badjson", wasm.ErrBadAnswer, "not strict ABI JSON"},
	{"trailing", wasm.ErrBadAnswer, "data after the JSON value"},
	{"both", wasm.ErrBadAnswer, `both "ok" and "error"`},
	{"neither", wasm.ErrBadAnswer, `neither "ok" nor "error"`},
	{"replyfield", wasm.ErrBadAnswer, `unknown field "debug"`},
	{"resultfield", wasm.ErrBadAnswer, `unknown field`},
	{"refuse", wasm.ErrRefused, "refused: hostile plugin refuses as asked"},
}

func TestHostileParseFailsOnlyItsCall(t *testing.T) {
	ctx := context.Background()
	r := hostileRuntime(t)
	hostile := load(t, r, "hostile")
	good := load(t, r, "good")
	cases := append(hostileCases, struct {
		input string
		want  error
		says  string
	}{"badkind", wasm.ErrBadAnswer, `event 1 of unknown kind "assistant.thought"`})
	for _, tc := range cases {
		t.Run(tc.input, func(t *testing.T) {
			_, err := hostile.Parse(ctx, abi.ParseRequest{Stream: "stdout", Chunk: tc.input})
			checkPluginError(t, err, tc.want, abi.ExportParse, tc.says)

			// The same plugin serves the next call, and so does its neighbour.
			res, err := hostile.Parse(ctx, abi.ParseRequest{Stream: "stdout", Chunk: "fine"})
			if err != nil || len(res.Events) != 1 || res.Events[0].Text != "fine" {
				t.Errorf("hostile Parse after %s = %+v, %v", tc.input, res, err)
			}
			if d, err := hostile.Describe(ctx); err != nil || d.Name != "hostile" {
				t.Errorf("hostile Describe after %s = %+v, %v", tc.input, d, err)
			}
			if res, err := good.Parse(ctx, abi.ParseRequest{Stream: "stdout", Chunk: "ok\n"}); err != nil || len(res.Events) != 1 {
				t.Errorf("good Parse after hostile %s = %+v, %v", tc.input, res, err)
			}
		})
	}
}

func TestHostilePlanFailsOnlyItsCall(t *testing.T) {
	ctx := context.Background()
	hostile := load(t, hostileRuntime(t), "hostile")
	cases := append(hostileCases, struct {
		input string
		want  error
		says  string
	}{"noargv", wasm.ErrBadAnswer, "argv is empty"})
	for _, tc := range cases {
		if tc.input == "loop" || tc.input == "oom" {
			continue // the same code as in parse, and the slowest cases
		}
		t.Run(tc.input, func(t *testing.T) {
			_, err := hostile.Plan(ctx, abi.PlanRequest{Prompt: tc.input})
			checkPluginError(t, err, tc.want, abi.ExportPlan, tc.says)
			if plan, err := hostile.Plan(ctx, abi.PlanRequest{Prompt: "fine"}); err != nil || len(plan.Argv) != 1 {
				t.Errorf("hostile Plan after %s = %+v, %v", tc.input, plan, err)
			}
		})
	}
}

func checkPluginError(t *testing.T, err, want error, export, says string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
	var pe *wasm.Error
	if !errors.As(err, &pe) || pe.Module != "hostile" || pe.Export != export {
		t.Fatalf("error %#v, want a *wasm.Error of plugin hostile, export %s", err, export)
	}
	t.Log(err)
	prefix := fmt.Sprintf("harness plugin %q %s: ", "hostile", export)
	if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, says) {
		t.Errorf("error %q, want %q…%q", msg, prefix, says)
	}
}

func TestLoadRefusesWhatIsNotAPluginOfThisABI(t *testing.T) {
	r := newRuntime(t, wasm.Options{})
	cases := []struct {
		name string
		wasm []byte
		says string
	}{
		{"not wasm", []byte("#!/bin/sh\necho hi\n"), "not a WebAssembly module"},
		{"truncated", guest(t, "good")[:4096], "not a WebAssembly module"},
		{"empty module", []byte("\x00asm\x01\x00\x00\x00"), "does not export hangar_"},
		{"another ABI version", guest(t, "badversion"), "speaks ABI version 2, the host speaks 1"},
		{"no hangar_plan", guest(t, "noplan"), "does not export hangar_plan"},
		{"a hangar_tool_result of another signature", guest(t, "badtoolresult"), "export hangar_tool_result has signature func(i32) (i32)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := harness.Load(context.Background(), r, tc.wasm)
			if !errors.Is(err, wasm.ErrBadModule) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Load = %v, %v; want ErrBadModule saying %q", p, err, tc.says)
			}
		})
	}
}

func TestToolResultIsOptional(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t, wasm.Options{})
	req := abi.ToolResultRequest{ToolCallID: "call-1", ResultJSON: `{"t":21}`, State: "s"}
	t.Run("a plugin with the export answers", func(t *testing.T) {
		p := load(t, r, "toolresult")
		got, err := p.ToolResult(ctx, req)
		want := abi.ToolResult{Stdin: "call-1 {\"t\":21}\n", State: "s+"}
		if !p.TakesToolResults() || err != nil || got != want {
			t.Fatalf("TakesToolResults %v, ToolResult = %+v, %v; want %+v", p.TakesToolResults(), got, err, want)
		}
		if _, err := p.ToolResult(ctx, abi.ToolResultRequest{}); !errors.Is(err, wasm.ErrRefused) {
			t.Fatalf("ToolResult without an id: %v, want ErrRefused", err)
		}
	})
	t.Run("a plugin without it takes no tool results", func(t *testing.T) {
		p := load(t, r, "good")
		_, err := p.ToolResult(ctx, req)
		if p.TakesToolResults() || !errors.Is(err, wasm.ErrNotExported) || !strings.Contains(err.Error(), abi.ExportToolResult) {
			t.Fatalf("TakesToolResults %v, ToolResult error %v; want ErrNotExported naming the export", p.TakesToolResults(), err)
		}
	})
}

func TestPluginSeesNoHost(t *testing.T) {
	p := load(t, newRuntime(t, wasm.Options{}), "hostile")
	plan, err := p.Plan(context.Background(), abi.PlanRequest{Prompt: "sandbox"})
	if err != nil {
		t.Fatal(err)
	}
	// wazero's fake wall clock starts at 2022-01-01 and moves 1 ms a reading.
	want := map[string]string{"time": "2022-01-01T00:00:00Z", "args": "hangar-module", "env": ""}
	if !reflect.DeepEqual(plan.Env, want) {
		t.Errorf("what the plugin sees = %v, want %v (no files, no environment, a fake clock)", plan.Env, want)
	}
}

// TestRunawayPluginsAreStoppedWhenTheyHoldEveryProcessor runs looping plugins on every
// processor the Go scheduler has: compiled guest code checks its deadline only every so many
// loop iterations (third_party/wazero/HANGAR.md), and each check must still let the goroutine
// that enforces the deadline run, or the calls would never end.
func TestRunawayPluginsAreStoppedWhenTheyHoldEveryProcessor(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const calls = 3
	hostile := load(t, newRuntime(t, wasm.Options{CallTimeout: 200 * time.Millisecond, Instances: calls}), "hostile")
	errs := make(chan error, calls)
	for range calls {
		go func() {
			_, err := hostile.Parse(context.Background(), abi.ParseRequest{Stream: "stdout", Chunk: "loop"})
			errs <- err
		}()
	}
	for range calls {
		checkPluginError(t, <-errs, wasm.ErrTimeout, abi.ExportParse, "ran past its 200ms deadline")
	}
}

func TestCallerContextEndsCallWithoutBlamingThePlugin(t *testing.T) {
	hostile := load(t, hostileRuntime(t), "hostile")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := hostile.Parse(ctx, abi.ParseRequest{Stream: "stdout", Chunk: "loop"})
	var pe *wasm.Error
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &pe) {
		t.Fatalf("Parse under an expiring caller context = %v, want the context's error", err)
	}
	if _, err := hostile.Parse(context.Background(), abi.ParseRequest{Stream: "stdout", Chunk: "fine"}); err != nil {
		t.Fatalf("Parse after the cancelled call: %v", err)
	}
}

func TestReplyLargerThanMaxReplyBytesIsRefused(t *testing.T) {
	p := load(t, newRuntime(t, wasm.Options{MaxReplyBytes: 1024}), "good")
	_, err := p.Parse(context.Background(), abi.ParseRequest{Stream: "stdout", Chunk: lines(1, 2000)})
	if !errors.Is(err, wasm.ErrBadAnswer) || !strings.Contains(err.Error(), "more than the 1024 allowed") {
		t.Fatalf("Parse with a 2000-byte answer = %v, want ErrBadAnswer", err)
	}
	if _, err := p.Parse(context.Background(), abi.ParseRequest{Stream: "stdout", Chunk: lines(1, 100)}); err != nil {
		t.Fatalf("Parse with a small answer: %v", err)
	}
}

func TestConcurrentCallsOnOnePlugin(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t, wasm.Options{Instances: 3})
	good := load(t, r, "good")
	hostile := load(t, r, "hostile")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Go(func() {
			for i := range 10 {
				if g%4 == 0 {
					// Trapping calls on another plugin of the same runtime, at the same time.
					if _, err := hostile.Parse(ctx, abi.ParseRequest{Stream: "stdout", Chunk: "panic"}); !errors.Is(err, wasm.ErrTrap) {
						errs <- fmt.Errorf("hostile panic: %v, want ErrTrap", err)
					}
					continue
				}
				text := fmt.Sprintf("goroutine %d call %d", g, i)
				res, err := good.Parse(ctx, abi.ParseRequest{Stream: "stdout", State: text[:5], Chunk: text[5:] + "\n"})
				if err != nil || len(res.Events) != 1 || res.Events[0].Text != text {
					errs <- fmt.Errorf("Parse %q = %+v, %v", text, res, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestClosedPluginAndRuntimeRefuseCalls(t *testing.T) {
	ctx := context.Background()
	r, err := wasm.NewRuntime(ctx, wasm.Options{CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	p, err := harness.Load(ctx, r, guest(t, "hostile"))
	if err != nil {
		t.Fatal(err)
	}
	twin, err := harness.Load(ctx, r, guest(t, "hostile"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := p.Close(ctx); err != nil {
			t.Fatalf("Plugin.Close: %v", err)
		}
	}
	if _, err := p.Describe(ctx); !errors.Is(err, wasm.ErrClosed) {
		t.Errorf("Describe on a closed plugin = %v, want ErrClosed", err)
	}
	// Another plugin of the same module shares its compiled code, which must survive: the
	// panic discards twin's instance, so the next call makes a new one from that code.
	if _, err := twin.Parse(ctx, abi.ParseRequest{Stream: "stdout", Chunk: "panic"}); !errors.Is(err, wasm.ErrTrap) {
		t.Errorf("Parse(panic) = %v, want ErrTrap", err)
	}
	if _, err := twin.Parse(ctx, abi.ParseRequest{Stream: "stdout", Chunk: "fine"}); err != nil {
		t.Errorf("Parse on a plugin of the same module as a closed one: %v", err)
	}
	for range 2 {
		if err := r.Close(ctx); err != nil {
			t.Fatalf("Runtime.Close: %v", err)
		}
	}
	if _, err := harness.Load(ctx, r, guest(t, "good")); !errors.Is(err, wasm.ErrClosed) {
		t.Errorf("Load on a closed runtime = %v, want ErrClosed", err)
	}
	if _, err := twin.Parse(ctx, abi.ParseRequest{Stream: "stdout", Chunk: "fine"}); !errors.Is(err, wasm.ErrClosed) {
		t.Errorf("Parse on a plugin of a closed runtime = %v, want ErrClosed", err)
	}
}
