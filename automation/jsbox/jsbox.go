// Package jsbox runs untrusted JavaScript for automations: goja, compiled to WebAssembly
// (automation/jsbox/guest, built by `make plugins` and embedded), runs in a wazero sandbox as
// the harness plugins do (runtimes/wasm). A script gets a memory cap, a CPU deadline and
// nothing of the host: no files, network, environment, process or real clock. WASI's clocks are
// wazero's default fakes — wall time starts at 2022-01-01T00:00:00Z in each instance and moves
// 1 ms per reading — so Date sees early 2022, never the host's time; pass the time as a var.
//
// # Scripts
//
// The source is the body of an async function: what it returns is the result, and a script
// that returns nothing gives undefined, which is the JSON null. It may await; a returned promise
// is awaited by running the job queue dry (there are no timers or I/O, so a promise nothing
// settles is an error). The result must be what JSON can hold — JSON.stringify's rules, so NaN
// becomes null — and becomes Result.Value.
//
// The vars of Eval are bound as globals, each JSON value parsed as by JSON.parse: EvalCode
// binds input; automation code blocks bind event, inputs, steps, instance and now.
// console.log, info, warn and error append their arguments, space-separated (strings as they
// are, other objects as JSON), as a line of Result.Logs.
//
// Every evaluation runs in a fresh JavaScript runtime, so nothing a script does to globals or
// prototypes is seen by the next. Runtimes live in WebAssembly instances that are pooled: an
// evaluation that times out, exhausts memory or crashes the engine discards its instance (and
// the logs it had written), and a later one makes a new instance. The guest's minimum memory is
// about 10 MiB, so New refuses a smaller MemoryLimitMiB.
//
// # Errors
//
// Eval returns a Go error only for failures of the host or the caller (a closed Box, a
// cancelled context, vars that are not JSON or named other than as identifiers, a crash of the
// engine that is not the script's doing). Whatever the script does wrong is Result.Err, a
// *ScriptError named:
//
//   - as JavaScript names it: SyntaxError, ReferenceError, TypeError, Error, a custom error's
//     name, with the line in the source (1-based) where it was made or thrown; a thrown
//     non-Error value is an "Error" whose message shows the value;
//   - RangeError, for calls nested deeper than MaxCallDepth (like Python's default, since
//     unwinding deep recursion through built-ins costs the engine time quadratic in the depth)
//     or the engine's own stack exhausted (parsing very deeply nested source);
//   - TimeoutError, for running past Options.Timeout;
//   - MemoryLimitError, for exhausting Options.MemoryLimitMiB;
//   - SizeLimitError, for a source over MaxSourceBytes, vars over MaxVarsBytes in all, or a
//     result over MaxResultBytes of JSON.
//
// Logs keep at most MaxLogLines lines and MaxLogBytes bytes; when some were dropped or cut, a
// last line says so.
package jsbox

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/automation/jsbox/internal/protocol"
	"github.com/hangar-dev/hangar/runtimes/wasm"
)

// Limits of one evaluation; see the package doc for what exceeding them gives.
const (
	MaxSourceBytes = protocol.MaxSourceBytes
	MaxVarsBytes   = protocol.MaxVarsBytes
	MaxResultBytes = protocol.MaxResultBytes
	MaxLogLines    = protocol.MaxLogLines
	MaxLogBytes    = protocol.MaxLogBytes
	MaxCallDepth   = protocol.MaxCallDepth
)

// Names of the script errors that JavaScript does not define.
const (
	TimeoutError     = protocol.ErrorTimeout
	MemoryLimitError = protocol.ErrorMemory
	SizeLimitError   = protocol.ErrorSizeLimit
)

// Defaults for Options left zero.
const (
	DefaultMemoryLimitMiB = 64
	DefaultTimeout        = 2 * time.Second
	DefaultPoolSize       = 2
)

// ErrNotBuilt is New's error in a binary built without the guest: run `make plugins` first.
var ErrNotBuilt = errors.New("jsbox: the JavaScript guest is not built into this binary; run `make plugins`")

