// Package engine evaluates one script in a fresh goja runtime: the JavaScript half of jsbox,
// which the guest runs inside WebAssembly and the benchmarks run natively as the baseline. It
// decides what a script means — the source is the body of an async function, its result is
// awaited and turned into JSON, console output is collected under a cap — and turns everything
// that goes wrong into a protocol.Error. It knows nothing of sandboxing: limits on time and
// memory are the host's.
package engine

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"

	"github.com/hangar-dev/hangar/automation/jsbox/internal/protocol"
)

// filename names the script in goja's positions; stack traces are searched for it.
const filename = "script.js"

// The source goes between these, so its lines keep their numbers: the prefix shares line 1 and
// the suffix starts a line of its own, which a trailing // comment cannot swallow.
const (
	wrapperPrefix = "(async function() {"
	wrapperSuffix = "\n})"
)

// Eval runs req.Source with req.Vars bound as globals, in a runtime of its own.
func Eval(req protocol.Request) (resp protocol.Response) {
	e := &evaluation{vm: goja.New(), lines: strings.Count(req.Source, "\n") + 1}
	defer func() {
		// A Go panic out of goja is the engine's failure, not the script's; it ends this
		// evaluation only, since the runtime is thrown away.
		if r := recover(); r != nil {
			resp = protocol.Response{Error: &protocol.Error{Name: protocol.ErrorInternal, Message: fmt.Sprint(r)}}
		}
		resp.Logs = e.logs.result()
	}()
	value, err := e.run(req)
	if err != nil {
		return protocol.Response{Error: err}
	}
	return protocol.Response{Value: value}
}

type evaluation struct {
	vm    *goja.Runtime
	lines int // of the user's source, to keep reported lines inside it
	logs  logs
	// The builtins the engine itself uses, taken before the script can replace them.
	stringify, parse goja.Callable
}

func (e *evaluation) run(req protocol.Request) ([]byte, *protocol.Error) {
	e.vm.SetMaxCallStackSize(protocol.MaxCallDepth)
	json := e.vm.Get("JSON").ToObject(e.vm)
	e.stringify, _ = goja.AssertFunction(json.Get("stringify"))
	e.parse, _ = goja.AssertFunction(json.Get("parse"))
	if err := e.installConsole(); err != nil {
		return nil, err
	}
	for name, raw := range req.Vars {
		v, err := e.parse(goja.Undefined(), e.vm.ToValue(string(raw)))
		if err == nil {
			err = e.vm.Set(name, v)
		}
		if err != nil {
			return nil, e.failure(err)
		}
	}

	fn, perr := e.compile(req.Source)
	if perr != nil {
		return nil, perr
	}
	// Called with this undefined, so that sloppy-mode code sees the global object as this.
	ret, err := fn(goja.Undefined())
	if err != nil {
		return nil, e.failure(err)
	}
	// The job queue ran dry when the call returned, so the promise is as settled as it gets.
	promise, ok := ret.Export().(*goja.Promise)
	if !ok {
		return nil, &protocol.Error{Name: protocol.ErrorInternal, Message: fmt.Sprintf("the script's function returned %T, not a promise", ret.Export())}
	}
	switch promise.State() {
	case goja.PromiseStateRejected:
		return nil, e.thrown(promise.Result())
	case goja.PromiseStatePending:
		return nil, &protocol.Error{Name: "Error", Message: "the script awaits a promise that nothing can settle: the sandbox has no timers or I/O"}
	}
	return e.toJSON(promise.Result())
}

