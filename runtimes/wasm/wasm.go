// Package wasm runs untrusted WebAssembly modules in wazero: it compiles a module (through a
// compilation cache), checks its exports and imports against a Spec, keeps a pool of sandboxed
// instances per module, and turns every call into either a checked answer or a typed *Error.
// Whatever a module does — loop, trap, exhaust its memory or answer garbage — costs at most
// that call and that instance, never the host process. The harness plugins
// (harnesses/harness) and automation/jsbox's JavaScript engine run on it.
//
// # Calling convention
//
// A request is JSON written into a buffer the module hands out from ExportAlloc
// (func(size i32) -> ptr i32); an export taking it is func(ptr i32, len i32) -> i64
// (RequestAnswer), one taking none func() -> i64 (Answer). The answer lies in the module's memory,
// returned as (ptr << 32 | len), and is JSON with exactly one of "ok" (the result) and "error"
// (a refusal): harnesses/abi's Reply. A request of type Raw is written as it is, for an export
// that takes bytes rather than JSON.
package wasm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Defaults for Options left zero.
const (
	DefaultCallTimeout = 2 * time.Second
	// DefaultInstantiateTimeout bounds an instance's start-up: a module's own set-up (goja's
	// runtime, a plugin's globals) does not depend on the input, and on a busy machine it can
	// take longer than the deadline of the calls that follow.
	DefaultInstantiateTimeout = 30 * time.Second
	DefaultMemoryLimitBytes   = 256 << 20
	DefaultMaxReplyBytes      = 16 << 20
	DefaultRecycleCalls       = 10000
)

// pageSize is the WebAssembly page size.
const pageSize = 65536

// Options bound what a module may cost. Zero values take the defaults.
type Options struct {
	// CacheDir keeps compiled modules on disk across processes; "" keeps them in memory only.
	CacheDir string
	// CallTimeout bounds each call into a module (DefaultCallTimeout).
	CallTimeout time.Duration
	// InstantiateTimeout bounds starting an instance, its _initialize included
	// (DefaultInstantiateTimeout).
	InstantiateTimeout time.Duration
	// MemoryLimitBytes caps each instance's linear memory (DefaultMemoryLimitBytes), rounded
	// down to whole 64 KiB pages.
	MemoryLimitBytes uint64
	// MaxReplyBytes is the largest answer accepted (DefaultMaxReplyBytes).
	MaxReplyBytes int
	// Instances is how many instances of one module may exist and run at once
	// (runtime.GOMAXPROCS(0)); further calls wait for one to be free.
	Instances int
	// RecycleMemoryBytes and RecycleCalls bound an instance's life: after the call that leaves
	// its linear memory at RecycleMemoryBytes or more (MemoryLimitBytes/2), or its
	// RecycleCalls-th call (DefaultRecycleCalls), it is closed rather than pooled, and the next
	// call gets a fresh one. A Go guest's memory never shrinks, and a heap its collector no
	// longer keeps up with would otherwise grow into the limit and fail calls that had done
	// nothing wrong. Calls hand a module all they need (a harness plugin's parse state comes
	// with each request), so a fresh instance answers as the old one would.
	RecycleMemoryBytes uint64
	RecycleCalls       int
}

func (o Options) withDefaults() (Options, error) {
	if o.CallTimeout < 0 || o.InstantiateTimeout < 0 || o.MaxReplyBytes < 0 || o.Instances < 0 || o.RecycleCalls < 0 {
		return o, fmt.Errorf("wasm runtime options: negative CallTimeout, InstantiateTimeout, MaxReplyBytes, Instances or RecycleCalls: %+v", o)
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.InstantiateTimeout == 0 {
		o.InstantiateTimeout = DefaultInstantiateTimeout
	}
	if o.MemoryLimitBytes == 0 {
		o.MemoryLimitBytes = DefaultMemoryLimitBytes
	}
	if o.MemoryLimitBytes < pageSize || o.MemoryLimitBytes > 1<<32 {
		return o, fmt.Errorf("wasm runtime options: MemoryLimitBytes %d is not between 64 KiB and 4 GiB", o.MemoryLimitBytes)
	}
	if o.MaxReplyBytes == 0 {
		o.MaxReplyBytes = DefaultMaxReplyBytes
	}
	if o.Instances == 0 {
		o.Instances = runtime.GOMAXPROCS(0)
	}
	if o.RecycleMemoryBytes == 0 {
		o.RecycleMemoryBytes = o.MemoryLimitBytes / 2
	}
	if o.RecycleCalls == 0 {
		o.RecycleCalls = DefaultRecycleCalls
	}
	return o, nil
}

// Runtime compiles and runs modules; all modules loaded by one Runtime share its compilation
// cache and options. It is safe for concurrent use.
type Runtime struct {
	opts   Options
	wz     wazero.Runtime
	cache  wazero.CompilationCache
	wasi   map[string]api.FunctionDefinition // what a module may import
	closed atomic.Bool
}

// NewRuntime starts a runtime with WASI preview 1 and nothing else for modules to import.
func NewRuntime(ctx context.Context, opts Options) (*Runtime, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	var cache wazero.CompilationCache
	if opts.CacheDir != "" {
		if cache, err = wazero.NewCompilationCacheWithDir(opts.CacheDir); err != nil {
			return nil, fmt.Errorf("wasm compilation cache %s: %w", opts.CacheDir, err)
		}
	} else {
		cache = wazero.NewCompilationCache()
	}
	config := wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(uint32(opts.MemoryLimitBytes / pageSize))
	wz := wazero.NewRuntimeWithConfig(ctx, config)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, wz); err != nil {
		wz.Close(ctx)
		cache.Close(ctx)
		return nil, fmt.Errorf("instantiate WASI: %w", err)
	}
	return &Runtime{
		opts:  opts,
		wz:    wz,
		cache: cache,
		wasi:  wz.Module(wasi_snapshot_preview1.ModuleName).ExportedFunctionDefinitions(),
	}, nil
}

