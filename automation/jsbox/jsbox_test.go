package jsbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/automation/jsbox"
	"github.com/hangar-dev/hangar/internal/testkit"
)

// cacheDir holds the compiled guest for the whole test process, so it is compiled once however
// many boxes the tests make.
var cacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hangar-jsbox-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cacheDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// newBox returns a box closed when tb ends. Without the built guest the test fails under CI
// and skips elsewhere.
func newBox(tb testing.TB, opts jsbox.Options) *jsbox.Box {
	tb.Helper()
	if opts.CacheDir == "" {
		opts.CacheDir = cacheDir
	}
	box, err := jsbox.New(context.Background(), opts)
	if errors.Is(err, jsbox.ErrNotBuilt) {
		testkit.Missing(tb, "automation/jsbox/wasm/jsbox.wasm is not built: run `make plugins` first (make test does)")
	}
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { box.Close(context.Background()) })
	return box
}

func eval(t *testing.T, box *jsbox.Box, source string, vars map[string]json.RawMessage) jsbox.Result {
	t.Helper()
	res, err := box.Eval(context.Background(), source, vars)
	if err != nil {
		t.Fatalf("Eval(%.80q): %v", source, err)
	}
	return res
}

// wantValue checks that res is the value want, compared as JSON.
func wantValue(t *testing.T, res jsbox.Result, want string) {
	t.Helper()
	if res.Err != nil {
		t.Fatalf("script error %v, want the value %s", res.Err, want)
	}
	if !jsonEqual(t, res.Value, json.RawMessage(want)) {
		t.Fatalf("value %s, want %s", res.Value, want)
	}
}

func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s is not JSON: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s is not JSON: %v", b, err)
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