const wasmPath = "wasm/jsbox.wasm"

//go:embed wasm
var wasmFiles embed.FS

// Options bound what evaluations may cost. Zero values take the defaults.
type Options struct {
	// MemoryLimitMiB caps the memory of each instance, the engine's included (DefaultMemoryLimitMiB).
	MemoryLimitMiB int
	// Timeout is the CPU deadline of one evaluation (DefaultTimeout).
	Timeout time.Duration
	// PoolSize is how many instances may exist, each running one evaluation at a time; they
	// are made on demand and kept warm, and further concurrent Evals wait (DefaultPoolSize).
	PoolSize int
	// CacheDir keeps the compiled guest on disk across processes; "" compiles it in memory,
	// which takes seconds on every New.
	CacheDir string
}

// Box evaluates scripts. It is safe for concurrent use.
type Box struct {
	rt    *wasm.Runtime
	guest *wasm.Module
	opts  Options
}

// Result is what one evaluation gave.
type Result struct {
	// Value is the JSON of the result: "null" for undefined, nil when Err is set.
	Value json.RawMessage
	Logs  []string
	Err   *ScriptError
	// Duration is the wall time of the evaluation, making an instance for it included.
	Duration time.Duration
}

// ScriptError is what went wrong in a script; see the package doc for the names.
type ScriptError struct {
	Name    string
	Message string
	Line    int // 1-based in the source; 0 when unknown
}

func (e *ScriptError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s: %s (line %d)", e.Name, e.Message, e.Line)
	}
	return e.Name + ": " + e.Message
}

// New compiles the guest (from the cache when it was compiled before). Instances are made by
// the evaluations that need them.
func New(ctx context.Context, opts Options) (*Box, error) {
	if opts.MemoryLimitMiB < 0 || opts.Timeout < 0 || opts.PoolSize < 0 {
		return nil, fmt.Errorf("jsbox: negative MemoryLimitMiB, Timeout or PoolSize: %+v", opts)
	}
	if opts.MemoryLimitMiB == 0 {
		opts.MemoryLimitMiB = DefaultMemoryLimitMiB
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.PoolSize == 0 {
		opts.PoolSize = DefaultPoolSize
	}
	module, err := wasmFiles.ReadFile(wasmPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotBuilt
	} else if err != nil {
		return nil, fmt.Errorf("jsbox: read the embedded guest: %w", err)
	}
	rt, err := wasm.NewRuntime(ctx, wasm.Options{
		CacheDir:         opts.CacheDir,
		CallTimeout:      opts.Timeout,
		MemoryLimitBytes: uint64(opts.MemoryLimitMiB) << 20,
		// Room for the largest result, the logs escaped and the envelope.
		MaxReplyBytes: MaxResultBytes + 8*MaxLogBytes + 64<<10,
		Instances:     opts.PoolSize,
	})
	if err != nil {
		return nil, fmt.Errorf("jsbox: %w", err)
	}
	guest, err := rt.Load(ctx, wasm.Spec{Name: "jsbox", Exports: map[string]wasm.Signature{protocol.ExportEval: wasm.RequestAnswer}}, module)
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("jsbox: load the guest: %w", err)
	}
	return &Box{rt: rt, guest: guest, opts: opts}, nil
}

// Close frees the instances and the compiled guest; evaluations in flight fail.
func (b *Box) Close(ctx context.Context) error {
	return errors.Join(b.guest.Close(ctx), b.rt.Close(ctx))
}

// identifier is what a var may be named: a name scripts can use as a plain global.
var identifier = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// Eval runs source with vars bound as globals; see the package doc.
func (b *Box) Eval(ctx context.Context, source string, vars map[string]json.RawMessage) (Result, error) {
	if se := sourceTooLarge(source); se != nil {
		return Result{Err: se}, nil
	}
	return b.eval(ctx, source, vars)
}