// compile makes the script's function. Syntax errors come from the parser, which knows their
// lines; errors the compiler finds later (a redeclared let) carry an offset instead.
func (e *evaluation) compile(source string) (goja.Callable, *protocol.Error) {
	wrapped := wrapperPrefix + source + wrapperSuffix
	program, err := parser.ParseFile(nil, filename, wrapped, 0)
	if err != nil {
		if list, ok := err.(parser.ErrorList); ok && len(list) > 0 {
			return nil, &protocol.Error{Name: "SyntaxError", Message: list[0].Message, Line: e.line(list[0].Position.Line)}
		}
		return nil, &protocol.Error{Name: "SyntaxError", Message: err.Error()}
	}
	// A source that closes the function early would run statements outside it and skip the
	// await of its result: the program must be the one function literal and nothing else.
	if len(program.Body) != 1 || !isFunctionLiteral(program.Body[0]) {
		return nil, &protocol.Error{Name: "SyntaxError", Message: "Unexpected '}': the source closes the function it is the body of"}
	}
	compiled, err := goja.CompileAST(program, false)
	if err != nil {
		name := "SyntaxError"
		var ce *goja.CompilerError
		switch err := err.(type) {
		case *goja.CompilerSyntaxError:
			ce = &err.CompilerError
		case *goja.CompilerReferenceError:
			name, ce = "ReferenceError", &err.CompilerError
		default:
			return nil, &protocol.Error{Name: name, Message: err.Error()}
		}
		// Offset is 1-based, like goja's file positions.
		return nil, &protocol.Error{Name: name, Message: ce.Message, Line: e.line(strings.Count(wrapped[:min(max(ce.Offset-1, 0), len(wrapped))], "\n") + 1)}
	}
	fnValue, err := e.vm.RunProgram(compiled)
	if err != nil {
		return nil, e.failure(err)
	}
	fn, ok := goja.AssertFunction(fnValue)
	if !ok {
		return nil, &protocol.Error{Name: protocol.ErrorInternal, Message: "the wrapped script is not a function"}
	}
	return fn, nil
}

func isFunctionLiteral(s ast.Statement) bool {
	stmt, ok := s.(*ast.ExpressionStatement)
	if !ok {
		return false
	}
	_, ok = stmt.Expression.(*ast.FunctionLiteral)
	return ok
}

// toJSON is the result as JSON: null for undefined, an error for what JSON cannot hold.
func (e *evaluation) toJSON(v goja.Value) ([]byte, *protocol.Error) {
	if goja.IsUndefined(v) {
		return []byte("null"), nil
	}
	out, err := e.stringify(goja.Undefined(), v)
	if err != nil {
		return nil, e.failure(err)
	}
	if goja.IsUndefined(out) {
		return nil, &protocol.Error{Name: "TypeError", Message: fmt.Sprintf("the result is %s, which JSON cannot hold", unserialisable(v))}
	}
	s := out.String()
	if len(s) > protocol.MaxResultBytes {
		return nil, &protocol.Error{Name: protocol.ErrorSizeLimit, Message: fmt.Sprintf("the result is %d bytes of JSON, more than the %d allowed", len(s), protocol.MaxResultBytes)}
	}
	return []byte(s), nil
}

// unserialisable says what a value JSON.stringify gives undefined for is.
func unserialisable(v goja.Value) string {
	if _, ok := goja.AssertFunction(v); ok {
		return "a function"
	}
	if _, ok := v.(*goja.Symbol); ok {
		return "a symbol"
	}
	return "a value whose toJSON gives undefined"
}

// failure is the script error of an error goja returned.
func (e *evaluation) failure(err error) *protocol.Error {
	switch err := err.(type) {
	case *goja.Exception:
		pe := e.thrown(err.Value())
		if pe.Line == 0 {
			pe.Line = e.stackLine(err.Stack())
		}
		return pe
	case *goja.StackOverflowError:
		return &protocol.Error{Name: "RangeError", Message: "Maximum call stack size exceeded", Line: e.stackLine(err.Stack())}
	}
	return &protocol.Error{Name: protocol.ErrorInternal, Message: err.Error()}
}

// stackLine is the line of the innermost frame of stack in the script, 0 if none is.
func (e *evaluation) stackLine(stack []goja.StackFrame) int {
	for _, f := range stack {
		if f.SrcName() == filename {
			return e.line(f.Position().Line)
		}
	}
	return 0
}