func TestEvalReturnsTheResultAsJSON(t *testing.T) {
	box := newBox(t, jsbox.Options{})
	vars := map[string]json.RawMessage{
		"input": json.RawMessage(`{"items":[1,2,3],"name":"hé"}`),
		"event": json.RawMessage(`{"type":"push"}`),
		"now":   json.RawMessage(`"2025-03-04T05:06:07Z"`),
	}
	cases := []struct {
		name, source, want string
	}{
		{"a number", "return 1 + 2", "3"},
		{"a fraction", "return 0.1 + 0.2", "0.30000000000000004"},
		{"a large integer", "return 2 ** 53", "9007199254740992"},
		{"a string", `return "a" + "b"`, `"ab"`},
		{"unicode", `return "日本 " + input.name`, `"日本 hé"`},
		{"a boolean", "return 1 < 2", "true"},
		{"null", "return null", "null"},
		{"undefined", "return undefined", "null"},
		{"no return", "const x = 1", "null"},
		{"an empty source", "", "null"},
		{"NaN, as JSON has it", "return NaN", "null"},
		{"an object", `return {a: 1, b: [true, null], c: {d: "e"}}`, `{"a":1,"b":[true,null],"c":{"d":"e"}}`},
		{"an array", "return [1, 'two', {three: 3}]", `[1,"two",{"three":3}]`},
		{"a Map, which JSON sees as empty", "return new Map([[1, 2]])", "{}"},
		{"a value with toJSON", "return {toJSON() { return 'mine' }}", `"mine"`},
		{"vars", "return input.items.map(x => x * 2)", "[2,4,6]"},
		{"several vars", "return event.type + ' at ' + now", `"push at 2025-03-04T05:06:07Z"`},
		{"a trailing line comment", "return 7 // done", "7"},
		{"functions and classes", "class A { constructor(x) { this.x = x } double() { return this.x * 2 } }\nfunction f(a) { return new A(a).double() }\nreturn f(21)", "42"},
		{"await", "const x = await Promise.resolve(20)\nreturn x + 1", "21"},
		{"a returned promise", "return Promise.resolve(5)", "5"},
		{"async functions", "async function f(x) { await null; return x * 2 }\nconst all = await Promise.all([f(1), f(2)])\nreturn all", "[2,4]"},
		{"a caught rejection", "try { await Promise.reject(new Error('no')) } catch (e) { return e.message }", `"no"`},
		{"regular expressions", `return "a1b22".match(/\d+/g)`, `["1","22"]`},
		{"JSON", `return JSON.parse(JSON.stringify({a: [1]}))`, `{"a":[1]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantValue(t, eval(t, box, tc.source, vars), tc.want)
		})
	}
}

func TestConsoleLinesAreLogs(t *testing.T) {
	box := newBox(t, jsbox.Options{})
	res := eval(t, box, `
console.log("hello", 1, true, null, undefined)
console.info({a: [1, 2]}, [3])
console.warn("é", "multi\nline")
console.error(new TypeError("bad"))
const o = {}; o.self = o
console.log(o, () => 1)
return "done"`, nil)
	wantValue(t, res, `"done"`)
	want := []string{
		"hello 1 true null undefined",
		`{"a":[1,2]} [3]`,
		"é multi\nline",
		"TypeError: bad",
		"[object Object] () => 1",
	}
	if !slices.Equal(res.Logs, want) {
		t.Fatalf("logs %q, want %q", res.Logs, want)
	}

	res = eval(t, box, "console.log('before')\nthrow new Error('after')", nil)
	if res.Err == nil || !slices.Equal(res.Logs, []string{"before"}) {
		t.Fatalf("a failing script: error %v, logs %q; want an error and the logs before it", res.Err, res.Logs)
	}
}

func TestLogsAreCappedWithANote(t *testing.T) {
	box := newBox(t, jsbox.Options{})
	cases := []struct {
		name, source string
		kept         int
	}{
		{"too many lines", fmt.Sprintf("for (let i = 0; i < %d; i++) console.log(i)", jsbox.MaxLogLines+5), jsbox.MaxLogLines},
		{"too many bytes", fmt.Sprintf("for (let i = 0; i < 10; i++) console.log('é'.repeat(%d))", jsbox.MaxLogBytes/6), 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := eval(t, box, tc.source, nil)
			if len(res.Logs) != tc.kept+1 || !strings.HasPrefix(res.Logs[tc.kept], "[logs truncated") {
				t.Fatalf("%d log lines ending %q, want %d and a note", len(res.Logs), res.Logs[len(res.Logs)-1], tc.kept)
			}
			size := 0
			for _, l := range res.Logs[:tc.kept] {
				size += len(l)
				if !utf8.ValidString(l) {
					t.Fatalf("a kept line is not valid UTF-8: %q", l)
				}
			}
			if size > jsbox.MaxLogBytes {
				t.Fatalf("kept %d bytes of logs, more than %d", size, jsbox.MaxLogBytes)
			}
		})
	}
}

func TestScriptErrorsNameWhatAndWhere(t *testing.T) {
	// Stringifying a result over the limit takes the guest a while on a loaded machine.
	box := newBox(t, jsbox.Options{Timeout: time.Minute})
	cases := []struct {
		name, source string
		want         jsbox.ScriptError // Message: a part of it
	}{
		{"a thrown Error", "const a = 1\n\nthrow new Error('boom')", jsbox.ScriptError{Name: "Error", Message: "boom", Line: 3}},
		{"a TypeError", "\nnull.x", jsbox.ScriptError{Name: "TypeError", Message: "Cannot read property 'x'", Line: 2}},
		{"a ReferenceError", "\n\n\nreturn missing + 1", jsbox.ScriptError{Name: "ReferenceError", Message: "missing is not defined", Line: 4}},
		{"an error in a nested function", "function f() {\n  throw new RangeError('deep')\n}\nreturn [1].map(f)", jsbox.ScriptError{Name: "RangeError", Message: "deep", Line: 2}},
		// An error's line is where it was made: here, in the constructor.
		{"a custom error", "class MyError extends Error {\n  constructor(m) { super(m); this.name = 'MyError' }\n}\nthrow new MyError('mine')", jsbox.ScriptError{Name: "MyError", Message: "mine", Line: 2}},
		{"an error after await", "await null\nawait null\nthrow new TypeError('late')", jsbox.ScriptError{Name: "TypeError", Message: "late", Line: 3}},
		{"a returned rejection", "\nreturn Promise.reject(new Error('rejected'))", jsbox.ScriptError{Name: "Error", Message: "rejected", Line: 2}},
		{"a thrown string", "throw 'just a string'", jsbox.ScriptError{Name: "Error", Message: "uncaught just a string"}},
		{"a thrown object", "throw {code: 7}", jsbox.ScriptError{Name: "Error", Message: `uncaught {"code":7}`}},
		{"a syntax error", "const a = 1\n\nlet b = ;", jsbox.ScriptError{Name: "SyntaxError", Message: "Unexpected token", Line: 3}},
		{"a redeclaration", "let a\nlet a", jsbox.ScriptError{Name: "SyntaxError", Message: "already been declared", Line: 2}},
		{"an unclosed brace", "if (true) {\n  return 1", jsbox.ScriptError{Name: "SyntaxError", Line: 2}},
		{"a source that closes its function", "}); (function() {", jsbox.ScriptError{Name: "SyntaxError", Message: "closes the function"}},
		{"a function result", "return () => 1", jsbox.ScriptError{Name: "TypeError", Message: "a function, which JSON cannot hold"}},
		{"a cyclic result", "const a = {}\na.a = a\nreturn a", jsbox.ScriptError{Name: "TypeError", Message: "circular"}},
		{"a BigInt result", "return 10n", jsbox.ScriptError{Name: "TypeError", Message: "BigInt"}},
		{"an import, which the engine does not know", "\nreturn await import('fs')", jsbox.ScriptError{Name: "SyntaxError", Message: "Unexpected reserved word", Line: 2}},
		{"a promise nothing settles", "await new Promise(() => {})", jsbox.ScriptError{Name: "Error", Message: "nothing can settle"}},
		{"a result too large", "return 'x'.repeat(2 << 20)", jsbox.ScriptError{Name: jsbox.SizeLimitError, Message: "more than the 1048576 allowed"}},
		{"a source too large", "return 1 //" + strings.Repeat("x", jsbox.MaxSourceBytes), jsbox.ScriptError{Name: jsbox.SizeLimitError, Message: "the source is"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := eval(t, box, tc.source, nil)
			got := res.Err
			if got == nil {
				t.Fatalf("value %s, want %s", res.Value, &tc.want)
			}
			if got.Name != tc.want.Name || got.Line != tc.want.Line || !strings.Contains(got.Message, tc.want.Message) || res.Value != nil {
				t.Fatalf("error %#v, want %#v (message containing that)", got, tc.want)
			}
		})
	}
}

func TestVarsOverTheLimitAreAScriptError(t *testing.T) {
	box := newBox(t, jsbox.Options{})
	big := json.RawMessage(`"` + strings.Repeat("x", jsbox.MaxVarsBytes) + `"`)
	res := eval(t, box, "return 1", map[string]json.RawMessage{"input": big})
	if res.Err == nil || res.Err.Name != jsbox.SizeLimitError || !strings.Contains(res.Err.Message, "vars") {
		t.Fatalf("error %v, want a SizeLimitError about the vars", res.Err)
	}
}

func TestCallerMistakesAreGoErrors(t *testing.T) {
	ctx := context.Background()
	box := newBox(t, jsbox.Options{})
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		vars map[string]json.RawMessage
		says string
	}{
		{"a var that is not JSON", ctx, map[string]json.RawMessage{"input": json.RawMessage("{")}, "var input is not JSON"},
		{"a var not named as an identifier", ctx, map[string]json.RawMessage{"a-b": json.RawMessage("1")}, "not named as a JavaScript identifier"},
		{"a cancelled context", cancelled, nil, context.Canceled.Error()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := box.Eval(tc.ctx, "return 1", tc.vars)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Eval: %v, want an error saying %q", err, tc.says)
			}
		})
	}
	box.Close(ctx)
	if _, err := box.Eval(ctx, "return 1", nil); err == nil {
		t.Fatal("Eval on a closed box succeeded")
	}
}

// TestHostileScriptsAreContained runs each script, then a normal one on the same box: the
// failure must cost that evaluation only. Each box has one instance, so the normal evaluation
// needs the instance the hostile one left, or its replacement.
func TestHostileScriptsAreContained(t *testing.T) {
	looping := newBox(t, jsbox.Options{PoolSize: 1, Timeout: time.Second})
	// A small memory cap is quick to exhaust, and a generous deadline makes sure that it is the
	// cap that stops the script however loaded the machine is.
	greedy := newBox(t, jsbox.Options{PoolSize: 1, Timeout: time.Minute, MemoryLimitMiB: 16})
	// The engine's stack, capped below the default memory cap, runs out first.
	deep := newBox(t, jsbox.Options{PoolSize: 1, Timeout: time.Minute})
	outOfMemory := []string{jsbox.MemoryLimitError, "RangeError"}
	cases := []struct {
		name, source string
		box          *jsbox.Box
		names        []string // any of these
	}{
		{"an endless loop", "while (true) {}", looping, []string{jsbox.TimeoutError}},
		{"endless microtasks", "for (;;) await null", looping, []string{jsbox.TimeoutError}},
		{"a 4 GiB array", "return new Array(1e9).fill(1).length", greedy, outOfMemory},
		{"string doubling", "let s = 'x'\nfor (;;) s += s", greedy, outOfMemory},
		{"objects without end", "const a = []\nfor (;;) a.push({i: a.length})", greedy, outOfMemory},
		{"deep recursion", "function f(n) { return f(n + 1) + 1 }\nreturn f(0)", greedy, []string{"RangeError"}},
		{"deep recursion through natives", "function f() { return [0].map(f) }\nreturn f()", greedy, []string{"RangeError"}},
		{"a deeply nested result", "let a = []\nfor (let i = 0; i < 1e6; i++) a = [a]\nreturn a", greedy, outOfMemory},
		{"deeply nested source", "return " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000), deep, []string{"RangeError"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := eval(t, tc.box, tc.source, nil)
			if res.Err == nil || !slices.Contains(tc.names, res.Err.Name) {
				t.Fatalf("result %s, error %v; want one of %v", res.Value, res.Err, tc.names)
			}
			t.Logf("%v", res.Err)
			wantValue(t, eval(t, tc.box, "return 1 + 1", nil), "2")
		})
	}
}

func TestScriptsSeeNothingOfTheHost(t *testing.T) {
	box := newBox(t, jsbox.Options{})
	cases := []struct {
		name, source, want string
	}{
		{"the constructor escape", "return this.constructor.constructor('return typeof process')()", `"undefined"`},
		{"the global object", "return Object.keys(Function('return this')()).filter(k => k !== 'console' && k !== 'input')", "[]"},
		{"host APIs", "return [typeof require, typeof process, typeof module, typeof fetch, typeof XMLHttpRequest, typeof WebAssembly, typeof setTimeout, typeof Deno, typeof Bun].filter(t => t !== 'undefined')", "[]"},
		{"the clock, a fake from 2022", "const t = Date.now()\nreturn t >= Date.UTC(2022, 0, 1) && t < Date.UTC(2022, 0, 2)", "true"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantValue(t, eval(t, box, tc.source, map[string]json.RawMessage{"input": json.RawMessage("1")}), tc.want)
		})
	}
}

func TestEvaluationsShareNoState(t *testing.T) {
	box := newBox(t, jsbox.Options{PoolSize: 1})
	wantValue(t, eval(t, box, `
Object.prototype.polluted = 1
Array.prototype.push = null
globalThis.leak = 2
JSON.stringify = () => "tampered"
return 1`, nil), "1")
	wantValue(t, eval(t, box, `return [({}).polluted === undefined, typeof [].push, typeof leak, JSON.stringify(1)]`, nil),
		`[true, "function", "undefined", "1"]`)
}

func TestConcurrentEvaluationsAreIndependent(t *testing.T) {
	box := newBox(t, jsbox.Options{PoolSize: 3})
	const workers, each = 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				n := w*100 + i
				res, err := box.Eval(context.Background(), "globalThis.seen = (globalThis.seen || 0) + 1\nconsole.log(input)\nreturn input * 2 + seen",
					map[string]json.RawMessage{"input": json.RawMessage(fmt.Sprint(n))})
				switch {
				case err != nil:
					errs <- err
				case res.Err != nil:
					errs <- res.Err
				case string(res.Value) != fmt.Sprint(n*2+1) || !slices.Equal(res.Logs, []string{fmt.Sprint(n)}):
					errs <- fmt.Errorf("input %d gave %s, logs %q", n, res.Value, res.Logs)
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

func TestCheckFindsSyntaxErrorsWithoutRunningTheScript(t *testing.T) {
	b := newBox(t, jsbox.Options{})
	cases := []struct {
		name, source string
		wantLine     int
	}{
		{"a valid script", "while (true) {}\nreturn 1", 0},
		{"a syntax error on line 2", "const a = 1;\nconst b = ;", 2},
		{"a redeclared let", "let a = 1;\nlet a = 2;", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := b.Check(t.Context(), tc.source)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantLine == 0 && got != nil:
				t.Fatalf("Check = %v, want none", got)
			case tc.wantLine != 0 && (got == nil || got.Line != tc.wantLine):
				t.Fatalf("Check = %v, want an error on line %d", got, tc.wantLine)
			}
		})
	}
}

// TestCheckAppliesTheSourceLimitToTheSourceAlone: a source Eval accepts passes Check, whatever
// Check adds to it to compile it without running it.
func TestCheckAppliesTheSourceLimitToTheSourceAlone(t *testing.T) {
	b := newBox(t, jsbox.Options{})
	atLimit := "return 1 //" + strings.Repeat("x", jsbox.MaxSourceBytes-len("return 1 //"))
	if got, err := b.Check(t.Context(), atLimit); err != nil || got != nil {
		t.Fatalf("Check of a source at the limit = %v, %v; want none", got, err)
	}
	got, err := b.Check(t.Context(), atLimit+"x")
	if err != nil || got == nil || got.Name != jsbox.SizeLimitError {
		t.Fatalf("Check of a source over the limit = %v, %v; want a %s", got, err, jsbox.SizeLimitError)
	}
}