// sourceTooLarge is the SizeLimitError of a source over MaxSourceBytes, nil for any other.
func sourceTooLarge(source string) *ScriptError {
	if len(source) > MaxSourceBytes {
		return failed(SizeLimitError, "the source is %d bytes, more than the %d allowed", len(source), MaxSourceBytes).Err
	}
	return nil
}

// eval is Eval once the source's size is known to be within the limit.
func (b *Box) eval(ctx context.Context, source string, vars map[string]json.RawMessage) (Result, error) {
	size := 0
	for name, v := range vars {
		if !identifier.MatchString(name) {
			return Result{}, fmt.Errorf("jsbox: var %q is not named as a JavaScript identifier", name)
		}
		if !json.Valid(v) {
			return Result{}, fmt.Errorf("jsbox: var %s is not JSON", name)
		}
		size += len(v)
	}
	if size > MaxVarsBytes {
		return failed(SizeLimitError, "the vars are %d bytes of JSON, more than the %d allowed", size, MaxVarsBytes), nil
	}

	start := time.Now()
	out, err := b.guest.Call(ctx, protocol.ExportEval, protocol.Request{
		Source:           source,
		Vars:             vars,
		MemoryLimitBytes: int64(b.opts.MemoryLimitMiB) << 20,
	})
	took := time.Since(start)
	if err != nil {
		res, err := b.scriptFailure(err)
		res.Duration = took
		return res, err
	}
	var resp protocol.Response
	if err := json.Unmarshal(out, &resp); err != nil {
		return Result{}, fmt.Errorf("jsbox: the guest answered %.200q: %w", out, err)
	}
	res := Result{Value: resp.Value, Logs: resp.Logs, Duration: took}
	if resp.Error != nil {
		res.Value = nil
		res.Err = &ScriptError{Name: resp.Error.Name, Message: resp.Error.Message, Line: resp.Error.Line}
	} else if len(res.Value) == 0 {
		res.Value = json.RawMessage("null")
	}
	return res, nil
}

// scriptFailure tells what the script did (its instance gone, and the logs with it) from a
// failure of the host or the guest.
func (b *Box) scriptFailure(err error) (Result, error) {
	var pe *wasm.Error
	if !errors.As(err, &pe) || pe.Export != protocol.ExportEval {
		return Result{}, fmt.Errorf("jsbox: %w", err)
	}
	switch {
	case errors.Is(err, wasm.ErrTimeout):
		return failed(TimeoutError, "the script ran past its %s deadline", b.opts.Timeout), nil
	case errors.Is(err, wasm.ErrMemory):
		return failed(MemoryLimitError, "the script exhausted the sandbox's %d MiB of memory", b.opts.MemoryLimitMiB), nil
	case errors.Is(err, wasm.ErrTrap) && strings.Contains(pe.Detail, "goroutine stack exceeds"):
		return failed("RangeError", "Maximum call stack size exceeded (in the engine)"), nil
	}
	return Result{}, fmt.Errorf("jsbox: %w", err)
}

func failed(name, format string, args ...any) Result {
	return Result{Err: &ScriptError{Name: name, Message: fmt.Sprintf(format, args...)}}
}

// checkPrefix makes a checked script return before its first statement: the engine still
// parses and compiles all of it (hoisting runs nothing), and it shares line 1, so lines keep
// their numbers.
const checkPrefix = "return;"

// Check compiles source without running it, in the sandbox (parsing a hostile source can
// exhaust a stack too), and answers its syntax or early reference error, nil when it compiles.
func (b *Box) Check(ctx context.Context, source string) (*ScriptError, error) {
	// The limit is the user's source's: the prefix must not make one that Eval runs fail here.
	if se := sourceTooLarge(source); se != nil {
		return se, nil
	}
	res, err := b.eval(ctx, checkPrefix+source, nil)
	if err != nil {
		return nil, err
	}
	if res.Err != nil && (res.Err.Name == "SyntaxError" || res.Err.Name == "ReferenceError") {
		return res.Err, nil
	}
	return nil, nil
}