// stackPosition finds the innermost position in the script in an error's stack property.
var stackPosition = regexp.MustCompile(regexp.QuoteMeta(filename) + `:(\d+):\d+`)

// thrown is the script error of a value the script threw (or a promise it returned rejected
// with): an Error's name, message and the line it was made on, or the value itself.
func (e *evaluation) thrown(v goja.Value) *protocol.Error {
	obj, ok := v.(*goja.Object)
	if !ok || obj.ClassName() != "Error" {
		return &protocol.Error{Name: "Error", Message: "uncaught " + e.show(v)}
	}
	pe := &protocol.Error{Name: e.property(obj, "name"), Message: e.property(obj, "message")}
	if m := stackPosition.FindStringSubmatch(e.property(obj, "stack")); m != nil {
		n, _ := strconv.Atoi(m[1])
		pe.Line = e.line(n)
	}
	if pe.Name == "" {
		pe.Name = "Error"
	}
	return pe
}

// property reads obj[key] as a string; "" when reading it throws, since a getter is the
// script's code.
func (e *evaluation) property(obj *goja.Object, key string) (s string) {
	defer func() {
		if recover() != nil {
			s = ""
		}
	}()
	v := obj.Get(key)
	if v == nil || goja.IsUndefined(v) {
		return ""
	}
	return v.String()
}

// line keeps a line of the wrapped source inside the user's: errors at the wrapper's closing
// line (an unclosed brace) are at the user's last.
func (e *evaluation) line(n int) int { return min(max(n, 1), e.lines) }

func (e *evaluation) installConsole() *protocol.Error {
	console := e.vm.NewObject()
	for _, level := range []string{"log", "info", "warn", "error"} {
		err := console.Set(level, func(call goja.FunctionCall) goja.Value {
			parts := make([]string, len(call.Arguments))
			for i, a := range call.Arguments {
				parts[i] = e.show(a)
			}
			e.logs.add(strings.Join(parts, " "))
			return goja.Undefined()
		})
		if err != nil {
			return e.failure(err)
		}
	}
	if err := e.vm.Set("console", console); err != nil {
		return e.failure(err)
	}
	return nil
}

// show is how a value reads in logs and messages: strings as they are, errors as
// "Name: message", other objects as JSON when they have one, the rest as JavaScript prints them.
func (e *evaluation) show(v goja.Value) (s string) {
	defer func() {
		// A toString or toJSON of the script's that throws leaves the value unprintable.
		if recover() != nil {
			s = "[unprintable value]"
		}
	}()
	if str, ok := v.Export().(string); ok {
		return str
	}
	obj, ok := v.(*goja.Object)
	if !ok {
		return v.String()
	}
	if obj.ClassName() == "Error" {
		return e.property(obj, "name") + ": " + e.property(obj, "message")
	}
	if _, isFunc := goja.AssertFunction(obj); !isFunc {
		if out, err := e.stringify(goja.Undefined(), obj); err == nil && !goja.IsUndefined(out) {
			return out.String()
		}
	}
	return obj.String()
}

// logs collects console output up to protocol.MaxLogLines lines and MaxLogBytes bytes.
type logs struct {
	lines   []string
	bytes   int
	dropped int  // lines not kept at all
	cut     bool // a line kept only in part
}

func (l *logs) add(line string) {
	room := protocol.MaxLogBytes - l.bytes
	if len(l.lines) >= protocol.MaxLogLines || room <= 0 {
		l.dropped++
		return
	}
	if len(line) > room {
		for room > 0 && !utf8.RuneStart(line[room]) {
			room--
		}
		line, l.cut = line[:room], true
	}
	l.lines = append(l.lines, line)
	l.bytes += len(line)
}

// result is the lines kept, with a last one saying what was not.
func (l *logs) result() []string {
	if l.dropped == 0 && !l.cut {
		return l.lines
	}
	return append(l.lines, fmt.Sprintf("[logs truncated: %d more lines dropped; at most %d lines and %d KiB are kept]",
		l.dropped, protocol.MaxLogLines, protocol.MaxLogBytes>>10))
}