// Close closes every module of the runtime; calls in flight fail. Closing twice is harmless.
func (r *Runtime) Close(ctx context.Context) error {
	if r.closed.Swap(true) {
		return nil
	}
	return errors.Join(r.wz.Close(ctx), r.cache.Close(ctx))
}

// Signature is the type of an export.
type Signature struct{ Params, Results []api.ValueType }

// The signatures of the calling convention.
var (
	// Alloc is ExportAlloc's: a size in, a pointer out.
	Alloc = Signature{[]api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}}
	// RequestAnswer takes a request (ptr, len) and gives an answer (ptr << 32 | len).
	RequestAnswer = Signature{[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}}
	// Answer takes nothing and gives an answer.
	Answer = Signature{nil, []api.ValueType{api.ValueTypeI64}}
)

// ExportAlloc is the export every module has that hands out a buffer for a request.
const ExportAlloc = "hangar_alloc"

// Spec is what a module must be.
type Spec struct {
	// Kind says what the module is in messages ("wasm module" when empty).
	Kind string
	// Name names the module in messages; "" until known (see Module.SetName).
	Name string
	// Exports are the exports the module must have beside ExportAlloc, with their types.
	Exports map[string]Signature
	// Optional are the exports it may leave out, with their types when present.
	Optional map[string]Signature
}

const initializeExport = "_initialize"

// Load compiles a module (from the cache when it was compiled before) and checks it against
// spec. Instances are made when calls need them, so a module that cannot initialise fails its
// first call rather than the load.
func (r *Runtime) Load(ctx context.Context, spec Spec, module []byte) (*Module, error) {
	if spec.Kind == "" {
		spec.Kind = "wasm module"
	}
	if r.closed.Load() {
		return nil, &Error{Kind: spec.Kind, Module: spec.Name, Err: ErrClosed, Reason: "the wasm runtime is closed"}
	}
	compiled, err := r.wz.CompileModule(ctx, module)
	if err != nil {
		return nil, &Error{Kind: spec.Kind, Module: spec.Name, Err: ErrBadModule, Reason: fmt.Sprintf("not a WebAssembly module the host can run: %v", err)}
	}
	init, err := r.checkLinks(compiled, spec)
	if err != nil {
		compiled.Close(ctx)
		return nil, &Error{Kind: spec.Kind, Module: spec.Name, Err: ErrBadModule, Reason: err.Error()}
	}
	return newModule(r, spec, compiled, init), nil
}

// checkLinks refuses a module whose exports are not spec's or whose imports the runtime does not
// provide, so that such a module fails here with a reason rather than at its first call. It
// reports whether the module has an _initialize to run per instance.
func (r *Runtime) checkLinks(compiled wazero.CompiledModule, spec Spec) (initialize bool, err error) {
	exports := compiled.ExportedFunctions()
	required := map[string]Signature{ExportAlloc: Alloc}
	for name, sig := range spec.Exports {
		required[name] = sig
	}
	for _, set := range []struct {
		sigs     map[string]Signature
		required bool
	}{{required, true}, {spec.Optional, false}} {
		for name, want := range set.sigs {
			def, ok := exports[name]
			if !ok {
				if set.required {
					return false, fmt.Errorf("the module does not export %s", name)
				}
				continue
			}
			if !slices.Equal(def.ParamTypes(), want.Params) || !slices.Equal(def.ResultTypes(), want.Results) {
				return false, fmt.Errorf("export %s has signature %s, the ABI says %s", name,
					signature(def.ParamTypes(), def.ResultTypes()), signature(want.Params, want.Results))
			}
		}
	}
	if def, ok := exports[initializeExport]; ok {
		if len(def.ParamTypes()) != 0 || len(def.ResultTypes()) != 0 {
			return false, fmt.Errorf("export %s has signature %s, want func()", initializeExport, signature(def.ParamTypes(), def.ResultTypes()))
		}
		initialize = true
	}
	if len(compiled.ExportedMemories()) == 0 {
		return false, errors.New("the module does not export its memory")
	}
	if len(compiled.ImportedMemories()) != 0 {
		return false, errors.New("the module imports a memory; it must define its own")
	}
	for _, imp := range compiled.ImportedFunctions() {
		module, name, _ := imp.Import()
		def, ok := r.wasi[name]
		if module != wasi_snapshot_preview1.ModuleName || !ok {
			return false, fmt.Errorf("the module imports %s.%s; modules may import only %s", module, name, wasi_snapshot_preview1.ModuleName)
		}
		if !slices.Equal(def.ParamTypes(), imp.ParamTypes()) || !slices.Equal(def.ResultTypes(), imp.ResultTypes()) {
			return false, fmt.Errorf("the module imports %s.%s as %s, WASI has %s", module, name,
				signature(imp.ParamTypes(), imp.ResultTypes()), signature(def.ParamTypes(), def.ResultTypes()))
		}
	}
	return initialize, nil
}

func signature(params, results []api.ValueType) string {
	names := func(types []api.ValueType) string {
		s := ""
		for i, t := range types {
			if i > 0 {
				s += ", "
			}
			s += api.ValueTypeName(t)
		}
		return s
	}
	return fmt.Sprintf("func(%s) (%s)", names(params), names(results))
}
